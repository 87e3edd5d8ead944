"""`filter-success`, `sft` and `grpo`'s bookkeeping, and resuming a killed run. What any model shows (a loss that
falls, the checkpoint's files, πold recomputed, the importance weights, the optimizer steps, a step retried in
less memory) is trained on the tiny stand-in model (conftest's `tiny_model`); the killed run and LoRA's memory
on the embedded model, whose steps take long enough to be killed between and whose activations are a real
model's."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import datasets
import pytest

from computerrl.data.datasets_io import load, save_atomic
from computerrl.data.schemas import SFT_COLUMNS, STEP_FEATURES
from conftest import TINY_VERSION


def step_row(task, sample, step, *, success, valid=True, error="", response=None, iteration=0):
    return {"task_id": task, "domain": "calc", "group_id": f"{task}:{iteration}", "sample": sample, "step": step,
            "instruction": f"do {task}", "observation": "{}",
            "messages": [{"role": "system", "content": f"Task: do {task}"}, {"role": "user", "content": f"step {step}"}],
            "response": response or f"```python\nAgent.wait()  # {task} {sample} {step}\n```",
            "prompt_ids": [], "response_ids": [], "behavior_logprobs": [], "entropy": float("nan"),
            "action": "", "action_valid": valid, "exec_result": "", "success": success, "score": float(success),
            "reward": float(success and valid), "done": False, "env_id": "e0", "policy_version": "p0",
            "engine": "transformers", "error": error}


def write_steps(path, rows):
    save_atomic(datasets.Dataset.from_list(rows, features=STEP_FEATURES), path)
    return path


def test_filter_success_keeps_successful_unaborted_trajectories_at_most_k_per_task(tmp_path):
    from computerrl.stages.filter_success import FilterSuccessConfig, run

    rows = []
    for sample in range(5):  # task a: 5 successes of 2 steps (the second step of sample 1 invalid)
        rows += [step_row("a", sample, s, success=True, valid=not (sample == 1 and s == 1)) for s in range(2)]
    rows += [step_row("b", 0, 0, success=False), step_row("b", 1, 0, success=True, error="desktop lost at step 0")]
    rows += [step_row("c", 0, 0, success=True, response="same"), step_row("c", 1, 0, success=True, response="same")]
    first = write_steps(tmp_path / "r0", rows)
    second = write_steps(tmp_path / "r1", [step_row("b", 0, 0, success=True, iteration=1)])
    summary = run(FilterSuccessConfig(rollouts=[first, second], out=tmp_path / "sft", k=3, seed=0))
    ds = load(tmp_path / "sft")
    assert set(SFT_COLUMNS) <= set(ds.column_names)
    by_task = {t: {r["trajectory"] for r in ds if r["task_id"] == t} for t in "abc"}
    assert len(by_task["a"]) == 3  # k = 3 of 5
    assert by_task["b"] == {"b:1/0"}  # the failure and the aborted success are left out
    assert len(by_task["c"]) == 1  # two identical trajectories count once
    for r in ds:
        assert r["messages"][-1]["role"] == "assistant" and r["messages"][:-1][0]["role"] == "system"
        assert r["trajectory"] != "a:0/1" or r["step"] == 0  # the invalid step of a/1 is dropped
    assert summary["trajectories_kept"] == 5 and summary["rows"] == len(ds)
    again = run(FilterSuccessConfig(rollouts=[first, second], out=tmp_path / "sft2", k=3, seed=0))
    assert load(tmp_path / "sft2")["trajectory"] == ds["trajectory"] and again == summary  # seeded
    other = [run(FilterSuccessConfig(rollouts=[first], out=tmp_path / f"s{seed}", k=1, seed=seed)) for seed in range(6)]
    assert len({tuple(load(tmp_path / f"s{seed}")["trajectory"]) for seed in range(6)}) > 1 and other


def test_filter_success_names_what_a_wrong_dataset_is(tmp_path):
    from computerrl.stages.filter_success import FilterSuccessConfig, run

    save_atomic(datasets.Dataset.from_dict({"task_id": ["a"]}), tmp_path / "odd")
    with pytest.raises(ValueError, match="expected a step dataset, found a dataset with columns task_id"):
        run(FilterSuccessConfig(rollouts=[tmp_path / "odd"], out=tmp_path / "out"))


def chat_rows(n=4):
    """SFT rows: short chats whose answers are one API call each."""
    rows = []
    for i in range(n):
        cell, value = f"B{i + 2}", 10 * (i + 1)
        rows.append({"task_id": f"t{i}", "domain": "calc", "trajectory": f"t{i}:0/0", "step": 0, "policy_version": "expert",
                     "messages": [{"role": "system", "content": "You act on a spreadsheet with CalcTools."},
                                  {"role": "user", "content": f"Put {value} in cell {cell}."},
                                  {"role": "assistant",
                                   "content": f"```python\nCalcTools.set_cell_value('{cell}', {value})\n```"}]})
    return rows


def test_sft_lowers_its_loss_and_writes_a_checkpoint_with_lineage_and_metrics(tmp_path, tiny_model):
    from computerrl.data.schemas import SFT_FEATURES
    from computerrl.policy.checkpoint import load_model, policy_version, read_lineage
    from computerrl.stages.sft import SFTConfig, run

    save_atomic(datasets.Dataset.from_list(chat_rows(), features=SFT_FEATURES), tmp_path / "data")
    summary = run(SFTConfig(data=[tmp_path / "data"], model=tiny_model, out=tmp_path / "ckpt", epochs=8, batch_rows=4,
                            lr=1e-2))  # random weights: more steps at a higher rate than a trained model needs
    metrics = load(tmp_path / "ckpt" / "metrics")
    assert len(metrics) == 8 and summary["updates"] == 8
    # measured: 10.8 -> 4.5 nats (0.41 of the start); 0.77 after 4 steps; 1.00 at lr 1e-8
    assert metrics["loss"][-1] < 0.5 * metrics["loss"][0]
    assert all(n > 0 for n in metrics["grad_norm"]) and all(t == metrics["tokens"][0] for t in metrics["tokens"])
    assert all(s > 0 for s in metrics["seconds"])  # each optimizer step's wall time
    card = read_lineage(tmp_path / "ckpt")
    assert card["stage"] == "sft" and card["parent"] == TINY_VERSION
    assert policy_version(tmp_path / "ckpt").startswith("sft:ckpt:")
    load_model(tmp_path / "ckpt")  # a normal checkpoint, rollout's way of loading it


def test_a_killed_sft_resumes_where_it_stopped(tmp_path):
    from computerrl.data.schemas import SFT_FEATURES

    save_atomic(datasets.Dataset.from_list(chat_rows(6), features=SFT_FEATURES), tmp_path / "data")
    out = tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "computerrl.cli.main", "sft", "--data", str(tmp_path / "data"), "--out", str(out),
           "--epochs", "3", "--batch-rows", "2", "--lr", "1e-4", "--train-layers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = out.with_name(f".{out.name}.state") / "trainer_state.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (state.exists() and json.loads(state.read_text())["updates"] >= 2):
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    done_before = json.loads(state.read_text())["updates"]
    assert 2 <= done_before < 9 and not out.exists()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming {out} after {done_before} of 9" in result.stdout
    metrics = load(out / "metrics")
    assert len(metrics) == 9 and metrics["epoch"] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert not state.parent.exists()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert "already trained" in again.stdout


def test_grpo_rows_of_another_engine_get_the_trainers_old_logprobs_and_truncated_weights(tmp_path, tiny_model):
    """Rows a vLLM engine sampled: πold is the trainer's recomputation (ratio 1 on the first epoch, not
    the engine's numbers), and each token's loss is weighted by min(πold_trainer / π_engine, cap)."""
    import torch

    from computerrl.policy.checkpoint import load_model, load_tokenizer
    from computerrl.policy.logprobs import answer_ids, chat_prompt_ids, response_logprobs
    from computerrl.stages.grpo import GRPOConfig, run

    tok = load_tokenizer(tiny_model)
    model = load_model(tiny_model)
    rows, shifts = [], (0.5, 2.0)  # the engine saw these answers as e^0.5 and e^2 times less likely
    for sample, chat in enumerate(chat_rows(2)):
        prompt, answer = chat_prompt_ids(tok, chat["messages"][:-1]), answer_ids(tok, chat["messages"][-1]["content"])
        with torch.no_grad():
            trainer_logp = response_logprobs(model, [prompt], [answer])[0]
        rows.append(step_row("t", sample, 0, success=sample == 0) | {
            "prompt_ids": prompt, "response_ids": answer, "engine": "vllm",
            "behavior_logprobs": (trainer_logp - shifts[sample]).tolist()})
    write_steps(tmp_path / "steps", rows)
    run(GRPOConfig(rollouts=[tmp_path / "steps"], model=tiny_model, out=tmp_path / "policy", epochs=1, lr=1e-6,
                   temperature=1.0))
    metrics = load(tmp_path / "policy" / "metrics")[0]
    assert metrics["ratio"] == pytest.approx(1.0, abs=1e-4)
    n = [len(r["response_ids"]) for r in rows]
    adv = (1 / (0.5 + 1e-6) * 0.5, -1 / (0.5 + 1e-6) * 0.5)  # rewards 1 and 0: ±1 after normalising
    weights = (min(2.0, float(torch.tensor(0.5).exp())), 2.0)  # e^0.5 ≈ 1.65 kept, e^2 ≈ 7.4 cut to the cap
    expected = -(n[0] * weights[0] * adv[0] + n[1] * weights[1] * adv[1]) / sum(n)
    assert metrics["loss"] == pytest.approx(expected, rel=1e-3)
    # with a KL term whose reference is the policy it starts from: πref = πθ on the first step, so no KL
    run(GRPOConfig(rollouts=[tmp_path / "steps"], model=tiny_model, out=tmp_path / "kl", epochs=1, lr=1e-6,
                   temperature=1.0, beta=0.5))
    with_kl = load(tmp_path / "kl" / "metrics")[0]
    assert with_kl["kl"] == pytest.approx(0.0, abs=1e-5) and with_kl["loss"] == pytest.approx(expected, rel=1e-3)


def test_grpo_rows_an_older_version_sampled_are_weighed_for_their_lag(tmp_path, tiny_model):
    """The asynchronous loop's rows: the trainer's own engine in float32, but an older policy version. πold is
    the trainer's current policy (ratio 1 on the first epoch), the lag weighed by min(π_now / π_then, cap),
    and the summary counts the stale rows and the weights clipped at the cap. Labelled with the trained
    model's own version, the same rows are taken at their word (πold = their log-probs)."""
    import torch

    from computerrl.policy.checkpoint import load_model, load_tokenizer, policy_version
    from computerrl.policy.logprobs import answer_ids, chat_prompt_ids, response_logprobs
    from computerrl.stages.grpo import GRPOConfig, run

    tok, model = load_tokenizer(tiny_model), load_model(tiny_model)
    rows = []
    for sample, (chat, shift) in enumerate(zip(chat_rows(2), (0.5, 2.0))):  # e^0.5 kept, e^2 cut to the cap of 2
        prompt, answer = chat_prompt_ids(tok, chat["messages"][:-1]), answer_ids(tok, chat["messages"][-1]["content"])
        with torch.no_grad():
            now = response_logprobs(model, [prompt], [answer])[0]
        rows.append(step_row("t", sample, 0, success=sample == 0) | {
            "prompt_ids": prompt, "response_ids": answer, "behavior_logprobs": (now - shift).tolist(),
            "policy_version": "async-rl:policy-0:older"})
    write_steps(tmp_path / "stale", rows)
    summary = run(GRPOConfig(rollouts=[tmp_path / "stale"], model=tiny_model, out=tmp_path / "policy", epochs=1,
                             lr=1e-6, temperature=1.0))
    assert load(tmp_path / "policy" / "metrics")[0]["ratio"] == pytest.approx(1.0, abs=1e-4)
    n = [len(r["response_ids"]) for r in rows]
    assert summary["stale_rows"] == 2 and summary["is_clip_fraction"] == pytest.approx(n[1] / sum(n))
    assert summary["is_weight_mean"] == pytest.approx((n[0] * float(torch.tensor(0.5).exp()) + n[1] * 2.0) / sum(n),
                                                      rel=1e-4)
    own = [r | {"policy_version": policy_version(tiny_model)} for r in rows]
    write_steps(tmp_path / "own", own)
    summary = run(GRPOConfig(rollouts=[tmp_path / "own"], model=tiny_model, out=tmp_path / "own-policy", epochs=1,
                             lr=1e-6, temperature=1.0))
    assert summary["stale_rows"] == 0 and summary["last"]["ratio"] > 1.5  # exp(shift): their numbers were πold


