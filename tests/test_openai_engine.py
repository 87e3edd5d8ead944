"""The `openai` engine against a real OpenAI-compatible server on loopback: llama-cpp-python's,
serving the embedded model's own GGUF file."""

from __future__ import annotations

import pytest
import torch

import computerrl.apis  # noqa: F401  (registers the app API classes)
from computerrl.policy.checkpoint import embedded_checkpoint
from computerrl.policy.engines import Sampling, make_engine
from computerrl.policy.prompt import BUDGETS, build_messages

OBS = {"focused_app": "calc", "windows": [], "a11y_tree": "tag\tname\ttext\tposition\tsize\n"
       "table-cell\tB2\t\t(300, 240)\t(80, 20)", "app_info": "", "last_result": ""}


def chats(engine, n=2):
    return [build_messages(f"Put {v} in cell B2.", OBS, [], BUDGETS["quick"], engine.count_tokens) for v in range(n)]


def test_a_server_without_token_ids_says_so_in_the_rows(llama_server):
    from computerrl.policy.agent import ModelPolicy

    engine = make_engine("openai", embedded_checkpoint(), Sampling(1.0, 24), llm_url=llama_server)
    gens = engine.generate(chats(engine), seed=0)
    for g in gens:
        assert g.text and g.finish in ("stop", "length")
        assert g.response_ids == [] and g.prompt_ids == [] and g.engine == "openai:no-token-ids"  # never guessed
        assert g.logprobs and all(lp <= 0 for lp in g.logprobs)
    policy = ModelPolicy(engine, BUDGETS["quick"], version="v")
    decision = policy.act("Put 1 in B2.", OBS, [])
    policy.close()
    assert decision.engine == "openai:no-token-ids" and decision.messages[0]["content"].endswith("Put 1 in B2.")


def test_server_logprobs_are_the_models_at_temperature_one(llama_server):
    """The server's numbers for its sampled tokens match the trainer's recomputation with the
    dequantized weights, up to llama.cpp's quantized arithmetic (observed mean |Δ| 0.03-0.07)."""
    from computerrl.policy.logprobs import response_logprobs

    engine = make_engine("openai", embedded_checkpoint(), Sampling(1.0, 24), llm_url=llama_server)
    local = make_engine("transformers", embedded_checkpoint(), Sampling(1.0, 24), dtype="float32")  # the trainer
    for chat, g in zip(chats(engine), engine.generate(chats(engine), seed=1)):
        ids = local.tokenizer(g.text, add_special_tokens=False).input_ids
        n = min(len(ids), len(g.logprobs))
        with torch.no_grad():
            mine = response_logprobs(local.model, [local.chat_ids(chat)], [ids], 1.0, pad_id=local.pad_id)[0]
        assert n > 0 and (torch.tensor(g.logprobs[:n]) - mine[:n]).abs().mean() < 0.2


def test_at_another_temperature_the_logprobs_are_left_out(llama_server):
    engine = make_engine("openai", embedded_checkpoint(), Sampling(0.5, 8), llm_url=llama_server)
    assert all(g.logprobs == [] and g.text for g in engine.generate(chats(engine, 1), seed=0))


def test_an_unreachable_server_is_a_clear_error():
    from computerrl.policy.engine_openai import ServerError

    with pytest.raises(ServerError, match="127.0.0.1:9/v1/models"):
        make_engine("openai", embedded_checkpoint(), Sampling(), llm_url="http://127.0.0.1:9/v1")
