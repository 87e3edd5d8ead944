"""The vllm engine with a stand-in `vllm` module: no GPU exists on this machine, so what is checked
is what the engine asks vLLM for (token-id prompts from the checkpoint's template, temperature-only
sampling, processed log-probs) and how it reads vLLM's answer. The real engine runs on a GPU host."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pytest

import computerrl.apis  # noqa: F401
from computerrl.policy.checkpoint import embedded_checkpoint
from computerrl.policy.engines import Sampling, make_engine


@dataclass
class Logprob:
    logprob: float


@dataclass
class Completion:
    token_ids: list
    logprobs: list
    finish_reason: str


@dataclass
class RequestOutput:
    outputs: list


@dataclass
class FakeLLM:
    kwargs: dict
    calls: list = field(default_factory=list)

    def generate(self, prompts, params, lora_request=None, use_tqdm=True):
        self.calls.append((prompts, params, lora_request))
        return [RequestOutput([Completion([10, 11, 2], [{10: Logprob(-0.5), 7: Logprob(-1.0)}, {11: Logprob(-0.25)},
                                                         {2: Logprob(-0.125)}], "stop")]) for _ in prompts]


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = lambda **kwargs: FakeLLM(kwargs)
    module.SamplingParams = lambda **kwargs: kwargs
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)


def test_the_engine_asks_vllm_for_the_trainers_distribution(fake_vllm):
    engine = make_engine("vllm", embedded_checkpoint(), Sampling(0.7, 32))
    assert engine.llm.kwargs["logprobs_mode"] == "processed_logprobs"  # after the temperature
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    [g] = engine.generate([chat], seed=5)
    prompts, params, lora = engine.llm.calls[0]
    assert prompts[0]["prompt_token_ids"] == engine.chat_ids(chat) == g.prompt_ids
    assert params[0] == {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "max_tokens": 32, "seed": 5,
                         "logprobs": 0, "stop_token_ids": [engine.eos_id]}
    assert lora is None
    assert g.response_ids == [10, 11, 2] and g.logprobs == [-0.5, -0.25, -0.125] and g.finish == "stop"


def test_without_vllm_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import fails
    with pytest.raises(ImportError, match=r"computerrl\[vllm\]"):
        make_engine("vllm", embedded_checkpoint(), Sampling())
