"""The schedule's report: paired tests between phases and the pooled table (no desktops)."""

from __future__ import annotations

import pytest
from rich.console import Console

from computerrl.data.report import paired, pooled, schedule_report
from computerrl.data.stats import mcnemar


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs():
    assert mcnemar(0, 0) == 1.0 and mcnemar(3, 3) == 1.0
    assert mcnemar(0, 6) == pytest.approx(2 / 2 ** 6)  # six of six discordant pairs favour B
    assert mcnemar(2, 10) == pytest.approx(2 * (1 + 12 + 66) / 2 ** 12)
    assert mcnemar(10, 2) == mcnemar(2, 10)


def phase(name: str, wins: list[bool], ood_from: int = 6, **extra) -> dict:
    outcomes = {f"t{k}": ("far" if k >= ood_from else "seen", won) for k, won in enumerate(wins)}
    return {"phase": name, "outcomes": outcomes, "entropy": 0.05, "action_entropy": 1.2, **extra}


def test_pairs_are_the_same_seed_and_task():
    bc = [phase("bc", [False] * 8), phase("bc", [True] + [False] * 7)]
    rl = [phase("rl1", [True] * 6 + [False] * 2), phase("rl1", [True] * 6 + [False] * 2)]
    d = paired(bc, rl)
    assert d["n"] == 16 and d["delta"] == pytest.approx(11 / 16)  # 11 pairs went fail -> success, none back
    assert d["p"] == pytest.approx(mcnemar(0, 11))
    assert pooled(rl)["rate"] == pytest.approx(12 / 16) and pooled(rl, "far")["rate"] == 0.0


def test_the_tables_pool_seeds_show_each_and_fit_80_columns():
    explore = {"k": 4, "pass_1": 0.5, "pass_k": 0.75, "distinct": 3.0, "mixed": 0.5}
    seeds = {0: [phase("bc", [True, False] * 4, **explore), phase("rl1", [True] * 8, flat=0.5, **explore)],
             1: [phase("bc", [False] * 8, **explore),
                 phase("rl1", [True] * 7 + [False], flat=0.25,
                       **explore | {"pass_k": 1.0, "distinct": 2.0, "mixed": 0.25})]}
    console = Console(record=True, width=80)
    console.print(schedule_report(seeds))
    text = console.export_text()
    assert "…" not in text
    assert "8 held-out tasks, seeds 0, 1" in text
    success, explored = text.split("how much each phase explores")
    rl1 = next(line.strip() for line in success.splitlines() if line.strip().startswith("rl1 "))
    assert "94% [72%–99%]" in rl1  # 15 of 16, Wilson
    assert "+69 (<0.001)" in rl1  # p = 2/2^11
    assert "per seed: bc 50% 0%; rl1 100% 88%" in " ".join(success.split())
    header = next(line.split() for line in explored.splitlines() if line.strip().startswith("phase "))
    assert header == ["phase", "H", "tok", "H", "act", "pass@1", "pass@4", "acts", "mixed", "flat"]
    rl1 = next(line.split() for line in explored.splitlines() if line.strip().startswith("rl1 "))
    assert rl1 == ["rl1", "0.050", "1.20", "50%", "88%", "2.5", "38%", "38%"]  # means over seeds; flat: 0.5 and 0.25


def evaluated(folder, wins: list[bool], ood_from: int = 3) -> None:
    """What eval leaves: its summary and one row a task (tasks from `ood_from` on of held-out templates)."""
    import json

    import datasets

    from computerrl.data.datasets_io import save_atomic

    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"overall": {"mean_entropy": 0.1, "action_entropy": 1.0}}))
    save_atomic(datasets.Dataset.from_list([{"task_id": f"t{k}", "ood": k >= ood_from, "samples": 1,
                                             "successes": int(w)} for k, w in enumerate(wins)]), folder / "results")


