"""`rollout` for real: the embedded model acting in real desktops started by `spawn-envs`. What does not depend on
what the embedded model computes (resuming, lost desktops, eval's outputs, a LoRA adapter played) is played by
the tiny stand-in model (conftest's `tiny_model`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from computerrl.data.datasets_io import load, save_atomic
from computerrl.data.schemas import STEP_COLUMNS
from conftest import generated_desktops

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Two generated Calc tasks with their file cache, and two desktops behind a detached spawn-envs."""
    with generated_desktops(tmp_path_factory.mktemp("rollout"), tasks=2, desktops=2) as root:
        yield root


def options(root, out, **extra) -> list[str]:
    """The rollouts' options: the quick demo's prompts (listing only a few functions: a forward pass of the
    embedded model in float32 is what these tests wait for, and the prompt's length sets it)."""
    args = {"tasks": root / "tasks", "envs": root / "envs", "samples": 2, "max-steps": 2, "max-new-tokens": 40,
            "temperature": 1.0, "budgets": "quick", "out": out, **extra}
    return [x for k, v in args.items() for x in (f"--{k}", str(v))]


def test_a_rollout_writes_every_column_with_sensible_values(run_dir):
    from typer.testing import CliRunner

    from computerrl.cli.main import app

    out = run_dir / "rollout"
    result = CliRunner().invoke(app, ["rollout", *options(run_dir, out), "--screenshots"])
    assert result.exit_code == 0, result.output
    ds = load(out)
    assert set(STEP_COLUMNS) <= set(ds.column_names) and "screenshot" in ds.column_names
    trajectories = {(r["group_id"], r["sample"]) for r in ds}
    assert len(trajectories) == 4 and {g for g, _ in trajectories} == {f"{t}:0" for t in load(run_dir / "tasks")["task_id"]}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 4 and summary["steps"] == len(ds)
    from computerrl.policy.engine_transformers import fast_dtype

    engine = "transformers" if fast_dtype("cpu") == "float32" else "transformers:bfloat16"  # as this CPU computes
    for row in ds:
        assert row["policy_version"] == "smollm2-135m-instruct" and row["engine"] == engine
        assert row["messages"][0]["role"] == "system" and row["messages"][-1]["content"].startswith("* Apps:")
        assert 0 < len(row["response_ids"]) <= 40 and len(row["behavior_logprobs"]) == len(row["response_ids"])
        assert all(lp <= 0 for lp in row["behavior_logprobs"]) and len(row["prompt_ids"]) > 100
        assert row["reward"] == float(row["success"] and row["action_valid"])
        assert row["error"] == "" and row["screenshot"].size == (1920, 1080)
        if not row["action_valid"]:  # the untrained model mostly answers prose: nothing runs, reward 0
            assert row["exec_result"].startswith("Invalid action") and row["action"] == "" and row["reward"] == 0
        obs = json.loads(row["observation"])
        assert obs["focused_app"] == "calc" and "/root" not in row["messages"][-1]["content"]
    for group, sample in trajectories:
        steps = sorted((r["step"], r["done"]) for r in ds if (r["group_id"], r["sample"]) == (group, sample))
        assert [s for s, _ in steps] == list(range(len(steps))) and steps[-1][1] and len(steps) <= 2


def test_a_killed_rollout_resumes_without_duplicates(run_dir, tiny_model):
    out = run_dir / "resumed"
    journal = out.with_name(f".{out.name}.journal")
    cmd = [sys.executable, "-m", "computerrl.cli.main", "rollout", *options(run_dir, out, model=tiny_model)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(journal.glob("item-*.json"))) < 1:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    played = len(list(journal.glob("item-*.json")))
    assert 1 <= played < 4 and not out.exists()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resuming: {played} of 4 trajectories already done" in done.stdout
    ds = load(out)
    keys = [(r["group_id"], r["sample"], r["step"]) for r in ds]
    assert len(keys) == len(set(keys)) and len({k[:2] for k in keys}) == 4
    assert not journal.exists()


