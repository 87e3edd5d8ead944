"""bench-train on bad input: it stops at once with a message that says what to do, never hangs."""

from __future__ import annotations

import subprocess
import sys
import time


def test_missing_rollouts_exit_at_once_naming_the_path_and_how_to_make_it(tmp_path):
    missing = tmp_path / "rl1" / "rollout-1"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "computerrl.bench.bench_train", "--rollouts", str(missing)],
                          capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - start
    assert done.returncode != 0
    assert seconds < 20, f"took {seconds:.0f} s: a missing input must be refused before any model loads"
    assert str(missing) in done.stderr
    assert "just demo --quick" in done.stderr and "computerrl rollout" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_child_that_dies_ends_the_benchmark_instead_of_hanging_it(tmp_path):
    # a folder that is not a dataset, given straight to run_child (main refuses it before any child):
    # the child fails loading it and sends no result
    not_a_dataset = tmp_path / "rollout-1"
    not_a_dataset.mkdir()
    script = ("import argparse\nfrom computerrl.bench.bench_train import run_child\n"
              f"run_child('stage', argparse.Namespace(rollouts={str(not_a_dataset)!r}, rows=4, repeats=1, "
              "micro_batch_tokens=8192))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert done.returncode != 0
    assert "'stage' measurement died (exit code 1)" in done.stderr, done.stderr
