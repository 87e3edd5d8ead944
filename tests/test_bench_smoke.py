"""Every benchmark in bench/ at its smallest size, so a change that breaks one is caught here and not by the
next person who measures: each runs as a user runs it and ends with its JSON line of figures. (bench_tasks,
bench_async, bench_decode, bench_gpu, bench_train and bench_trunk have tests of their own.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.desktop


def figures(bench: str, *args: str, timeout: int = 900) -> dict:
    """`python -m computerrl.bench.BENCH ARGS`: its last line, read as JSON (a failed run shows its output)."""
    done = subprocess.run([sys.executable, "-m", f"computerrl.bench.{bench}", *args], capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_bench_envs_measures_a_desktops_reset_step_and_memory(tmp_path):
    """With spares (the path no other test's benchmark takes): each reset waits for its spare, never resets in place."""
    r = figures("bench_envs", "--max-desktops", "1", "--throughput", "1", "--seconds", "2", "--episodes", "2",
                "--reset", "spare", "--cpu-resets", "1", "--reset-gap-s", "1", "--workdir", str(tmp_path))
    assert 0 < r["reset_p50_s"] < 60 and 0 < r["step_p50_s"] < 30 and r["reset_cpu_s"] >= 0
    assert r["pss_mb_per_desktop"] > 50 and r["desktops_alive_max"] == 1 and r["steps_per_s_1"] > 0
    assert r["resets_from_spare"] == 1.0 and 0 < r["spaced_reset_alone_p50_s"] < 60


def test_bench_apps_measures_an_apps_memory_start_and_reset():
    r = figures("bench_apps", "--rounds", "1", "--apps", "calc")
    assert set(r) == {"empty", "calc"}
    assert r["calc"]["pss_mb"] > r["empty"]["pss_mb"] > 0 and r["calc"]["start_s_p50"] > 0 < r["calc"]["reset_s_p50"]


def test_bench_apis_validates_the_transcripts_apis_in_a_desktop():
    r = figures("bench_apis", "--desktops", "1", "--apis", "2")
    assert r["apis"] == 2 and r["desktops"] == 1 and r["wall_s_per_api"] > 0
    assert 0 < r["desktop_share"] < 1 and abs(r["desktop_share"] + r["stage_share"] - 1) < 1e-3


def test_bench_rollout_compares_both_paths_with_the_model_and_the_desktops_alone(tiny_model):
    """On the tiny stand-in, 8-token answers: that the benchmark runs to its figures is the subject."""
    r = figures("bench_rollout", "--desktops", "1", "--steps", "2", "--max-steps", "2", "--model", tiny_model,
                "--max-new-tokens", "8")
    assert r["steps_per_s_1"] > 0 and r["baseline_steps_per_s_1"] > 0 and r["env_only_steps_per_s_1"] > 0
    assert r["speedup_1"] > 0 and r["model_cpu_s_1"] > 0


def test_bench_vision_measures_screenshots_in_the_prompt(tiny_model):
    """On the tiny stand-in, its vision model built on it: that the benchmark runs to its figures is the subject."""
    r = figures("bench_vision", "--desktops", "1", "--steps", "1", "--max-steps", "2", "--image-size", "256",
                "--max-new-tokens", "8", "--budgets", "quick", "--model", tiny_model)
    assert r["screenshot_png_bytes"] > 1000 and r["text_steps_per_s_1"] > 0 and r["vision_steps_per_s_1"] > 0
    assert r["vision_over_text_1"] > 0


def test_near_reach_plays_the_near_template_after_bc(tmp_path, tiny_model):
    """On the tiny stand-in (what it computes is not the subject: that the benchmark runs to its figures is), on a
    suite of the near template and the one it stretches: each of its tasks is replayed twice by tasks build."""
    r = figures("near_reach", "--out", str(tmp_path), "--model", tiny_model, "--tasks", "1", "--samples", "2",
                "--set", "templates=calc_bold_header,calc_bold_column", "--set", "holdout=calc_bold_column",
                "--set", "train_tasks=2", "--set", "test_tasks=2", "--set", "bc_epochs=1", "--set", "envs=2",
                "--set", "play.max_steps=2")
    assert r["templates"] == ["calc_bold_column"] and r["tasks"] == 1 and r["samples"] == 2
    assert 0 <= r["pass_at_1"] <= r["pass_at_2"] <= 1


def test_reset_ab_times_both_sides_resets():
    """Against this very tree (the comparison with another commit is the user's to run)."""
    from pathlib import Path

    import computerrl

    r = figures("reset_ab", "--before", str(Path(computerrl.__file__).parent), "--pairs", "2")
    assert r["pairs"] == 2 and r["before_p50_s"] > 0 and r["after_p50_s"] > 0 and r["paired_ratio_p50"] > 0