def test_desktops_killed_mid_rollout_abort_their_trajectories_and_the_stage_completes(run_dir, tiny_model):
    """Both env servers are SIGKILLed once the first trajectory is in: the episodes in flight end
    aborted (never rewarded as failures), spawn-envs replaces the servers, the pool takes the
    replacements from the manifest, and every trajectory is accounted for."""
    import os
    import signal

    from computerrl.envs.fleet.manifest import read_manifest

    out = run_dir / "killed"
    journal = out.with_name(f".{out.name}.journal")
    cmd = [sys.executable, "-m", "computerrl.cli.main", "rollout", *options(run_dir, out, model=tiny_model)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(journal.glob("item-*.json")):
        time.sleep(0.05)
    handles, _ = read_manifest(run_dir / "envs")
    for h in handles:
        os.kill(h.detail["pid"], signal.SIGKILL)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 4 and summary["aborted"] >= 1, summary
    ds = load(out)
    for row in ds:
        if row["error"]:
            assert row["reward"] == 0.0 and not row["done"] and "lost" in row["error"]
    replaced, _ = read_manifest(run_dir / "envs")
    assert {h.address for h in replaced}.isdisjoint({h.address for h in handles})  # new servers, none started twice
    assert len(replaced) == 2


def test_eval_prints_its_table_and_writes_results_steps_and_plots(run_dir, tiny_model):
    from PIL import Image
    from typer.testing import CliRunner

    from computerrl.cli.main import app

    tasks = load(run_dir / "tasks")
    split = tasks.map(lambda row, k: {"ood": k == 1}, with_indices=True)  # the second task: an unseen template
    save_atomic(split, run_dir / "test-split")
    out = run_dir / "eval"
    args = ["eval", "--tasks", str(run_dir / "test-split"), "--envs", str(run_dir / "envs"), "--max-steps", "2",
            "--max-new-tokens", "40", "--budgets", "quick", "--model", tiny_model, "--out", str(out)]
    result = CliRunner(env={"COLUMNS": "160"}).invoke(app, args)
    assert result.exit_code == 0, result.output
    for text in ("calc", "seen tmpl.", "new tmpl.", "overall", "95% CI", "H tok"):
        assert text in result.output, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 2 and summary["overall"]["trajectories"] == 2
    assert 0 <= summary["overall"]["ci95"][0] <= summary["overall"]["success_rate"] <= summary["overall"]["ci95"][1]
    assert summary["overall"]["mean_entropy"] > 0
    results = load(out / "results")
    assert sorted(results["task_id"]) == sorted(tasks["task_id"]) and sum(results["ood"]) == 1
    steps = load(out / "steps")
    assert len(steps) == sum(round(r["mean_steps"] * r["samples"]) for r in results)
    assert steps[0]["screenshot"].size == (1920, 1080)  # eval keeps screenshots by default, for the viewer
    for png in ("success_by_domain.png", "actions.png"):
        assert Image.open(out / png).size[0] > 300
    again = CliRunner(env={"COLUMNS": "160"}).invoke(app, args)  # finished: shown again, not replayed
    assert again.exit_code == 0 and "holds a finished evaluation" in again.output and "overall" in again.output


@pytest.fixture(scope="module")
def relabelled(run_dir):
    """The first test's rollout rows with sample 0 of every task rewarded 1 and sample 1 rewarded 0: the
    untrained model never succeeds, so real rows (real prompts, sampled tokens and behaviour log-probs)
    get made-up rewards to give GRPO something to learn."""
    import shutil

    if not (run_dir / "rollout").exists():
        test_a_rollout_writes_every_column_with_sensible_values(run_dir)
    ds = load(run_dir / "rollout").remove_columns(["screenshot"])
    ds = ds.map(lambda r: {"reward": float(r["sample"] == 0), "success": r["sample"] == 0})
    path = save_atomic(ds, run_dir / "relabelled")
    shutil.copy(run_dir / "rollout" / "lineage.json", path / "lineage.json")  # the sampling temperature
    return path


def test_a_grpo_step_on_real_rollout_rows_raises_the_positive_advantage_answers(relabelled, tmp_path):
    import torch

    from computerrl.policy.checkpoint import embedded_checkpoint, load_model
    from computerrl.policy.grpo_loss import Clip, group_advantages, rows_loss
    from computerrl.stages.grpo import GRPOConfig, run

    summary = run(GRPOConfig(rollouts=[relabelled], out=tmp_path / "policy", epochs=1, lr=1e-4, train_layers=4))
    assert summary["groups"] == 2 and summary["skipped_groups"] == 0 and summary["rows"] == len(load(relabelled))
    metrics = load(tmp_path / "policy" / "metrics")
    assert len(metrics) == 1 and abs(metrics["ratio"][0] - 1) < 1e-3  # first epoch: πθ = πold up to float error
    rows = load(relabelled).to_list()
    adv, _ = group_advantages([r["reward"] for r in rows], [r["group_id"] for r in rows])
    args = ([r["prompt_ids"] for r in rows], [r["response_ids"] for r in rows], adv,
            [torch.tensor(r["behavior_logprobs"]) for r in rows], Clip())
    before, after = load_model(embedded_checkpoint()), load_model(tmp_path / "policy")
    with torch.no_grad():
        loss_before, _ = rows_loss(before, *args, pad_id=2)
        loss_after, _ = rows_loss(after, *args, pad_id=2)
        from computerrl.policy.logprobs import response_logprobs

        new = response_logprobs(after, args[0], args[1], pad_id=2)
    assert loss_after < loss_before
    gain = [(n - torch.tensor(r["behavior_logprobs"])).mean().item() for n, r in zip(new, rows)]
    assert all(g > 0 for g, a in zip(gain, adv) if a > 0), gain
    assert all(g < 0 for g, a in zip(gain, adv) if a < 0), gain


def test_grpo_with_lora_writes_an_adapter_that_rollout_loads(run_dir, relabelled, tiny_model):
    """On the tiny model (the embedded model's rows are another version's to it: πold is recomputed)."""
    from computerrl.policy.checkpoint import policy_version
    from computerrl.stages.grpo import GRPOConfig, run

    adapter = run_dir / "lora-policy"
    run(GRPOConfig(rollouts=[relabelled], model=tiny_model, out=adapter, epochs=1, lr=1e-4, lora_rank=4,
                   train_layers=1))
    assert (adapter / "adapter_config.json").exists() and not (adapter / "model.safetensors").exists()
    targets = json.loads((adapter / "adapter_config.json").read_text())["target_modules"]
    assert targets and all(".layers.1." in t for t in targets)  # the top 1 of 2 layers
    out = run_dir / "lora-rollout"
    done = subprocess.run([sys.executable, "-m", "computerrl.cli.main", "rollout",
                           *options(run_dir, out, samples=1, model=adapter, limit=1)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    ds = load(out)
    assert len(ds) >= 1 and set(ds["policy_version"]) == {policy_version(adapter)}
    assert policy_version(adapter).startswith("grpo:lora-policy:")