def test_seeds_run_apart_pool_from_their_folders_small_files(tmp_path):
    """`entropulse --report`: seeds run in other sessions or on other machines, their folders copied in."""
    from typer.testing import CliRunner

    from computerrl.cli.main import app

    evaluated(tmp_path / "seed-0" / "eval-bc", [True, False, False, False])
    evaluated(tmp_path / "seed-0" / "eval-rl1", [True, True, False, False])
    evaluated(tmp_path / "seed-1" / "eval-bc", [False, False, False, True])
    evaluated(tmp_path / "seed-1" / "eval-rl1", [True, False, False, True])
    evaluated(tmp_path / "seed-0" / "eval-entropulse", [True] * 4)  # seed 0 went further: not pooled
    (policy := tmp_path / "seed-1" / "rl1" / "policy-1").mkdir(parents=True)  # GRPO's summary of one iteration
    (policy / "summary.json").write_text('{"skipped_fraction": 0.25, "rows": 9}')
    runner = CliRunner(env={"COLUMNS": "200"})
    result = runner.invoke(app, ["entropulse", "--report", "--seeds", "0,1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "4 held-out tasks, seeds 0, 1" in result.output
    success = result.output.split("how much each phase explores")[0]
    rows = {line.split()[0]: line.split() for line in success.splitlines() if line.strip()}
    assert rows["bc"][1] == "25%" and rows["rl1"][1] == "50%"  # 2 and 4 of the 8 (seed, task) pairs
    assert "entropulse" not in rows
    iterations = result.output.split("RL iterations, seed 1")[1].split()
    assert iterations[iterations.index("rl1"):][:4] == ["rl1", "1", "25%", "9"]  # its flat share and rows
    assert "RL iterations, seed 0" not in result.output  # it kept no policy
    assert not (tmp_path / "seed-0" / "envs").exists()  # nothing was started
    missing = runner.invoke(app, ["entropulse", "--report", "--seeds", "0,2", "--out", str(tmp_path)])
    assert missing.exit_code != 0 and "seed(s) 2" in missing.output


def test_a_runs_kept_report_files_give_the_same_report_as_the_run(tmp_path):
    """`just keep-report-files`: the copy holds every file the report reads, and nothing heavier."""
    import json

    from computerrl.data.report import iteration_table, keep_report_files, phases_done

    run = tmp_path / "run"
    for phase, wins in (("bc", [True, False, False, False]), ("rl1", [True, True, False, False])):
        evaluated(run / f"eval-{phase}", wins)
        (run / f"explore-{phase}").mkdir()
        (run / f"explore-{phase}" / "summary.json").write_text(json.dumps(
            {"samples": 4, "overall": {"success_rate": 0.5, "pass_at_k": 0.75, "distinct_actions": 2.0, "mixed": 0.5}}))
    for policy in ("rl1/policy-1", "rl1/async/policy-2"):
        (run / policy).mkdir(parents=True)
        (run / policy / "summary.json").write_text(json.dumps({"skipped_fraction": 0.5, "rows": 9}))
        (run / policy / "model.safetensors").write_bytes(b"weights")
    (run / "rl1" / "tasks-1.weights.json").write_text(json.dumps({"estimates": {}, "weights": {"t": 0.5},
                                                                  "drawn": {"t": 1}}))
    (run / "eval-bc" / "steps").mkdir()
    (run / "eval-bc" / "steps" / "data.arrow").write_bytes(b"trajectories")

    kept, heavy = tmp_path / "kept", {"eval-bc/steps/data.arrow", "rl1/policy-1/model.safetensors",
                                      "rl1/async/policy-2/model.safetensors"}
    files = {str(f.relative_to(run)) for f in run.rglob("*") if f.is_file()}
    assert keep_report_files(run, kept) == len(files - heavy)
    assert {str(f.relative_to(kept)) for f in kept.rglob("*") if f.is_file()} == files - heavy

    def report(folder):
        return [{k: v for k, v in row.items() if k != "folder"} for row in phases_done(folder, ["bc", "rl1"])]

    assert report(kept) == report(run) and len(report(run)) == 2
    assert iteration_table(kept).row_count == iteration_table(run).row_count == 2  # either loop's policies


def test_held_out_tasks_are_near_where_their_template_reuses_a_trained_ones_calls_else_far(tmp_path):
    """calc_bold_column (bold_header's call on column A) is "near", calc_font_color (a keyword no train task
    shows) "far": eval says which, the table gives each its column, and an older eval's held-out tasks are far."""
    import types

    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.report import phase_row
    from computerrl.stages.eval import task_split

    def item(ood, template):
        return types.SimpleNamespace(ood=ood, template=template)

    assert [task_split(item(False, "calc_bold_column")), task_split(item(True, "calc_bold_column")),
            task_split(item(True, "calc_font_color")), task_split(item(True, "no_such_template"))] == \
        ["seen", "near", "far", "far"]
    rows = [("t0", False, "seen", 1), ("t1", True, "near", 1), ("t2", True, "near", 0), ("t3", True, "far", 0)]
    save_atomic(datasets.Dataset.from_list([{"task_id": t, "ood": ood, "split": split, "samples": 1, "successes": w}
                                            for t, ood, split, w in rows]), tmp_path / "eval-bc" / "results")
    row = phase_row("bc", {"overall": {"mean_entropy": 0.1}}, tmp_path / "eval-bc")
    assert {t: kind for t, (kind, _) in row["outcomes"].items()} == {"t0": "seen", "t1": "near", "t2": "near",
                                                                   "t3": "far"}
    assert pooled([row], "near")["rate"] == 0.5 and pooled([row], "far")["rate"] == 0.0
    console = Console(record=True, width=80)
    console.print(schedule_report({0: [row]}))
    header = next(line.split() for line in console.export_text().splitlines() if line.strip().startswith("phase"))
    assert header[header.index("seen"):header.index("seen") + 3] == ["seen", "near", "far"]
    evaluated(tmp_path / "old", [True, False], ood_from=1)  # an eval from before the split column
    assert [kind for kind, _ in phase_row("old", {"overall": {"mean_entropy": 0}}, tmp_path / "old")["outcomes"].values()] \
        == ["seen", "far"]


def test_tracked_iterations_show_their_success_what_they_kept_of_bc_and_the_drift_of_bcs_answers(tmp_path):
    """Schedule setting `track`: each RL iteration's eval on the first tasks and its chance of BC's first answers,
    read back from the run's small files (kept by keep_report_files)."""
    import json

    from computerrl.data.report import drift_table, iteration_table, keep_report_files

    run = tmp_path / "run"
    evaluated(run / "eval-bc", [True, True, False, False])
    evaluated(run / "rl1" / "eval-1", [True, False, True, False])  # kept 1 of BC's 2, and won another
    (run / "rl1" / "policy-1").mkdir(parents=True)
    (run / "rl1" / "policy-1" / "summary.json").write_text(json.dumps({"skipped_fraction": 0.5, "rows": 8}))
    (run / "drift-bc.json").write_text(json.dumps({"calc_bold_header": 0.97, "calc_fill_header": 0.74}))
    (run / "rl1" / "drift-1.json").write_text(json.dumps({"calc_bold_header": 0.19, "calc_fill_header": 0.10}))
    kept = tmp_path / "kept"
    keep_report_files(run, kept)
    console = Console(record=True, width=120)
    console.print(iteration_table(kept))
    console.print(drift_table(kept))
    text = console.export_text()
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("rl1"))
    assert row[:6] == ["rl1", "1", "50%", "8", "50%", "50%"]  # flat, rows, success, kept
    bold = next(line.split() for line in text.splitlines() if line.strip().startswith("calc_bold_header"))
    assert bold == ["calc_bold_header", "0.97", "0.19"]
    assert drift_table(tmp_path / "nothing") is None
