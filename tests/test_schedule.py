"""The Entropulse schedule is defined once (stages/schedule.py): the GPU recipe the Justfile runs is a
preset of it, and its dry run prints commands the CLI takes as they are (no desktops)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from computerrl.cli.main import app


@pytest.fixture(autouse=True)
def in_an_empty_folder(tmp_path, monkeypatch):
    """The dry runs' relative run folders (runs/…) are looked up: a user's own runs must not change them."""
    monkeypatch.chdir(tmp_path)


def dry_run(*args: str) -> list[list[str]]:
    result = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["entropulse", "--dry-run", *args])
    assert result.exit_code == 0, result.output
    return [shlex.split(line) for line in result.output.splitlines() if "computerrl" in line]


def parse(command: list[str]):
    """The click context of a printed command, parsed as the CLI parses it (an unknown option or a
    bad value raises)."""
    words = command[command.index("computerrl.cli.main") + 1:] if "-m" in command else command[1:]
    group = typer.main.get_command(app)
    cmd, rest = group, words
    while hasattr(cmd, "commands"):  # down the subcommands: "tasks build"
        cmd, rest = cmd.commands[rest[0]], rest[1:]
    return cmd.make_context(words[0], list(rest))


def test_the_paper_recipe_is_a_preset_of_the_one_schedule():
    commands = dry_run("--preset", "osworld", "--model", "ckpt/GLM-4-9B", "--out", "runs/osw",
                       "--set", "eval_tasks=osworld-tasks", "--set", "rl_iterations=3")
    for command in commands:
        parse(command)
    stages = [c[c.index("computerrl.cli.main") + 1] if "-m" in c else c[1] for c in commands]
    evaluated = ["eval", "eval"]  # greedy on every eval task, then K plays at T = 1 of the first ones
    assert stages == ["spawn-envs", "tasks", "sft", *evaluated] + ["rollout", "grpo"] * 3 + \
        [*evaluated, "filter-success", "sft", *evaluated] + ["rollout", "grpo"] * 3 + [*evaluated, "spawn-envs"]
    trained = [c for c in commands if "-m" in c]
    assert len(trained) == 8 and all(c[:4] == ["accelerate", "launch", "--config_file",
                                               "configs/accelerate/fsdp.yaml"] for c in trained)
    assert all("--gradient-checkpointing" in c and c[c.index("--dtype") + 1] == "bfloat16" for c in trained)
    rollouts = [parse(c) for c in commands if c[1] == "rollout"]
    assert {ctx.params["engine"] for ctx in rollouts} == {"vllm"} and {ctx.params["samples"] for ctx in rollouts} == {8}
    evals = [parse(c) for c in commands if c[1] == "eval"]
    assert [str(ctx.params["tasks"]) for ctx in evals] == ["osworld-tasks"] * 8
    assert [(ctx.params["samples"], ctx.params["temperature"], ctx.params["limit"]) for ctx in evals[:2]] == \
        [(1, 0.0, 0), (4, 1.0, 16)]
    grpo = [parse(c) for c in commands if "grpo" in c]
    assert [str(ctx.params["ref"]) for ctx in grpo] == ["runs/osw/bc"] * 3 + ["runs/osw/entropulse"] * 3
    assert {ctx.params["beta"] for ctx in grpo} == {0.001} and {ctx.params["lr"] for ctx in grpo} == {1e-6}
    fleet, build = parse(commands[0]), parse(commands[1])
    assert fleet.params["backend"] == "docker" and fleet.params["count"] == 256
    # the suite's replays run on that fleet, whose desktops read the files the build writes
    assert str(build.params["envs"]) == str(fleet.params["out"]) and fleet.params["cache"] == build.params["out"] / "files"


def test_the_cpu_demo_trains_in_process_with_its_bc_and_rl_settings():
    commands = dry_run("--preset", "demo", "--out", "runs/demo")
    assert not any("accelerate" in c for c in commands)
    for command in commands:
        parse(command)
    sft = parse(next(c for c in commands if c[1] == "sft"))
    assert sft.params["lr"] == 3e-4 and sft.params["epochs"] == 5 and sft.params["train_layers"] == 8
    grpo = parse(next(c for c in commands if c[1] == "grpo"))  # chosen on valid (docs/results.md)
    assert grpo.params["lr"] == 5e-5 and (grpo.params["epochs"], grpo.params["updates_per_epoch"]) == (2, 4)


def test_settings_are_tuned_on_a_validation_split_of_a_shared_suite_and_the_schedule_stops_where_asked():
    commands = dry_run("--preset", "demo", "--out", "runs/tune/e1", "--set", "valid_tasks=24",
                       "--set", "suite=runs/tune/tasks", "--set", "eval_tasks=runs/tune/tasks/valid",
                       "--set", "stop_after=bc", "--set", "bc_epochs=1")
    stages = [c[1] for c in commands]
    assert stages == ["spawn-envs", "tasks", "sft", "eval", "eval", "spawn-envs"]  # a new run stops no old desktops
    build = parse(commands[1])
    assert str(build.params["out"]) == "runs/tune/tasks" and build.params["valid"] == 24
    assert build.params["test"] == 96 and build.params["train"] == 24  # the demo's splits, so train is the demo's
    assert {str(parse(c).params["tasks"]) for c in commands if c[1] == "eval"} == {"runs/tune/tasks/valid"}
    assert str(parse(commands[2]).params["data"][0]) == "runs/tune/tasks/expert"
    result = CliRunner().invoke(app, ["entropulse", "--dry-run", "--set", "stop_after=base"])
    assert result.exit_code == 2 and "eval_base" in result.output


def test_entropulse_can_add_hotter_plays_and_the_expert_replays_to_its_data():
    commands = dry_run("--preset", "demo", "--out", "runs/v", "--set", "entropulse_temperature=1.5",
                       "--set", "entropulse_expert=true", "--set", "stop_after=entropulse")
    pulse = commands[[c[1] for c in commands].index("filter-success") - 1:]
    plays, kept, sft = parse(pulse[0]), parse(pulse[1]), parse(pulse[2])
    assert plays.params["temperature"] == 1.5 and str(plays.params["model"]) == "runs/v/rl1/policy-2"
    assert str(kept.params["rollouts"][-1]) == str(plays.params["out"]) == "runs/v/entropulse-plays"
    assert len(kept.params["rollouts"]) == 3  # phase 1's two iterations and the hotter plays
    assert [str(p) for p in sft.params["data"]] == ["runs/v/successes", "runs/v/tasks/expert"]
    assert str(sft.params["model"]) == "runs/v/rl1/policy-2"


def test_rl_can_play_a_split_of_its_own_that_bc_never_imitated():
    commands = dry_run("--preset", "demo", "--out", "runs/r", "--set", "rl_split=24", "--set", "stop_after=rl1")
    assert parse(commands[1]).params["rl"] == 24
    rollouts = [parse(c) for c in commands if c[1] == "rollout"]
    assert rollouts and {str(r.params["tasks"]) for r in rollouts} == {"runs/r/tasks/rl"}
    assert str(parse(next(c for c in commands if c[1] == "sft")).params["data"][0]) == "runs/r/tasks/expert"
    default = dry_run("--preset", "demo", "--out", "runs/d", "--set", "stop_after=rl1")
    assert {str(parse(c).params["tasks"]) for c in default if c[1] == "rollout"} == {"runs/d/tasks/train"}


def test_an_rl_phase_can_run_as_the_asynchronous_loop_whose_outputs_entropulse_takes_as_they_are():
    commands = dry_run("--preset", "demo", "--out", "runs/a", "--set", "rl_loop=async", "--set", "max_lag=2",
                       "--set", "stop_after=entropulse")
    loops = [parse(c) for c in commands if c[1] == "async-rl"]
    assert len(loops) == 1 and not any(c[1] in ("rollout", "grpo") for c in commands)
    loop = loops[0].params
    assert (loop["updates"], loop["max_lag"], loop["groups"], str(loop["model"])) == (2, 2, 6, "runs/a/bc")
    assert [str(c) for c in parse(next(c for c in commands if c[1] == "filter-success")).params["rollouts"]] == \
        ["runs/a/rl1/async/rollout-1", "runs/a/rl1/async/rollout-2"]
    evals = [parse(c).params for c in commands if c[1] == "eval"]
    assert "runs/a/rl1/async/policy-2" in {str(e["model"]) for e in evals}


def test_a_grpo_setting_reaches_every_update_of_either_loop_by_grpos_own_name():
    """Declared once, in `computerrl grpo`: the schedule passes `grpo.KEY` to each update of the sync loop,
    and to async-rl, which passes it to each of its updates."""
    from computerrl.stages.grpo import update_settings

    for loop in ("sync", "async"):
        commands = dry_run("--preset", "demo", "--out", "runs/u", "--set", f"rl_loop={loop}", "--set",
                           "grpo.updates_per_epoch=3", "--set", "grpo.anchor=nll", "--set", "stop_after=rl1")
        if loop == "sync":
            updates = [parse(c).params for c in commands if c[1] == "grpo"]
            assert updates and {(u["updates_per_epoch"], u["anchor"]) for u in updates} == {(3, "nll")}
        else:
            loop_params = next(parse(c).params for c in commands if c[1] == "async-rl")
            settings = update_settings(loop_params["grpo"], "")
            assert settings["updates_per_epoch"] == 3 and settings["anchor"] == "nll" and settings["lr"] == 5e-5


def test_a_stage_setting_reaches_every_step_of_its_kind_by_the_stages_own_name():
    """Declared once, in the stages: `play.KEY` reaches every eval and rollout, `train.KEY` every sft and grpo
    step, `sft.KEY` every sft step; the schedule declares none of them itself."""
    import dataclasses

    from computerrl.play.config import PlayConfig
    from computerrl.policy.trainer import TrainConfig
    from computerrl.stages.presets import Schedule

    commands = dry_run("--preset", "demo", "--out", "runs/p", "--set", "play.max_steps=7", "--set",
                       "play.max_batch=3", "--set", "train.weight_decay=0.01", "--set", "sft.batch_rows=5",
                       "--set", "stop_after=rl1")
    plays = [parse(c).params for c in commands if c[1] in ("eval", "rollout")]
    trains = [parse(c).params for c in commands if c[1] in ("sft", "grpo")]
    assert plays and {(p["max_steps"], p["max_batch"], p["max_new_tokens"]) for p in plays} == {(7, 3, 48)}
    assert {t["weight_decay"] for t in trains} == {0.01} and {t["train_layers"] for t in trains} == {8}
    assert {parse(c).params["batch_rows"] for c in commands if c[1] == "sft"} == {5}
    stage_fields = {f.name for config in (PlayConfig, TrainConfig) for f in dataclasses.fields(config)}
    assert not stage_fields & {f.name for f in dataclasses.fields(Schedule)} - {"envs", "samples"}
    # (envs: how many desktops, not PlayConfig's folder of them; samples: G, each RL rollout's --samples)


@pytest.mark.parametrize("bad, says", [("grpo.nope=1", "unknown GRPO setting 'nope'"),
                                       ("grpo.lr=fast", "lr takes a float"), ("grpo.anchor=l2", "--anchor 'l2'"),
                                       ("play.nope=1", "unknown play setting 'nope'"),
                                       ("train.nope=1", "unknown train setting"), ("train.train_layers=all", "train_layers takes a int"),
                                       ("play.seed=3", "unknown play")])
def test_a_bad_stage_setting_is_refused_by_name(bad, says):
    result = CliRunner().invoke(app, ["entropulse", "--dry-run", "--set", bad])
    assert result.exit_code == 2 and says in result.output, result.output


def test_just_compare_async_runs_the_demos_rl_phase_with_its_settings():
    """The recipe writes the settings out (a Justfile cannot ask the schedule), so a setting chosen for
    the demo must be written there too: the comparison is of the demo's RL phase, not of an older one."""
    justfile = (Path(__file__).parents[1] / "Justfile").read_text().replace("\\\n", " ")
    recipe = justfile[justfile.index("\ncompare-async "):].split("\n\n")[0]
    line = next(line for line in recipe.splitlines() if "async-rl" in line)
    line = re.sub(r"\$\(.*?\)", "", line)  # --$(… no-)sync: --sync, the recipe's first loop
    words = shlex.split(re.sub(r"\{\{[^}]*\}\}|\$loop", "x", line.split("async-rl", 1)[1]))
    recipe_loop = parse(["computerrl", "async-rl", *words[:words.index("||")]]).params
    demo = next(parse(c).params for c in dry_run("--preset", "demo", "--out", "runs/c", "--set", "rl_loop=async",
                                                   "--set", "stop_after=rl1") if c[1] == "async-rl")
    settings = ["samples", "groups", "updates", "max_steps", "max_new_tokens", "budgets", "temperature"]
    assert {k: recipe_loop[k] for k in settings} == {k: demo[k] for k in settings}
    assert updates_of(recipe_loop["grpo"]) == updates_of(demo["grpo"])


