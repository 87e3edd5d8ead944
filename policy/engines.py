"""Generation engines behind one interface: chats in, text + token ids + log-probabilities out.

Every engine samples from softmax(logits / temperature) with no top-k / top-p truncation, and
reports for each sampled token log softmax(logits / T)[token]: the very quantity the trainer
recomputes as log πθ (`policy.logprobs`), so on the first epoch of an on-policy update the
importance ratio is 1 up to float error (a test checks it on the embedded model). Temperature 0
is greedy decoding; its log-probabilities are then taken at T = 1.

Engines register by name (`ENGINES`): `transformers` (default, CPU or GPU, here; `vision`, chosen for
it on a vision-language checkpoint), `llamacpp` (llama.cpp in-process on a CPU, the checkpoint
exported to GGUF), `vllm` (in-process on a GPU, imported only when chosen) and `openai` (any
OpenAI-compatible server).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from computerrl.data.registry import Registry, UnknownName

ENGINES = Registry("generation engine")
# modules engine_<name>.py, imported when first asked for
BUILTIN = ("transformers", "vision", "llamacpp", "vllm", "openai")


@dataclasses.dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0  # 0 = greedy
    max_new_tokens: int = 96  # answer length cap, in tokens

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0 (0 = greedy)")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")

    @property
    def logprob_temperature(self) -> float:
        """The temperature the reported log-probabilities are taken at."""
        return self.temperature or 1.0


@dataclasses.dataclass
class Generation:
    text: str  # the answer, special tokens removed
    prompt_ids: list[int]  # the chat as the model read it ([] when the engine cannot say)
    response_ids: list[int]  # sampled tokens, the end-of-turn token included when it was sampled
    logprobs: list[float]  # one per response token, at the sampling temperature ([] when unknown)
    finish: str  # "stop" (end of turn) or "length" (max_new_tokens reached)
    entropy: float = float("nan")  # mean entropy (nats) of the sampled distributions over the answer
    engine: str = ""  # what the row's `engine` column says, when more than the engine's name (e.g. no token ids)


class Engine(Protocol):
    name: str
    sampling: Sampling

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        """One answer per chat, sampled together (a batch)."""

    def count_tokens(self, text: str) -> int:
        """Tokens `text` costs in this engine's tokenizer (prompt budgets)."""

    def load_weights(self, checkpoint) -> None:
        """Take a new version of the same model, in place (the asynchronous loop's weight sync): no
        reload from scratch where the engine allows it, and no cache of the old weights kept."""

    def close(self) -> None: ...


def make_engine(name: str, checkpoint, sampling: Sampling, **options) -> Engine:
    """Build a registered engine; importing its module registers it (vllm only when asked for)."""
    import importlib

    from computerrl.policy.checkpoint import is_vision

    if name == "transformers" and is_vision(checkpoint):  # the processor reads the chats' screenshots too
        name = "vision"
    if name not in ENGINES and name in BUILTIN:
        importlib.import_module(f"computerrl.policy.engine_{name}")
    if name not in ENGINES:
        raise UnknownName(f"unknown generation engine {name!r}; known: {', '.join(sorted({*ENGINES, *BUILTIN}))}")
    return ENGINES[name](checkpoint, sampling, **options)
