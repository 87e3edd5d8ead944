"""A policy that sees the screen, for real: vision-language checkpoints of the two families computer-use
agents build on (bench/vision_models.py: Qwen2.5-VL tiny and random; Idefics3 whose language model is the
embedded SmolLM2 with its weights), reading real screenshots of real desktops through rollout and grpo."""

from __future__ import annotations

import io
import json

import pytest
import torch

from computerrl.bench.vision_models import qwen_vl, smolvlm
from computerrl.data.datasets_io import load, save_atomic
from computerrl.policy.engines import Sampling, make_engine
from computerrl.policy.logprobs import response_logprobs
from computerrl.policy.vision import screen_prompt, with_screens
from conftest import generated_desktops

CHAT = [{"role": "system", "content": "You operate a computer. Answer with one line of Python."},
        {"role": "user", "content": "(an earlier step)"}, {"role": "assistant", "content": "Agent.wait()"},
        {"role": "user", "content": "Put 5 in B2."}]


def png(seed: int, size=(1280, 720)) -> bytes:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vision-models")
    return {"qwen": qwen_vl(root / "qwen"), "smolvlm": smolvlm(root / "smolvlm")}


@pytest.mark.parametrize("family, bound", [("qwen", 1e-5), ("smolvlm", 1e-4)])
def test_the_engine_reads_the_prompt_the_trainer_rebuilds_and_their_logprobs_agree(models, family, bound):
    """A batch of two chats (two screenshots, then one), left-padded together: each row's prompt ids,
    image tokens included, are what the trainer rebuilds from its messages and screenshots, and the
    trainer's float32 log-probs are the engine's (bound: 1e-5 on the tiny model, 1e-4 with SmolLM2's 30
    layers, where cached decoding and a whole-sequence pass round differently). The engine in float32, the
    trainer's dtype, also on a CPU where it would sample in bfloat16."""
    engine = make_engine("transformers", models[family], Sampling(1.0, 12), dtype="float32")
    screens = [[png(1), png(2)], [png(3)]]
    chats = [with_screens(CHAT, screens[0]), with_screens(CHAT[:1] + CHAT[3:], screens[1])]
    gens = engine.generate(chats, seed=3)
    image_token = engine.model.config.image_token_id
    for chat, shots, g in zip(chats, screens, gens):
        prompt = screen_prompt(engine.processor, chat, g.prompt_ids)  # raises if the ids differ
        per_image = {"qwen": None, "smolvlm": 16}[family]
        count = g.prompt_ids.count(image_token)
        assert count > 0 and (per_image is None or count == per_image * len(shots))
        with torch.no_grad():
            mine = response_logprobs(engine.model, [prompt], [g.response_ids])[0]
        gap = (mine - torch.tensor(g.logprobs)).abs().max().item()
        print(f"{family}: {count} image tokens for {len(shots)} screenshots, |engine - trainer| max {gap:.1e}")
        assert gap < bound


def test_a_processor_that_resizes_otherwise_is_refused_not_trained_on(models, tmp_path):
    """A row is trained only on the tokens it was sampled from: the same checkpoint whose processor gives a
    screenshot more tokens rebuilds another prompt, and says so."""
    from computerrl.policy.vision import load_processor

    engine = make_engine("transformers", models["qwen"], Sampling(1.0, 4))
    chat = with_screens(CHAT, [png(5)])
    g = engine.generate([chat], seed=0)[0]
    other = load_processor(models["qwen"])
    other.image_processor.size.longest_edge *= 4  # max pixels: up to 4x the image tokens
    with pytest.raises(ValueError, match="is not the one the engine read"):
        screen_prompt(other, chat, g.prompt_ids)


def test_the_prompt_keeps_the_newest_screenshots_and_drops_the_older_ones(models):
    """Which screenshots reach the model at the fourth step of an episode, --screens 3: the third step's,
    the second's, and this one's, oldest first, each at the head of its own turn; the first is dropped."""
    from computerrl.policy.agent import ModelPolicy
    from computerrl.policy.prompt import BUDGETS

    engine = make_engine("transformers", models["qwen"], Sampling(1.0, 4))
    policy = ModelPolicy(engine, BUDGETS["small"], version="v", screens=3, background=False)
    history = [(f"Agent.wait()  # {k}", "Done", png(k)) for k in range(3)]
    shots = policy._screens({"screenshot": png(3)}, history)
    assert shots == [png(1), png(2), png(3)]
    chat = with_screens([{"role": "system", "content": "s"}] + [{"role": r, "content": f"{r} {k}"} for k in range(3)
                                                                  for r in ("user", "assistant")] +
                        [{"role": "user", "content": "now"}], shots)
    holding = [m["content"][1]["text"] for m in chat if not isinstance(m["content"], str)]
    assert holding == ["user 1", "user 2", "now"]
    assert all(m["content"][0]["image"] == shot for m, shot in zip([m for m in chat if not isinstance(m["content"], str)], shots))
    with pytest.raises(RuntimeError, match="without its screenshot"):
        policy._screens({"screenshot": b""}, history)


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    with generated_desktops(tmp_path_factory.mktemp("vision-desktops"), tasks=1, desktops=1) as root:
        yield root