def test_grpo_splits_each_pass_into_the_optimizer_steps_asked_for(tmp_path, tiny_model):
    """Four rows, two passes of two steps each: four updates, each on half the rows, all rows each pass."""
    from computerrl.policy.checkpoint import load_tokenizer
    from computerrl.policy.logprobs import answer_ids, chat_prompt_ids
    from computerrl.stages.grpo import GRPOConfig, run

    tok, rows = load_tokenizer(tiny_model), []
    for i, chat in enumerate(chat_rows(4)):  # two groups of two, each with a win and a loss
        rows.append(step_row(f"t{i // 2}", i % 2, 0, success=i % 2 == 0) | {
            "prompt_ids": chat_prompt_ids(tok, chat["messages"][:-1]),
            "response_ids": answer_ids(tok, chat["messages"][-1]["content"])})
    write_steps(tmp_path / "steps", rows)
    summary = run(GRPOConfig(rollouts=[tmp_path / "steps"], model=tiny_model, out=tmp_path / "policy", epochs=2,
                             updates_per_epoch=2, lr=1e-6, temperature=1.0))
    metrics = load(tmp_path / "policy" / "metrics")
    assert summary["updates"] == 4 and [m["epoch"] for m in metrics] == [0, 0, 1, 1]
    assert all(0 < m["tokens"] < sum(len(r["response_ids"]) for r in rows) for m in metrics)


