"""The vllm engine on a GPU, with a stand-in `vllm` module and a stand-in GPU: only what a GPU changes
is checked here (vLLM is given a share of the GPU's memory and a tensor-parallel size, and computes in
the checkpoint's dtype). The engine itself runs for real on this CPU in test_vllm_engine.py."""

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
    prompt_token_ids: list
    outputs: list


@dataclass
class FakeLLM:
    kwargs: dict
    calls: list = field(default_factory=list)

    @property
    def llm_engine(self):
        return types.SimpleNamespace(model_config=types.SimpleNamespace(dtype="torch.bfloat16"))

    def generate(self, prompts, params, lora_request=None, use_tqdm=True):
        self.calls.append((prompts, params, lora_request))
        return [RequestOutput(p["prompt_token_ids"], [Completion([10, 11, 2], [{10: Logprob(-0.5), 7: Logprob(-1.0)},
                                                                                {11: Logprob(-0.25)}, {2: Logprob(-0.125)}],
                                                                "stop")]) for p in prompts]


@pytest.fixture
def fake_vllm_on_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    module = types.ModuleType("vllm")
    module.LLM = lambda **kwargs: FakeLLM(kwargs)
    module.SamplingParams = lambda **kwargs: kwargs
    monkeypatch.setitem(sys.modules, "vllm", module)


def test_on_a_gpu_vllm_gets_a_memory_share_and_a_tensor_parallel_size_and_no_cpu_settings(fake_vllm_on_a_gpu):
    engine = make_engine("vllm", embedded_checkpoint(), Sampling(0.7, 32), gpu_memory_utilization=0.6,
                         tensor_parallel_size=4)
    kwargs = engine.llm.kwargs
    assert kwargs["gpu_memory_utilization"] == 0.6 and kwargs["tensor_parallel_size"] == 4
    assert kwargs["logprobs_mode"] == "processed_logprobs"  # after the temperature, as the trainer computes
    assert not {"kv_cache_memory_bytes", "enforce_eager", "dtype", "enable_chunked_prefill"} & set(kwargs)
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    [g] = engine.generate([chat], seed=5)
    assert g.engine == "vllm:bfloat16" and g.logprobs == [-0.5, -0.25, -0.125]
    assert g.prompt_ids == engine.chat_ids(chat) == engine.llm.calls[0][0][0]["prompt_token_ids"]  # what vLLM read


def test_without_vllm_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import fails
    with pytest.raises(ImportError, match=r"computerrl\[vllm\]"):
        make_engine("vllm", embedded_checkpoint(), Sampling())