def updates_of(grpo: list[str]) -> dict:
    """Every setting of the updates async-rl runs with these --grpo options (grpo's defaults for the rest)."""
    import dataclasses

    from computerrl.data.config import default_of
    from computerrl.stages.grpo import SET_BY_THE_LOOP, GRPOConfig, update_settings

    defaults = {f.name: default_of(f) for f in dataclasses.fields(GRPOConfig) if f.name not in SET_BY_THE_LOOP}
    return defaults | update_settings(grpo, "")


@pytest.mark.parametrize("bad", ["nope=1", "rl_iterations", "rl_iterations=many"])
def test_a_bad_setting_is_refused_with_the_known_ones(bad):
    result = CliRunner().invoke(app, ["entropulse", "--dry-run", "--set", bad])
    assert result.exit_code == 2 and "--set" in result.output


def test_a_preset_is_a_file_a_user_copies_edits_and_passes_back_with_config(tmp_path):
    shown = CliRunner().invoke(app, ["entropulse", "--preset", "osworld", "--show-config"])
    assert shown.exit_code == 0, shown.output
    mine = tmp_path / "mine.yaml"
    mine.write_text(shown.output.replace("rl_iterations: 20", "rl_iterations: 2").replace("envs: 256", "envs: 32"))
    commands = dry_run("--config", str(mine), "--model", "ckpt/m", "--out", "runs/m")
    assert len([c for c in commands if c[1] == "rollout"]) == 4 and parse(commands[0]).params["count"] == 32
    trained = [c for c in commands if "-m" in c]  # 2 iterations a phase, the rest the paper's recipe
    assert len([c for c in trained if "grpo" in c]) == 4 and {c[c.index("--dtype") + 1] for c in trained} == {"bfloat16"}
    # on top of a preset, only what the file says changes; --set still comes last
    (tmp_path / "few.yaml").write_text("rl_iterations: 3\ngrpo:\n  lr: 1e-5\n")
    shown = CliRunner().invoke(app, ["entropulse", "--preset", "quick", "--config", str(tmp_path / "few.yaml"),
                                     "--set", "samples=3", "--show-config"])
    assert "rl_iterations: 3\n" in shown.output and "  lr: 1.0e-05\n" in shown.output
    assert "  epochs: 1\n" in shown.output and "  updates_per_epoch: 4\n" in shown.output  # quick's, the demo's
    assert "samples: 3\n" in shown.output and "train_tasks: 6\n" in shown.output  # the quick preset's


