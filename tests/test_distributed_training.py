"""`sft` and `grpo` under `accelerate launch --num_processes 2` on this CPU (gloo), with the shipped
DDP and FSDP configs, against one process at the same global batch: the same losses, metrics and
weights up to float error, one checkpoint written, and a killed two-process run that resumes.

The configs are the GPU ones; the command line overrides only what a CPU lacks (`--num_processes 2
--mixed_precision no`). Not `--cpu`: accelerate then starts a single process (its simple launcher).
accelerate 1.15 selects FSDP only on GPU-like devices, so the FSDP runs go through `fsdp_on_cpu.py`,
which lifts that one restriction: the sharding, clipping and gathering are accelerate's and torch's own.

grpo's runs take conftest's tiny stand-in model (the embedded tokenizer on two random layers, one of them
trained): they check that two processes compute what one does, which any model shows. sft's keep the
embedded model: the killed run must still be training when it is killed after its second update."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest

import computerrl
from computerrl.data.datasets_io import load, save_atomic
from conftest import descendants
from test_training import chat_rows, step_row, write_steps

pytestmark = pytest.mark.timeout(900)

CONFIGS = Path(computerrl.__file__).parent / "configs" / "accelerate"
ENV = dict(os.environ, OMP_NUM_THREADS="1")  # two ranks, one core each
# 8 rows, 3 per optimizer step, one per micro-batch: steps of 3, 3 and 2 micro-batches, so a step
# splits unevenly over the two processes (2 + 1).
SFT = ["--epochs", "2", "--batch-rows", "3", "--lr", "1e-4", "--train-layers", "2", "--micro-batch-tokens", "64"]
WEIGHT_TOL = 1e-5  # measured: 1.2e-7 (float32 sums in another order)


PARALLEL = {"ddp.yaml": "MULTI_CPU", "fsdp.yaml": "FSDP"}  # what accelerate runs each config as, here


def launch(config: str, *args: str) -> list[str]:
    with socket.socket() as s:  # a free rendezvous port: other test runs may be launching too
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cli = [str(Path(__file__).with_name("fsdp_on_cpu.py"))] if config == "fsdp.yaml" else ["-m", "computerrl.cli.main"]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / config),
            "--num_processes", "2", "--mixed_precision", "no", "--main_process_port", str(port), *cli, *args]


def one_process(*args: str) -> list[str]:
    return [sys.executable, "-m", "computerrl.cli.main", *args]


def train(cmd: list[str]) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def assert_same_run(out: Path, reference: Path) -> None:
    """Every metric of every optimizer step (its wall time aside) and every weight as the one-process run has them."""
    import torch
    from safetensors.torch import load_file

    got, want = load(out / "metrics").to_list(), load(reference / "metrics").to_list()
    assert len(got) == len(want)
    for mine, theirs in zip(got, want):
        assert mine.keys() == theirs.keys()
        for name, value in theirs.items():
            if name in ("seconds", "peak_memory_gib"):  # how long and how much memory, not what was computed
                continue
            # a float32 norm over a whole matrix is off by ~1e-5 relative; sharded, it sums in another order
            rel = 1e-4 if name == "grad_norm" else 1e-5
            assert mine[name] == pytest.approx(value, rel=rel, abs=1e-6), (name, mine, theirs)
    a, b = load_file(out / "model.safetensors"), load_file(reference / "model.safetensors")
    assert a.keys() == b.keys()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst < WEIGHT_TOL, f"weights differ by up to {worst}"
    assert any(not torch.equal(a[k], b[k]) for k in a) or worst == 0


def assert_one_checkpoint(out: Path, stdout: str, config: str) -> None:
    """The main process wrote the checkpoint, once; no half-written folder or resumable state is left."""
    assert sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")) == []
    assert stdout.count(f"wrote {out}") == 1, stdout
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["processes"], summary["parallel"]) == (2, PARALLEL[config])


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory):
    from computerrl.data.schemas import SFT_FEATURES

    path = tmp_path_factory.mktemp("sft") / "data"
    save_atomic(datasets.Dataset.from_list(chat_rows(8), features=SFT_FEATURES), path)
    return path


@pytest.fixture(scope="module")
def sft_alone(sft_data):
    """The reference: the same sft in one process."""
    out = sft_data.parent / "alone"
    train(one_process("sft", "--data", str(sft_data), "--out", str(out), *SFT))
    metrics = load(out / "metrics")
    assert metrics["loss"][-1] < metrics["loss"][0] and len(metrics) == 6  # it learns: the comparison means something
    return out


# Each stage under one config (the suite's time is short): sft with DDP here, grpo and the killed run with
# FSDP below. The trainer is one piece of code for both stages; the other pairings passed when written.
@pytest.mark.parametrize("config", ["ddp.yaml"])
def test_sft_on_two_processes_learns_what_one_process_learns(sft_data, sft_alone, config):
    out = sft_data.parent / config.split(".")[0]
    stdout = train(launch(config, "sft", "--data", str(sft_data), "--out", str(out), *SFT))
    assert_same_run(out, sft_alone)
    assert_one_checkpoint(out, stdout, config)


def test_a_killed_two_process_sft_resumes_and_ends_as_an_uninterrupted_run(sft_data, sft_alone):
    """With FSDP, whose resumable state (weights, optimizer) is sharded over the processes."""
    out = sft_data.parent / "killed"
    cmd = launch("fsdp.yaml", "sft", "--data", str(sft_data), "--out", str(out), *SFT)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    state = out.with_name(f".{out.name}.state") / "trainer_state.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (state.exists() and json.loads(state.read_text())["updates"] >= 2):
        time.sleep(0.1)
    for pid in descendants([proc.pid]):  # the launcher and both ranks (torchrun starts each in its own session)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    done_before = json.loads(state.read_text())["updates"]
    assert 2 <= done_before < 6 and not out.exists()
    stdout = train(cmd)
    assert f"resuming {out} after {done_before} of 6" in stdout
    assert_same_run(out, sft_alone)  # weights, optimizer and schedule were restored on both ranks
    assert_one_checkpoint(out, stdout, "fsdp.yaml")


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    """Two groups (3 and 2 trajectories of one step) sampled by another engine: the trainer recomputes πold
    on every process before the first update; 5 rows, one per micro-batch, split 3 + 2."""
    from computerrl.policy.checkpoint import embedded_checkpoint, load_tokenizer
    from computerrl.policy.logprobs import answer_ids, chat_prompt_ids

    tok = load_tokenizer(embedded_checkpoint())
    chats, rows = chat_rows(5), []
    for k, (task, sample, success) in enumerate([("a", 0, True), ("a", 1, False), ("a", 2, False),
                                                 ("b", 0, False), ("b", 1, True)]):
        messages = chats[k]["messages"]
        answer = answer_ids(tok, messages[-1]["content"])
        rows.append(step_row(task, sample, 0, success=success) | {
            "prompt_ids": chat_prompt_ids(tok, messages[:-1]), "response_ids": answer, "engine": "vllm",
            "behavior_logprobs": [-1.0] * len(answer)})
    return write_steps(tmp_path_factory.mktemp("grpo") / "steps", rows)


GRPO = ["--epochs", "2", "--lr", "1e-3", "--train-layers", "1", "--micro-batch-tokens", "64", "--temperature", "1"]


@pytest.mark.parametrize("config", ["fsdp.yaml"])
def test_grpo_on_two_processes_learns_what_one_process_learns(rollouts, config, tiny_model):
    alone, out = rollouts.parent / "alone", rollouts.parent / config.split(".")[0]
    if not alone.exists():
        train(one_process("grpo", "--rollouts", str(rollouts), "--out", str(alone), *GRPO, "--model", tiny_model))
    stdout = train(launch(config, "grpo", "--rollouts", str(rollouts), "--out", str(out), *GRPO, "--model", tiny_model))
    assert_same_run(out, alone)
    assert_one_checkpoint(out, stdout, config)
    assert load(out / "metrics")["ratio"][1] != pytest.approx(1.0, abs=1e-4)  # the second epoch moved off πold
