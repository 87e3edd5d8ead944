"""`just demo --quick`'s schedule for real: real desktops, the embedded model, every phase trained and evaluated."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.desktop


# The schedule's own time is the demo benchmark's to measure; this is a hang guard, as long as the runs' own
# timeouts below. On a CPU with no bfloat16 (AVX2 only) the model runs in float32: ~15 min, not ~4.
@pytest.mark.timeout(1500 + 900)
def test_the_quick_schedule_trains_and_evaluates_every_phase_and_prints_the_table(tmp_path):
    from PIL import Image

    from computerrl.policy.checkpoint import read_lineage

    out = tmp_path / "quick"
    try:
        done = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "entropulse", "--quick", "--out", str(out)],
                              capture_output=True, text=True, timeout=1500, env={**os.environ, "COLUMNS": "200"})
    finally:  # a schedule killed at the timeout leaves its detached desktops up
        subprocess.run([sys.executable, "-m", "computerrl.cli.main", "spawn-envs", "--out", str(out / "envs"), "--stop"],
                       capture_output=True, timeout=120)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    table = done.stdout[done.stdout.index("Entropulse schedule: success on 3 held-out tasks, seed 0"):]
    lines = [line.strip() for line in table.splitlines()]
    for phase in ("bc", "rl1", "entropulse", "rl2"):
        assert any(line.startswith(f"{phase} ") for line in lines), table
        summary = json.loads((out / f"eval-{phase}" / "summary.json").read_text())
        assert summary["overall"]["tasks"] == 3 and set(summary["splits"]) == {"in-distribution", "out-of-distribution"}
        sampled = json.loads((out / f"explore-{phase}" / "summary.json").read_text())  # K plays at T = 1
        assert sampled["samples"] == 2 and sampled["overall"]["tasks"] == 1
        assert 1 <= sampled["overall"]["distinct_actions"] <= 2 * 2  # 2 plays of at most 2 steps
    success, explored = table.split("how much each phase explores")
    for header in ("success [95% CI]", "seen", "new", "Δ prev (p)", "Δ BC (p)"):
        assert header in success, header
    for header in ("H tok", "H act", "pass@1", "pass@2", "acts", "flat"):
        assert header in explored, header
    rl1_row = next(line.strip() for line in explored.splitlines() if line.strip().startswith("rl1 "))
    assert "%" in rl1_row.split()[-1]  # its GRPO batches' share of flat groups
    iterations = done.stdout[done.stdout.index("RL iterations"):].splitlines()
    assert any(line.split()[:2] == ["rl1", "1"] for line in iterations), iterations  # each iteration's flat share
    assert not any(line.startswith("base ") for line in lines)  # the base model is evaluated only with --eval-base
    # the checkpoints chain: base → BC → RL1 → (Entropulse, when RL1 had a success) → RL2
    bc, rl1, rl2 = (read_lineage(out / p) for p in ("bc", "rl1/policy-1", "rl2/policy-2"))
    assert bc["parent"] == "smollm2-135m-instruct" and rl1["parent"] == bc["policy_version"]
    pulse = read_lineage(out / "entropulse") if (out / "entropulse").exists() else rl1
    assert rl2["parent"] == pulse["policy_version"]
    rows = json.loads((out / "successes" / "summary.json").read_text())["rows"]
    assert (out / "entropulse").exists() == (rows > 0)
    if not rows:  # Entropulse kept RL 1's policy: its evaluations are RL 1's, not played again
        assert (out / "eval-entropulse" / "summary.json").read_text() == (out / "eval-rl1" / "summary.json").read_text()
    assert Image.open(out / "schedule.png").size[0] >= 600
    # rerun: every step is found done, nothing is trained or played again
    again = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "entropulse", "--quick", "--out", str(out)],
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and again.stdout.count("already trained") == 3 + bool(rows), again.stdout[-3000:]