@pytest.mark.parametrize("text, says", [("rl_iteration: 3", "unknown setting 'rl_iteration'"),
                                        ("rl_iterations: many", "rl_iterations takes a int"),
                                        ("train:\n  gradient_checkpointing: 1", "gradient_checkpointing takes a bool"),
                                        ("play:\n  max_step: 3", "unknown play setting 'max_step'"),
                                        ("play: 3", "play takes a mapping"),
                                        ("- a list", "expected KEY: VALUE")])
def test_a_bad_config_file_is_refused_naming_the_file_and_the_setting(tmp_path, text, says):
    (tmp_path / "bad.yaml").write_text(text)
    result = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["entropulse", "--dry-run", "--config",
                                                            str(tmp_path / "bad.yaml")])
    assert result.exit_code == 2 and "bad.yaml" in result.output and says in result.output, result.output


def test_dynamic_sampling_counts_the_groups_with_signal_and_draws_new_tasks(tmp_path):
    """DAPO's dynamic sampling: a group whose G rewards are all equal (or whose trajectories were all
    aborted) brings no signal; further draws take tasks not drawn before, and run out."""
    import datasets

    from computerrl.data.datasets_io import load, save_atomic
    from computerrl.play.curriculum import groups_with_signal, uniform_draw
    from tests.test_training import step_row, write_steps

    rows = [step_row("a", 0, 0, success=True), step_row("a", 1, 0, success=False),  # signal
            step_row("b", 0, 0, success=True), step_row("b", 1, 0, success=True),  # flat
            step_row("c", 0, 0, success=False), step_row("c", 1, 0, success=True, error="desktop lost")]  # flat
    assert groups_with_signal([write_steps(tmp_path / "r0", rows)]) == 1
    more = [step_row("d", 0, 0, success=False), step_row("d", 1, 0, success=True)]
    assert groups_with_signal([tmp_path / "r0", write_steps(tmp_path / "r1", more)]) == 2

    save_atomic(datasets.Dataset.from_dict({"task_id": [f"t{k}" for k in range(5)]}), tmp_path / "train")
    parts = [uniform_draw(tmp_path / "train", tmp_path / f"draw-{k}", 2, seed=3, part=k) for k in range(4)]
    drawn = [list(load(p)["task_id"]) for p in parts[:3]]
    assert [len(d) for d in drawn] == [2, 2, 1] and len(set(sum(drawn, []))) == 5 and parts[3] is None