def test_micro_batches_hold_every_row_once_group_alike_prompts_and_keep_the_budget():
    from computerrl.policy.logprobs import shared_prefix
    from computerrl.policy.trainer import micro_batches

    calc, writer = list(range(100, 300)), list(range(500, 700))  # two apps' system prompts, 200 tokens each
    prompts = [(calc if k % 2 else writer) + [k] * (20 + k) for k in range(12)]
    lengths = [len(p) + 10 for p in prompts]
    batches = micro_batches(prompts, lengths, 300, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(12))
    for b in batches:
        assert len({k % 2 for k in b}) == 1  # one app's rows together: their system prompt runs once
        shared = shared_prefix([prompts[i] for i in b], min(len(prompts[i]) for i in b) - 1) if len(b) > 1 else 0
        assert shared + len(b) * (max(lengths[i] for i in b) - shared) <= 300 or len(b) == 1
    assert 2 < len(batches) < 12  # the budget packs several rows per pass, not all of them
    assert micro_batches(prompts, lengths, 300, seed=3) == batches  # seeded order
    assert any(micro_batches(prompts, lengths, 300, seed=k) != batches for k in range(4, 10))


def saved_for_backward(trainer, rows: int = 2, prompt: int = 300, answer: int = 30) -> int:
    """Bytes autograd keeps for backward over one micro-batch (the activations a GPU must hold), weights aside."""
    import torch

    from computerrl.policy.logprobs import response_logprobs

    storages = {}

    def keep(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    prompts = [[100 + (7 * r + j) % 900 for j in range(prompt)] for r in range(rows)]
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        response_logprobs(trainer.model, prompts, [list(range(5, 5 + answer))] * rows, share_prefix=False)
    weights = {p.untyped_storage().data_ptr() for p in trainer.model.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in weights)


def test_lora_in_bfloat16_holds_fewer_activations_and_optimizer_states_than_full_fine_tuning(tmp_path):
    """On an H100 LoRA r16 of the 1.7B model peaked at 51 GB against 46 GB for full fine-tuning: peft's float32
    adapters cast each adapted layer's input to float32 and kept it. Measured here as the bytes saved for backward."""
    import torch

    from computerrl.policy.trainer import TrainConfig, Trainer

    full = Trainer(TrainConfig(out=tmp_path / "full", dtype="bfloat16"))
    lora = Trainer(TrainConfig(out=tmp_path / "lora", dtype="bfloat16", lora_rank=16))
    assert saved_for_backward(lora) < saved_for_backward(full)
    trained = [sum(p.numel() for p in t.model.parameters() if p.requires_grad) for t in (lora, full)]
    assert trained[0] < trained[1] / 20
    assert {p.dtype for p in lora.model.parameters()} == {torch.bfloat16}  # the adapters too


def test_a_step_out_of_gpu_memory_reruns_checkpointed_then_halved_to_the_same_result_stand_in_oom(tmp_path, caplog,
                                                                                                 tiny_model):
    """No GPU here: a stand-in raises torch's OutOfMemoryError for passes of more than one row, as a card
    too small for the micro-batch would. The step is run again in less memory and its update is the one
    that one-row passes give."""
    import torch

    from computerrl.policy.checkpoint import load_model
    from computerrl.policy.logprobs import response_logprobs
    from computerrl.policy.trainer import TrainConfig, Trainer

    prompts = [[100 + (5 * r + j) % 700 for j in range(60 + 10 * r)] for r in range(4)]
    answers = [[7 + r, 8, 9, 2] for r in range(4)]

    def loss_of(trainer, oom: bool):
        def loss_fn(rows):
            if oom and len(rows) > 1:
                raise torch.OutOfMemoryError("stand-in: CUDA out of memory")
            lps = response_logprobs(trainer.model, [prompts[i] for i in rows], [answers[i] for i in rows])
            return -sum(lp.sum() for lp in lps), {"rows": len(rows)}
        return loss_fn

    n_tokens = sum(map(len, answers))
    # the top one of the tiny model's two layers: a frozen layer below a trained one, as 2 of 30 would be
    tight = Trainer(TrainConfig(model=tiny_model, out=tmp_path / "tight", lr=1e-4, train_layers=1))
    with caplog.at_level("WARNING"):
        logs = tight.step([[0, 1, 2, 3]], n_tokens, loss_of(tight, oom=True))
    said = caplog.text
    assert "gradient checkpointing" in said and "split in 2" in said and "split in 4" in said
    assert tight.cfg.gradient_checkpointing and tight.halvings == 2
    assert logs["rows"] * n_tokens == 4  # every row counted once, the failed passes not at all
    roomy = Trainer(TrainConfig(model=tiny_model, out=tmp_path / "roomy", lr=1e-4, train_layers=1))
    roomy.step([[0], [1], [2], [3]], n_tokens, loss_of(roomy, oom=False))
    for a, b in zip(tight.model.parameters(), roomy.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    start = load_model(tiny_model)
    assert any(not torch.equal(a, b) for a, b in zip(tight.model.parameters(), start.parameters()))  # it did train
    # the next step starts at the size that fitted: no retry
    caplog.clear()
    with caplog.at_level("WARNING"):
        tight.step([[0, 1, 2, 3]], n_tokens, loss_of(tight, oom=True))
    assert "out of GPU memory" not in caplog.text


def long_chat_rows(n=6):
    """chat_rows with a system prompt long enough to be run once for a micro-batch (logprobs.MIN_SHARED)."""
    notes = " ".join(f"Note {k}: cells hold numbers or text." for k in range(12))
    return [r | {"messages": [{"role": "system", "content": f"You act on a spreadsheet with CalcTools. {notes}"},
                              *r["messages"][1:]]} for r in chat_rows(n)]


@pytest.mark.parametrize("lora", [False, True])
def test_the_frozen_layers_output_kept_between_passes_changes_no_number(tiny_model, lora):
    """With only the top layers training (fully, or a LoRA adapter on them), what the bottom ones make of a row
    is computed once and reused: log-probs, GRPO's loss and the gradients are the whole model's, the rows
    batched with others or alone, the system prompt shared or not; the model is whole again after each pass."""
    import torch

    from computerrl.policy.checkpoint import load_model, load_tokenizer
    from computerrl.policy.frozen_trunk import FrozenTrunk
    from computerrl.policy.grpo_loss import Clip, rows_loss
    from computerrl.policy.logprobs import (MIN_SHARED, answer_ids, chat_prompt_ids, decoder_of, response_logprobs,
                                            shared_prefix)
    from computerrl.policy.trainer import _freeze_all_but

    tok, model = load_tokenizer(tiny_model), load_model(tiny_model, trainable=True)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], layers_to_transform=[1],
                                                 init_lora_weights=False))
    else:
        _freeze_all_but(model, [1])
    decoder = decoder_of(model)
    assert FrozenTrunk.fits(decoder, 1)
    chats = [r["messages"] for r in long_chat_rows(4)]
    prompts, answers = [chat_prompt_ids(tok, c[:-1]) for c in chats], [answer_ids(tok, c[-1]["content"]) for c in chats]
    assert shared_prefix(prompts, 10**6) >= MIN_SHARED  # the shared-prefix pass is the one checked
    bottom_runs = []
    decoder.layers[0].register_forward_hook(lambda module, args, out: bottom_runs.append(args[0].shape))

    def logprobs_and_grads(rows, trunk):
        model.zero_grad()
        logp = torch.cat(response_logprobs(model, [prompts[i] for i in rows], [answers[i] for i in rows], trunk=trunk))
        logp.sum().backward()
        return logp.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    whole, whole_grads = logprobs_and_grads([0, 1, 2, 3], None)
    trunk = FrozenTrunk(decoder, 1, 1 << 30)
    bottom_runs.clear()
    for rows in ([0, 1, 2, 3], [0, 1, 2, 3], [3, 1], [0]):  # computed, kept; then regrouped from what is kept
        logp, grads = logprobs_and_grads(rows, trunk)
        assert torch.allclose(logp, torch.cat([whole[sum(map(len, answers[:i])):][:len(answers[i])] for i in rows]),
                              atol=1e-5)
        if rows == [0, 1, 2, 3]:
            assert all(torch.allclose(g, w, atol=1e-6, rtol=1e-4) for g, w in zip(grads, whole_grads))
    assert len(bottom_runs) == 2 and len(trunk.kept) == 4 and trunk.reused == 4 + 2 + 1  # the prefix, the rows: once
    assert [layer.self_attn.layer_idx for layer in decoder.layers] == [0, 1] and len(decoder.layers) == 2
    assert torch.allclose(logprobs_and_grads([0, 1, 2, 3], None)[0], whole)  # the whole model again, its norm too
    old = [lp - 0.1 for lp in whole.split(list(map(len, answers)))]  # ratios off 1: the clip has work
    args = (prompts, answers, [1.0, -1.0, 1.0, -1.0], old, Clip())
    assert rows_loss(model, *args, trunk=trunk)[0].item() == pytest.approx(rows_loss(model, *args)[0].item(), rel=1e-5)
    full = FrozenTrunk(decoder, 1, 0)  # no memory left for it: the rows' passes run their bottom layers each time
    assert torch.allclose(torch.cat(response_logprobs(model, prompts, answers, trunk=full)).detach(), whole, atol=1e-5)
    assert not full.kept and full.reused == 0


