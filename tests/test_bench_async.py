"""`bench_async --compare`: the report of `just compare-async`'s folder (the demo's RL phase run both ways
from one BC), read from the files the loop and eval leave."""

from __future__ import annotations

import json

import pytest

from test_report import evaluated


def looped(folder, *, wall_s: float, desktop_busy: float, lags: list[int], weights: list[float]) -> None:
    """What async-rl leaves: its summary and a loop.jsonl line per version, grpo's figures in each."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({
        "wall_s": wall_s, "versions": len(lags), "steps_per_s": 96 / wall_s, "desktop_busy": desktop_busy,
        "trainer_busy": 0.5, "lag_mean": sum(lags) / len(lags), "lag_max": max(lags), "dropped_groups": 0}))
    (folder / "loop.jsonl").write_text("".join(json.dumps(
        {"version": v + 1, "groups": 6, "grpo": {"is_weight_mean": w, "is_clip_fraction": 0.0 if lag == 0 else 0.1}})
        + "\n" for v, (lag, w) in enumerate(zip(lags, weights))))


def test_compare_reports_both_loops_against_bc_on_the_same_tasks(tmp_path, capsys):
    from computerrl.bench.bench_async import compare

    evaluated(tmp_path / "eval-bc", [True] * 5 + [False] * 15, ood_from=20)
    evaluated(tmp_path / "eval-sync", [True] * 5 + [False] * 15, ood_from=20)
    evaluated(tmp_path / "eval-async", [True] * 13 + [False] * 7, ood_from=20)  # 8 more tasks won, none lost
    looped(tmp_path / "sync", wall_s=1000.0, desktop_busy=0.5, lags=[0, 0], weights=[float("nan")] * 2)
    looped(tmp_path / "async", wall_s=1500.0, desktop_busy=0.95, lags=[0, 1], weights=[1.0, 0.9])
    r = compare(tmp_path)
    assert r["tasks"] == 20 and r["success_bc"] == 0.25 and r["success_async"] == 0.65
    assert r["sync_groups"] == r["async_groups"] == 12 and r["wall_ratio"] == 1.5
    assert r["async_lag_max"] == 1 and r["async_is_weight_mean"] == 0.95 and r["sync_is_weight_mean"] is None
    assert r["sync_minus_bc"] == 0 and r["sync_p_vs_bc"] == 1.0
    assert r["async_minus_sync"] == 0.4 and r["p_async_vs_sync"] == round(2 * 0.5 ** 8, 3)  # exact McNemar, 8 to 0
    printed = capsys.readouterr().out
    assert "desktops busy 95% (idle 5%)" in printed and "wall time async / sync 1.50" in printed


def test_compare_names_the_recipe_when_a_folder_is_not_there(tmp_path):
    from computerrl.bench.bench_async import compare

    with pytest.raises(SystemExit, match="eval-bc/summary.json: not there; run `just compare-async`"):
        compare(tmp_path)