def test_tracking_evaluates_every_rl_iteration_on_the_first_eval_tasks_in_either_loop():
    for loop in ("sync", "async"):
        commands = dry_run("--preset", "demo", "--out", "runs/t", "--set", f"rl_loop={loop}", "--set", "track=8",
                           "--set", "stop_after=rl1")
        tracked = [parse(c).params for c in commands if c[1] == "eval" and "/rl1/eval-" in " ".join(c)]
        assert [(str(e["out"]), e["limit"]) for e in tracked] == [("runs/t/rl1/eval-1", 8), ("runs/t/rl1/eval-2", 8)]
        assert {str(e["model"]).rsplit("/", 1)[-1] for e in tracked} == {"policy-1", "policy-2"}


def test_stratified_draws_give_every_template_its_turn_and_never_repeat_a_task(tmp_path):
    """rl_draw=stratified (the `broad` update): 7 of 3 templates' tasks are 3, 2 and 2 of them, not the two
    templates a uniform draw of few tasks often keeps; a further draw (dynamic sampling) takes the tasks left,
    and runs out."""
    from collections import Counter

    import datasets

    from computerrl.data.datasets_io import load, save_atomic
    from computerrl.play.curriculum import stratified_draw

    names = [f"{t}-{k}" for t in ("bold", "freeze", "rename") for k in range(4)]
    save_atomic(datasets.Dataset.from_dict({"task_id": names, "template": [n.split("-")[0] for n in names]}),
                tmp_path / "pool")
    first = load(stratified_draw(tmp_path / "pool", tmp_path / "d0", 7, seed=1))
    assert sorted(Counter(first["template"]).values()) == [2, 2, 3]
    second = load(stratified_draw(tmp_path / "pool", tmp_path / "d1", 7, seed=1, exclude=set(first["task_id"])))
    assert len(second) == 5 and not set(second["task_id"]) & set(first["task_id"])
    assert sorted(Counter(second["template"]).values()) == [1, 2, 2]
    assert stratified_draw(tmp_path / "pool", tmp_path / "d2", 7, seed=1, exclude=set(names)) is None
    commands = dry_run("--preset", "demo", "--out", "runs/s", "--set", "rl_draw=stratified", "--set", "stop_after=rl1")
    assert any(c[1] == "grpo" for c in commands)


