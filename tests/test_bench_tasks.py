"""bench-tasks at its smallest: a tiny suite generated and one task replayed on one real desktop, its figures
in the JSON line it ends with (it once crashed after its replays, and no test ran it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.desktop
def test_the_smallest_run_generates_replays_and_ends_with_its_json_line():
    done = subprocess.run([sys.executable, "-m", "computerrl.bench.bench_tasks", "--train", "4", "--test", "2",
                           "--replay", "1", "--envs", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["instances"] == 6 and result["generate_s"] > 0
    assert result["replayed"] == 1 and result["kept"] == 1  # a template's reference solution, proven as the build does
    assert result["replay_steps_per_s"] > 0 and result["envs"] == 1
