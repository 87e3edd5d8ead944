"""A stage given a folder that is not what it reads says so in one line (what it expected, what it found,
and what to pass instead) with exit code 2 and no traceback: one test per stage's main input. The folders
are the stages' own kinds, written as the stages write them (no desktop, no model is needed to refuse)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from typer.testing import CliRunner

from computerrl.cli.main import app
from computerrl.data.datasets_io import save_atomic
from computerrl.data.folders import CHATS, CHECKPOINT, ENVS, EVAL, FILE_CACHE, STEPS, SUITE, TASK_FILES, TASKS, kind
from computerrl.data.schemas import SFT_FEATURES, STEP_FEATURES, TASK_FEATURES
from computerrl.envs.fleet.manifest import write_manifest


def empty(features: datasets.Features, path: Path) -> Path:
    return save_atomic(datasets.Dataset.from_dict({c: [] for c in features}, features=features), path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """RUNS/tasks (a suite: train, test, expert and its file cache), RUNS/envs (a spawn-envs folder), RUNS/eval (an eval
    folder), RUNS/successes (a chat dataset), RUNS/model (a checkpoint), RUNS/osworld (task files)."""
    root = tmp_path_factory.mktemp("runs")
    for split in ("train", "test"):
        empty(TASK_FEATURES, root / "tasks" / split)
    empty(STEP_FEATURES, root / "tasks" / "expert")
    (root / "tasks" / "files").mkdir()
    (root / "tasks" / "files" / "index.json").write_text("{}")  # what `tasks build` writes there, with the files
    write_manifest(root / "envs", [], {})
    empty(STEP_FEATURES, root / "eval" / "steps")
    (root / "eval" / "summary.json").write_text("{}")
    empty(SFT_FEATURES, root / "successes")
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (root / "osworld" / "chrome").mkdir(parents=True)
    (root / "osworld" / "chrome" / "a.json").write_text("{}")
    return root


def test_each_folder_is_told_for_what_it_is(runs):
    assert [kind(runs / p) for p in ("tasks", "tasks/train", "tasks/expert", "tasks/files", "envs", "eval", "successes",
                                     "model", "osworld")] == [SUITE, TASKS, STEPS, FILE_CACHE, ENVS, EVAL, CHATS,
                                                              CHECKPOINT, TASK_FILES]
    assert kind(runs / "nowhere").startswith("nothing")


def refused(args: list[str]) -> str:
    """The command's one line of refusal (exit code 2, no traceback)."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("stage", ["rollout", "eval", "async-rl"])
def test_playing_stages_given_a_suite_name_its_splits(runs, stage):
    line = refused([stage, "--tasks", str(runs / "tasks"), "--envs", str(runs / "envs"), "--model",
                    str(runs / "model"), "--out", str(runs / f"out-{stage}")])
    assert line == (f"Error: --tasks {runs / 'tasks'}: expected {TASKS} or {TASK_FILES}, found {SUITE}; "
                    f"pass {runs / 'tasks/train'} or {runs / 'tasks/test'}")
    assert not (runs / f"out-{stage}").exists()


@pytest.mark.parametrize("stage", ["rollout", "eval"])
def test_playing_stages_refuse_envs_and_model_of_another_kind(runs, stage):
    common = [stage, "--tasks", str(runs / "tasks/train"), "--out", str(runs / f"out-{stage}")]
    line = refused(common + ["--envs", str(runs / "tasks/train"), "--model", str(runs / "model")])
    assert f"--envs {runs / 'tasks/train'}: expected {ENVS} or an env manifest, found {TASKS}" in line
    line = refused(common + ["--envs", str(runs / "envs"), "--model", str(runs / "eval")])
    assert line == f"Error: --model {runs / 'eval'}: expected {CHECKPOINT}, found {EVAL}"


@pytest.mark.parametrize("stage", ["grpo", "filter-success"])
def test_stages_reading_rollouts_given_an_eval_name_its_steps(runs, stage):
    line = refused([stage, "--rollouts", str(runs / "eval"), "--out", str(runs / "out")])
    assert line == f"Error: --rollouts {runs / 'eval'}: expected {STEPS}, found {EVAL}; pass {runs / 'eval/steps'}"


def test_sft_given_a_suite_names_its_expert_replays(runs):
    line = refused(["sft", "--data", str(runs / "tasks"), "--out", str(runs / "out")])
    assert line == (f"Error: --data {runs / 'tasks'}: expected {CHATS} or {STEPS}, found {SUITE}; "
                    f"pass {runs / 'tasks/expert'}")


def test_sft_refuses_a_model_that_is_no_checkpoint(runs):
    line = refused(["sft", "--data", str(runs / "successes"), "--model", str(runs / "tasks"), "--out",
                    str(runs / "out")])
    assert line == f"Error: --model {runs / 'tasks'}: expected {CHECKPOINT}, found {SUITE}"


def test_build_apis_given_a_suite_names_its_splits(runs):
    line = refused(["build-apis", "--tasks", str(runs / "tasks"), "--envs", str(runs / "envs"), "--out",
                    str(runs / "apis")])
    assert f"found {SUITE}; pass {runs / 'tasks/train'} or {runs / 'tasks/test'}" in line


def test_tasks_check_and_view_refuse_a_folder_of_another_kind(runs):
    assert refused(["tasks", "check", str(runs / "tasks")]) == \
        f"Error: FOLDER {runs / 'tasks'}: expected {TASK_FILES}, found {SUITE}"
    assert refused(["view", str(runs / "tasks")]) == \
        f"Error: FOLDER {runs / 'tasks'}: expected {STEPS} or {EVAL}, found {SUITE}; pass {runs / 'tasks/expert'}"


def test_the_installed_command_prints_one_line_and_exits_2(runs):
    """The issue's case, as a user runs it: `computerrl rollout --tasks runs/tasks`."""
    done = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "rollout", "--tasks", str(runs / "tasks"),
                           "--envs", str(runs / "envs"), "--model", str(runs / "model"), "--out", str(runs / "r")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"Error: --tasks {runs / 'tasks'}: expected {TASKS} or {TASK_FILES}, found {SUITE}; "
        f"pass {runs / 'tasks/train'} or {runs / 'tasks/test'}"]