def test_signal_draws_favour_templates_whose_groups_can_teach_and_keep_a_little_of_the_flat_ones(tmp_path):
    """rl_draw=signal: a template whose recent plays all won (or all lost) is drawn far less than one at
    half, one never played is drawn as if at half, and a draw never repeats a task another part took."""
    import datasets

    from computerrl.data.datasets_io import load, save_atomic
    from computerrl.play.curriculum import signal_weight, weighted_draw, weights_file, win_estimates
    from tests.test_training import step_row, write_steps

    templates = {"solved": [], "half": [], "hopeless": [], "unplayed": []}
    for name in templates:
        templates[name] = [f"{name}-{k}" for k in range(50)]
    pool = tmp_path / "pool"
    save_atomic(datasets.Dataset.from_dict({"task_id": sum(templates.values(), []),
                                            "template": [t for t, ids in templates.items() for _ in ids]}), pool)

    def plays(task, wins, losses, iteration):
        return [step_row(task, k, 0, success=k < wins, iteration=iteration) for k in range(wins + losses)]

    old = write_steps(tmp_path / "r1", plays("half-0", 0, 4, 1))  # one iteration back: counts half
    new = write_steps(tmp_path / "r2", sum([plays(f"solved-{k}", 4, 0, 2) + plays(f"hopeless-{k}", 0, 4, 2)
                                            for k in range(4)], []) + plays("half-1", 2, 2, 2)
                      + [step_row("half-2", 0, 0, success=True, error="desktop lost", iteration=2)])
    estimates = win_estimates([[old], [], [new]], dict(zip(load(pool)["task_id"], load(pool)["template"])))
    assert estimates["solved"] == {"plays": 16, "wins": 16, "p": 17 / 18}
    assert estimates["half"] == {"plays": 6, "wins": 2, "p": 3 / 8}  # 4 losses at half weight, the lost desktop none
    draw = weighted_draw(pool, tmp_path / "tasks-2", 40, seed=0, history=[[old], [new]], samples=4)
    drawn = json.loads(weights_file(draw).read_text())["drawn"]
    assert sum(drawn.values()) == 40 and len(set(load(draw)["task_id"])) == 40
    # weights 0.83 and 0.88 against 0.21 and 0.21: about 32 of 40 drawn from the two that can teach
    assert drawn["half"] + drawn["unplayed"] > 2 * (drawn["solved"] + drawn["hopeless"]) > 0, drawn
    assert signal_weight(0.5, 4) == 1 - 2 / 16 and signal_weight(1.0, 4) == 0
    again = weighted_draw(pool, tmp_path / "tasks-2-1", 40, seed=0, history=[[old], [new]], samples=4,
                          exclude=set(load(draw)["task_id"]))
    assert not set(load(again)["task_id"]) & set(load(draw)["task_id"])  # dynamic sampling's next part
    assert weighted_draw(pool, tmp_path / "tasks-2-2", 4, 0, [], 4, exclude=set(load(pool)["task_id"])) is None


