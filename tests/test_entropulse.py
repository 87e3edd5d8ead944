"""`just demo --quick`'s schedule for real: real desktops, the embedded model, every phase trained and evaluated."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.desktop


# The schedule's own time is the demo benchmark's to measure; this is a hang guard, as long as the runs' own
# timeouts below (~9 min on 2 cores in float32; on one core under pytest-xdist, longer).
@pytest.mark.timeout(1500 + 900)
def test_the_quick_schedule_learns_in_bc_and_says_which_phase_had_nothing_to_train_on(tmp_path):
    """What a newcomer sees of `just demo --quick`: every phase run and evaluated, BC's success above the
    base model's on the same test tasks, and a phase that had nothing to train on (RL's groups all flat, no
    success for Entropulse) saying so on its line instead of repeating its previous phase's figures."""
    from PIL import Image

    from computerrl.policy.checkpoint import read_lineage
    from computerrl.stages.presets import schedule

    out, tasks = tmp_path / "quick", schedule("quick").test_tasks
    try:
        done = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "entropulse", "--quick", "--out", str(out)],
                              capture_output=True, text=True, timeout=1500, env={**os.environ, "COLUMNS": "200"})
    finally:  # a schedule killed at the timeout leaves its detached desktops up
        subprocess.run([sys.executable, "-m", "computerrl.cli.main", "spawn-envs", "--out", str(out / "envs"), "--stop"],
                       capture_output=True, timeout=120)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    table = done.stdout[done.stdout.index(f"Entropulse schedule: success on {tasks} held-out tasks, seed 0"):]
    lines = [line.strip() for line in table.splitlines()]
    success = {}
    for phase in ("base", "bc", "rl1", "entropulse", "rl2"):
        assert any(line.startswith(f"{phase} ") for line in lines), table
        summary = json.loads((out / f"eval-{phase}" / "summary.json").read_text())
        assert summary["overall"]["tasks"] == tasks
        success[phase] = summary["overall"]["success_rate"]
    assert success["bc"] > success["base"], success  # BC learned: it solves test tasks the base model does not
    for header in ("success [95% CI]", "seen", "new", "Δ prev (p)", "Δ BC (p)", "H tok", "flat"):
        assert header in table, header
    iterations = done.stdout[done.stdout.index("RL iterations"):].splitlines()
    assert any(line.split()[:2] == ["rl1", "1"] for line in iterations), iterations  # each iteration's flat share
    # the checkpoints chain: base → BC → RL1 → (Entropulse, when RL1 had a success) → RL2
    bc, rl2 = read_lineage(out / "bc"), read_lineage(out / "rl2" / "policy-2")
    assert bc["parent"] == "smollm2-135m-instruct" and read_lineage(out / "rl1/policy-1")["parent"] == bc["policy_version"]
    rows = json.loads((out / "successes" / "summary.json").read_text())["rows"]
    pulse = read_lineage(out / "entropulse") if rows else read_lineage(out / "rl1/policy-1")
    assert (out / "entropulse").exists() == (rows > 0) and rl2["parent"] == pulse["policy_version"]
    for phase, previous in (("rl1", "bc"), ("entropulse", "rl1"), ("rl2", "entropulse")):
        row = next(line for line in lines if line.startswith(f"{phase} "))  # nothing trained: it says so
        trained = (out / "entropulse").exists() if phase == "entropulse" else \
            json.loads((out / f"{phase}/policy-{1 + (phase == 'rl2')}/summary.json").read_text())["rows"] > 0
        why = "(no successes)" if phase == "entropulse" else "(no rows)"
        assert (f"— {why}" in row) != trained, row
        if not trained:
            assert (out / f"eval-{phase}/summary.json").read_text() == (out / f"eval-{previous}/summary.json").read_text()
    assert Image.open(out / "schedule.png").size[0] >= 600
    # rerun: every step is found done, nothing is trained or played again
    again = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "entropulse", "--quick", "--out", str(out)],
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and again.stdout.count("already trained") == 3 + bool(rows), again.stdout[-3000:]
