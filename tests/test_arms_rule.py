"""docs/rl-arms.md's rule (bench/arms_rule.py) on made-up valid evaluations whose answer is known."""

from __future__ import annotations

import json

import datasets

from computerrl.bench.arms_rule import decide, main
from computerrl.data.datasets_io import save_atomic

TEMPLATES = ("calc_add_sheet", "calc_bold_header", "calc_rename_sheet", "calc_freeze_header")


def write_eval(folder, wins: dict[str, list[int]]):
    """An eval folder's results: per template, one greedy play a task (1 = solved)."""
    rows = [{"task_id": f"{t}-{k}", "template": t, "success_rate": float(w)}
            for t, ws in wins.items() for k, w in enumerate(ws)]
    save_atomic(datasets.Dataset.from_list(rows), folder / "results")


def arm(runs, name, seed, bc: dict, rl: dict):
    write_eval(runs / name / f"seed-{seed}" / "eval-bc", bc)
    write_eval(runs / name / f"seed-{seed}" / "eval-rl1", rl)


def test_the_rule_takes_the_best_arm_that_gains_everywhere_and_prefers_fewer_changes_on_a_tie(tmp_path, capsys):
    bc = {t: [1] * 10 + [0] * 10 for t in TEMPLATES}  # 50% on each template
    gain = {t: [1] * 14 + [0] * 6 for t in TEMPLATES}  # +20 points on each
    for seed in (0, 1):
        arm(tmp_path, "plain", seed, bc, bc)  # moves nothing: its interval holds 0
        arm(tmp_path, "broad", seed, bc, gain)
        arm(tmp_path, "anchor-nll", seed, bc, gain)  # as good, with fewer changes: chosen
        # the most on average, but one template drops 30 points: disqualified
        arm(tmp_path, "small", seed, bc, {**{t: [1] * 20 for t in TEMPLATES}, TEMPLATES[0]: [1] * 4 + [0] * 16})
    arm(tmp_path, "anchor-kl", 0, bc, gain)  # seed 1 not done
    (tmp_path / "seed-0").mkdir()  # the shared BC's folder is not an arm
    result = decide(tmp_path, [0, 1], draws=2000)
    arms = result["arms"]
    assert arms["broad"]["mean"] == 20.0 and arms["broad"]["low"] > 0 and arms["broad"]["qualifies"]
    assert arms["plain"]["mean"] == 0.0 and not arms["plain"]["qualifies"]
    assert arms["small"]["mean"] > 20 and arms["small"]["worst_template"] == TEMPLATES[0]
    assert arms["small"]["worst_loss"] == 30.0 and not arms["small"]["qualifies"]
    assert arms["anchor-kl"] == {"done": [0]} and "seed-0" not in arms
    assert result["chosen"] == "anchor-nll"
    main(["--runs", str(tmp_path), "--draws", "500"])
    printed = capsys.readouterr().out
    assert "chosen: anchor-nll" in printed and "anchor-kl    not done: seeds [0] of 0,1" in printed
    assert json.loads(printed.strip().splitlines()[-1])["chosen"] == "anchor-nll"


def test_no_arm_qualifying_keeps_todays_setting(tmp_path):
    bc = {t: [1, 0] * 10 for t in TEMPLATES}
    # three tasks won and two lost against BC's, each seed: +1 task of 80, an interval that holds 0
    mixed = {t: list(ws) for t, ws in bc.items()}
    for t, k in ((TEMPLATES[0], 1), (TEMPLATES[1], 1), (TEMPLATES[2], 1), (TEMPLATES[0], 0), (TEMPLATES[3], 0)):
        mixed[t][k] = 1 - mixed[t][k]
    for seed in (0, 1):
        arm(tmp_path, "plain", seed, bc, bc)
        arm(tmp_path, "broad", seed, bc, mixed)
        arm(tmp_path, "small", seed, bc, {**{t: [1] * 20 for t in TEMPLATES}, TEMPLATES[1]: [0] * 20})  # one lost
    result = decide(tmp_path, [0, 1], draws=2000)
    broad = result["arms"]["broad"]
    assert broad["mean"] == 1.25 and broad["low"] <= 0 < broad["high"] and broad["worst_loss"] <= 10
    assert not result["arms"]["small"]["qualifies"] and result["arms"]["small"]["worst_loss"] == 50.0
    assert result["chosen"] == "plain" and not result["any_qualifies"]