def test_gain_draws_favour_the_templates_still_mostly_lost_where_signal_weighs_them_alike(tmp_path):
    """rl_draw=gain: of two templates whose groups are equally likely to be mixed, one winning 7 plays of
    8 and one 1 of 8, the draw goes to the one the greedy policy can still gain on."""
    import datasets

    from computerrl.data.datasets_io import load, save_atomic
    from computerrl.play.curriculum import draw_weight, weighted_draw, weights_file
    from tests.test_training import step_row, write_steps

    ids = {name: [f"{name}-{k}" for k in range(50)] for name in ("mostly_won", "mostly_lost")}
    pool = tmp_path / "pool"
    save_atomic(datasets.Dataset.from_dict({"task_id": sum(ids.values(), []),
                                            "template": [t for t, tasks in ids.items() for _ in tasks]}), pool)
    played = write_steps(tmp_path / "r1", [step_row(f"{name}-0", k, 0, success=(k < 7) == (name == "mostly_won"),
                                                    iteration=1) for name in ids for k in range(8)])
    drawn = {}
    for by in ("signal", "gain"):
        draw = weighted_draw(pool, tmp_path / f"tasks-{by}", 40, seed=0, history=[[played]], samples=4, by=by)
        drawn[by] = json.loads(weights_file(draw).read_text())
        assert len(set(load(draw)["task_id"])) == 40
    assert drawn["signal"]["weights"]["mostly_won"] == pytest.approx(drawn["signal"]["weights"]["mostly_lost"])
    # p = 0.8 and 0.2: weights 0.12 and 0.47, about 32 of 40 drawn from the template mostly lost
    assert drawn["gain"]["drawn"]["mostly_lost"] > 2 * drawn["gain"]["drawn"]["mostly_won"] > 0, drawn["gain"]
    assert draw_weight(0.5, 4, "gain") == (1 - 2 / 16) / 2 and draw_weight(1.0, 4, "gain") == 0