@pytest.fixture(scope="module")
def played(models, desktop, tmp_path_factory):
    """A vision rollout on a real desktop: 2 plays of 3 steps, --screens 2, made-up rewards beside it (the random
    model never succeeds: sample 0 is called a success of valid actions, sample 1 a failure) for grpo and
    filter-success."""
    from computerrl.stages.rollout import RolloutConfig, run

    root = tmp_path_factory.mktemp("vision-played")
    summary = run(RolloutConfig(tasks=desktop / "tasks", envs=desktop / "envs", model=str(models["qwen"]), samples=2,
                                max_steps=3, max_new_tokens=16, temperature=1.0, screens=2, out=root / "rollout"))
    assert summary["trajectories"] == 2 and summary["screenshot_bytes_per_step"] > 1e4  # a PNG of the screen
    ds = load(root / "rollout")
    relabelled = save_atomic(ds.map(lambda r: {"reward": float(r["sample"] == 0), "success": r["sample"] == 0,
                                               "action_valid": r["sample"] == 0}), root / "relabelled")
    (relabelled / "lineage.json").write_text((root / "rollout" / "lineage.json").read_text())
    return root


@pytest.mark.desktop
def test_a_vision_rollout_holds_the_last_screenshots_once_each_in_the_grid_frame(models, played):
    """Three steps a play, --screens 2: the prompts hold 1, 2, 2 screenshots (the image tokens count them),
    each row stores its own once, and the model was told its coordinate frame."""
    rows = load(played / "rollout").to_list()
    starts = json.loads((models["qwen"] / "config.json").read_text())["vision_start_token_id"]
    assert sorted(r["step"] for r in rows) == [0, 0, 1, 1, 2, 2]
    for r in rows:
        assert r["screens"] == min(r["step"] + 1, 2)
        assert r["prompt_ids"].count(starts) == r["screens"]  # exactly the last N screenshots reached the model
        assert r["screenshot"]["bytes"][:8] == b"\x89PNG\r\n\x1a\n"
        assert "0-1000 grid" in r["messages"][-1]["content"]


@pytest.mark.desktop
def test_grpo_trains_a_vision_model_on_its_rows_with_the_vision_tower_frozen(models, played, tmp_path):
    from safetensors.torch import load_file

    from computerrl.stages.grpo import GRPOConfig, run

    policy = tmp_path / "policy"
    result = run(GRPOConfig(rollouts=[played / "relabelled"], model=str(models["qwen"]), out=policy, epochs=1, lr=1e-3))
    assert result["rows"] == 6 and abs(result["last"]["ratio"] - 1) < 1e-4  # πθ = πold on the first pass
    before, after = load_file(models["qwen"] / "model.safetensors"), load_file(policy / "model.safetensors")
    vision = [k for k in before if k.startswith("visual.")]  # Qwen's checkpoint layout: the rest is the language model
    assert vision and all(torch.equal(before[k], after[k]) for k in vision)
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("model.layers."))
    lora = tmp_path / "lora"
    run(GRPOConfig(rollouts=[played / "relabelled"], model=str(models["qwen"]), out=lora, epochs=1, lr=1e-3, lora_rank=4))
    targets = json.loads((lora / "adapter_config.json").read_text())["target_modules"]
    assert targets and not any("visual" in t for t in targets)  # adapters on the language model only
    for trained in (policy, lora):  # both play as vision models
        again = make_engine("transformers", trained, Sampling(0.0, 4))
        assert again.generate([with_screens(CHAT, [png(9)])], seed=0)[0].prompt_ids.count(
            again.model.config.vision_start_token_id) == 1


@pytest.mark.desktop
def test_filter_success_keeps_the_screenshots_and_sft_trains_on_them(models, played, tmp_path):
    from computerrl.stages.filter_success import FilterSuccessConfig
    from computerrl.stages.filter_success import run as keep
    from computerrl.stages.sft import SFTConfig, run

    kept = keep(FilterSuccessConfig(rollouts=[played / "relabelled"], out=tmp_path / "successes", k=1))
    rows = load(tmp_path / "successes").to_list()
    assert kept["rows"] == len(rows) and rows
    steps = {r["step"]: r for r in load(played / "relabelled").to_list() if r["sample"] == 0}
    for r in rows:
        assert len(r["screenshots"]) == steps[r["step"]]["screens"]
    summary = run(SFTConfig(data=[tmp_path / "successes"], model=str(models["qwen"]), out=tmp_path / "sft", epochs=2,
                            lr=1e-3, batch_rows=len(rows)))
    metrics = load(tmp_path / "sft" / "metrics")
    assert summary["updates"] == 2 and metrics["loss"][1] < metrics["loss"][0]
    with pytest.raises(ValueError, match="holds screenshots"):
        run(SFTConfig(data=[tmp_path / "successes"], out=tmp_path / "text-sft", epochs=1))


@pytest.mark.desktop
def test_eval_plays_a_vision_model(models, desktop, tmp_path):
    from computerrl.stages.eval import EvalConfig, run

    summary = run(EvalConfig(tasks=desktop / "tasks", envs=desktop / "envs", model=str(models["smolvlm"]),
                             max_steps=1, max_new_tokens=12, out=tmp_path / "eval"))
    assert summary["overall"]["tasks"] == 1
    steps = load(tmp_path / "eval" / "steps").to_list()
    assert [s["screens"] for s in steps] == [1] and steps[0]["prompt_ids"].count(
        json.loads((models["smolvlm"] / "config.json").read_text())["image_token_id"]) == 16
