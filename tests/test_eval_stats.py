"""eval's statistics and summary on hand-made trajectories (no desktop, no model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from computerrl.data.stats import entropy, pass_at_k, wilson
from computerrl.stages.eval import per_task, plots, summarize, table
from computerrl.tasks.task_set import TaskItem, load_task_set

OSWORLD = Path(__file__).resolve().parents[2] / "shared" / "osworld"


def test_wilson_interval_matches_the_textbook_values():
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # not zero-width at 0 successes
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 1, 1) == pytest.approx(0.2)  # = c / n
    assert pass_at_k(5, 1, 2) == pytest.approx(1 - (4 / 5) * (3 / 4))
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 3, 2) == 1.0


def test_action_entropy():
    assert entropy(["a"] * 4) == 0.0 and entropy(["a", "b"] * 2) == pytest.approx(math.log(2))


def step(task: str, valid: bool, action: str = "", h: float = 1.0) -> dict:
    return {"task_id": task, "action_valid": valid, "entropy": h,
            "action": json.dumps({"api": "Agent", "name": action, "args": {}}) if valid else ""}


def trajectory(task: str, success: bool, steps: list[dict], error: str = "") -> dict:
    return {"success": success, "score": float(success), "error": error, "rows": steps}


@pytest.fixture
def evaluated():
    items = [TaskItem("a", "calc", {}), TaskItem("b", "calc", {}, ood=True), TaskItem("c", "writer", {})]
    trajectories = [  # K = 2 per task, in task order
        trajectory("a", True, [step("a", True, "click"), step("a", True, "exit")]),
        trajectory("a", False, [step("a", False)]),
        trajectory("b", False, [step("b", False)] * 3),
        trajectory("b", False, [], error="desktop lost at step 0"),
        trajectory("c", True, [step("c", True, "exit", h=3.0)]),
        trajectory("c", True, [step("c", True, "exit", h=3.0)]),
    ]
    results = per_task(trajectories, items, samples=2)
    steps = [s for t in trajectories if not t["error"] for s in t["rows"]]
    return results, summarize(results, steps, 2, {"os/x": "needs metric 'y'"})


def test_aborted_trajectories_are_counted_apart_never_as_failures(evaluated):
    results, summary = evaluated
    b = next(r for r in results if r["task_id"] == "b")
    assert b["samples"] == 1 and b["aborted"] == 1 and math.isnan(b["pass_at_k"])  # 1 sample cannot give pass@2
    overall = summary["overall"]
    assert (overall["trajectories"], overall["successes"], overall["aborted"]) == (5, 3, 1)
    assert overall["success_rate"] == pytest.approx(0.6) and overall["ci95"] == pytest.approx(list(wilson(3, 5)))
    assert overall["pass_at_k"] == pytest.approx(1.0)  # a and c: pass@2 = 1 each; b has too few samples


def test_distinct_actions_count_what_a_tasks_samples_did_differently(evaluated):
    results, summary = evaluated
    assert {r["task_id"]: r["distinct_actions"] for r in results} == {"a": 3, "b": 1, "c": 1}  # click, exit, invalid
    assert summary["overall"]["distinct_actions"] == pytest.approx(5 / 3)
    assert summary["overall"]["mixed"] == pytest.approx(1 / 2)  # a won once of two; c always; b played once


def test_summary_splits_domains_and_distribution(evaluated):
    _, summary = evaluated
    assert summary["domains"]["writer"]["success_rate"] == 1.0
    assert summary["domains"]["calc"]["invalid_rate"] == pytest.approx(4 / 6)
    assert summary["splits"]["out-of-distribution"]["tasks"] == 1
    assert summary["splits"]["in-distribution"]["success_rate"] == pytest.approx(3 / 4)
    assert summary["overall"]["action_entropy"] > 0 and summary["skipped"] == {"os/x": "needs metric 'y'"}


def test_table_and_plots_show_every_group(evaluated, tmp_path):
    from rich.console import Console

    _, summary = evaluated
    console = Console(record=True, width=80)  # a terminal's or a log's width: every header and cell whole
    console.print(table(summary))
    text = console.export_text()
    for name in ("calc", "writer", "seen tmpl.", "new tmpl.", "overall", "pass@2", "acts", "60%", "invalid", "H tok", "H act",
                 "1 tasks skipped"):
        assert name in text, name
    assert "…" not in text
    plots(summary, [step("a", True, "click"), step("a", False)], tmp_path)
    from PIL import Image

    for png in ("success_by_domain.png", "actions.png"):
        assert Image.open(tmp_path / png).size[0] > 300


@pytest.mark.skipif(not OSWORLD.exists(), reason="needs ../shared/osworld")
def test_osworld_tasks_this_build_cannot_run_are_listed_with_why():
    items = load_task_set(OSWORLD)
    assert len(items) == 350 and len({i.task_id for i in items}) == 350
    chrome = [i for i in items if i.domain == "chrome"]
    assert chrome and any(i.skip.startswith("needs ") for i in chrome)
    calc = [i for i in items if i.domain == "libreoffice_calc" and not i.skip]
    assert calc and all(i.task_dir.endswith("libreoffice_calc") for i in calc)