def test_signal_draws_belong_to_the_synchronous_loop():
    for by in ("signal", "gain"):
        commands = dry_run("--preset", "demo", "--out", "runs/r", "--set", f"rl_draw={by}", "--set", "stop_after=rl1")
        assert any(c[1] == "rollout" for c in commands)
        result = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["entropulse", "--dry-run", "--set", f"rl_draw={by}",
                                                                "--set", "rl_loop=async"])
        assert result.exit_code == 2 and "async-rl draws its own tasks" in result.output, result.output


def test_the_iterations_table_shows_each_iterations_flat_share_and_the_weights_its_draws_used(tmp_path):
    from rich.console import Console

    from computerrl.data.report import iteration_table

    for i, flat in ((1, 0.5), (2, 0.25)):
        (tmp_path / "rl1" / f"policy-{i}").mkdir(parents=True)
        (tmp_path / "rl1" / f"policy-{i}" / "summary.json").write_text(json.dumps({"skipped_fraction": flat, "rows": 9}))
    draw = {"estimates": {"solved": {"p": 0.9}}, "weights": {"solved": 0.34, "new": 0.88}, "drawn": {"new": 6}}
    (tmp_path / "rl1" / "tasks-2.weights.json").write_text(json.dumps(draw))
    console = Console(width=200, record=True)
    console.print(iteration_table(tmp_path))
    rows = [line.split() for line in console.export_text().splitlines() if line.strip().startswith("rl1")]
    assert rows[0] == ["rl1", "1", "50%", "9"]  # drawn uniformly: no weights
    assert rows[1] == ["rl1", "2", "25%", "9", "solved", "0.90", "→", "0.34", "(0),", "new", "0.50", "→", "0.88", "(6)"]


def test_a_phase_with_nothing_to_train_on_says_so_on_its_line(tmp_path):
    """RL whose every group was flat, and an Entropulse with no success to learn from, say so on the report's
    line instead of repeating the previous phase's figures (the quick demo's own run now trains in every phase)."""
    from rich.console import Console

    from computerrl.data.report import phase_figures, schedule_report, untrained

    def summary(folder, **fields):
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps(fields))

    summary(tmp_path / "rl1" / "policy-1", rows=0, skipped_fraction=1.0)
    summary(tmp_path / "successes", rows=0)
    summary(tmp_path / "rl2" / "policy-2", rows=8, skipped_fraction=0.5)
    phases = ("bc", "rl1", "entropulse", "rl2")
    assert [untrained(tmp_path, p) for p in phases] == ["", "no rows", "no successes", ""]
    rows = [phase_figures(tmp_path, p, {"overall": {"mean_entropy": 0.1}}, None) for p in phases]
    for row, won in zip(rows, (True, True, True, False)):
        row["outcomes"] = {"t0": ("seen", won), "t1": ("seen", False)}
    console = Console(record=True, width=200)
    console.print(schedule_report({0: rows}))
    success_table = console.export_text().split("how much each phase explores")[0]
    lines = {line.split()[0]: line for line in success_table.splitlines() if line.strip()}
    assert "— (no rows)" in lines["rl1"] and "— (no successes)" in lines["entropulse"]
    assert lines["rl2"].split()[1] == "0%" and "-50 (1.000)" in lines["rl2"]  # its own figures, against BC