def test_sft_training_its_top_layers_trains_the_same_weights_with_the_frozen_layers_output_kept(tmp_path, tiny_model):
    import torch
    from typer.testing import CliRunner

    from computerrl.cli.main import app
    from computerrl.data.schemas import SFT_FEATURES
    from computerrl.policy.checkpoint import load_model

    save_atomic(datasets.Dataset.from_list(long_chat_rows(6), features=SFT_FEATURES), tmp_path / "data")
    outputs = {}
    for gib in (0.0, 2.0):
        out = tmp_path / f"trunk-{gib}"
        result = CliRunner().invoke(app, ["sft", "--data", str(tmp_path / "data"), "--model", tiny_model, "--out",
                                          str(out), "--epochs", "3", "--batch-rows", "4", "--lr", "1e-2",
                                          "--train-layers", "1", "--trunk-memory-gib", str(gib)])
        assert result.exit_code == 0, result.output
        outputs[gib] = out, result.output
    # 6 rows, each passed again in the 2 later epochs
    assert "the frozen layers ran once for 6 of 6 rows" in outputs[2.0][1] and "12 later passes" in outputs[2.0][1]
    assert "the frozen layers ran" not in outputs[0.0][1]
    (plain, _), (kept, _) = outputs[0.0], outputs[2.0]
    assert load(kept / "metrics")["loss"] == pytest.approx(load(plain / "metrics")["loss"], rel=1e-5)
    for (name, a), (_, b) in zip(load_model(plain).state_dict().items(), load_model(kept).state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name
