"""The `transformers` engine: one `generate` call for a batch of chats, on the CPU or a GPU.

Chats go through the checkpoint's own chat template, are left-padded into one batch and sampled
with temperature only (no top-k / top-p, so the distribution is the one the trainer recomputes).
Log-probabilities come from the raw logits `generate` returns, divided by the temperature.
`InverseCdfSampler` draws the tokens: `generate`'s own sampling (`torch.multinomial`) draws a random
number for every entry of the vocabulary, 3 ms of a 40 ms decode step here.

On a CPU the system prompt — setup, the API classes, the task — is most of every prompt and
repeats over a trajectory's steps, a group's samples and (but for the task) every task of an app.
So there the engine keeps the KV cache of recent heads — the longest common beginning of a batch's
system prompts — and samples the whole batch in one call from it (`prefix_cache`), decoding into
a KV cache allocated once for the batch's whole length (`static_cache`) rather than one that grows
(and is copied) every token. Each decode step reads that head's keys once for the whole batch
rather than once per row (`policy.shared_attention`).

`dtype="auto"` runs bfloat16 on a CPU that computes it natively (AMX or AVX-512 BF16: about 3.7×
the float32 prefill of the embedded model here) and float32 elsewhere. Rows sampled in another
dtype than the trainer's float32 say so (`transformers:bfloat16`), and GRPO recomputes πold with
the trainer's own weights for them, weighing the difference as for vLLM.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from computerrl.policy import shared_attention
from computerrl.policy.allocator import keep_freed_memory
from computerrl.policy.checkpoint import load_model, load_tokenizer, load_weights
from computerrl.policy.engines import ENGINES, Generation, Sampling
from computerrl.policy.logprobs import chat_prompt_ids

PREFIXES_KEPT = 8  # system prompts whose KV cache is kept (about 60 MB each for SmolLM2 at 1,300 tokens)


@ENGINES.register("transformers")
class TransformersEngine:
    name = "transformers"

    def __init__(self, checkpoint: Path, sampling: Sampling, *, device: str = "cpu", dtype: str = "auto",
                 model=None, tokenizer=None, prefix_cache: bool | None = None, static_cache: bool = True,
                 packed_head: bool = True):
        """`model` / `tokenizer`: already loaded ones (the trainer's), else loaded from `checkpoint`;
        `dtype`: float32, bfloat16 or auto; `prefix_cache`: reuse system prompts' KV caches (default: on a
        CPU); `static_cache`: decode into a KV cache allocated once for the batch's whole length (about
        30% faster than transformers' growing cache here, the same numbers to float error); `packed_head`:
        the output layer through a packed copy of its weight on a CPU (`packed_head`)."""
        self.sampling = sampling
        self.tokenizer = tokenizer or load_tokenizer(checkpoint)
        if model is None:
            dtype = fast_dtype(device) if dtype == "auto" else dtype
            model = load_model(checkpoint, device=device, dtype=dtype)
        self.model = model
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        self.engine = "" if dtype == "float32" else f"transformers:{dtype}"  # the rows' engine column
        self.eos_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self.device = next(self.model.parameters()).device
        if self.device.type == "cpu":
            keep_freed_memory()
        self.prefix_cache = self.device.type == "cpu" if prefix_cache is None else prefix_cache
        self.static_cache = static_cache
        self._prefixes: dict[tuple, object] = {}  # system prompt tokens -> KV cache, least recently used first
        self._head_packed: dict | None = {} if packed_head else None  # the output layer's oneDNN copy, when on

    def chat_ids(self, chat: list[dict[str, str]]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, chat)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        import torch

        prompts = [self.chat_ids(c) for c in chats]
        torch.manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), packed_head(self.model, self._head_packed):  # None: the layer as it is
                if not self.prefix_cache:
                    return self._sample(prompts)
                head = self._head(chats, prompts)
                with shared_head_attention(self.model, len(head) if self.static_cache else 0):
                    return self._sample(prompts, head)
        finally:
            self.model.train(was_training)

    def _head(self, chats: list[list[dict[str, str]]], prompts: list[list[int]]) -> tuple:
        """The tokens that begin every prompt of the batch and lie in every chat's system message, else ().
        Where the system messages differ (other tasks), the head ends with the last whole line they
        share, so batches of other task mixes find the same cached head."""
        systems = []
        for chat, prompt in zip(chats, prompts):
            system = self.tokenizer(self.tokenizer.apply_chat_template(chat[:1], tokenize=False),
                                    add_special_tokens=False).input_ids
            if chat[0]["role"] != "system" or prompt[:len(system)] != system:
                return ()
            systems.append(system)
        n = min(len(os.path.commonprefix(systems)), min(map(len, prompts)) - 1)  # each prompt keeps a token
        if any(len(system) != n for system in systems):
            while n and not self.tokenizer.decode(systems[0][n - 1]).endswith("\n"):
                n -= 1
        return tuple(systems[0][:n])

    def _prefix_cache(self, head: tuple, batch: int, length: int):
        """A KV cache for `batch` rows of up to `length` tokens that holds `head` already (its keys and
        values computed once, kept for later steps and samples)."""
        import copy

        import torch
        from transformers import StaticCache

        if head not in self._prefixes:
            self._prefixes[head] = self.model(input_ids=torch.tensor([head], device=self.device),
                                              use_cache=True).cache
            while len(self._prefixes) > PREFIXES_KEPT:
                self._prefixes.pop(next(iter(self._prefixes)))  # the least recently used
        self._prefixes[head] = kept = self._prefixes.pop(head)  # now the most recently used
        if not self.static_cache:
            cache = copy.deepcopy(kept)  # generate extends the cache it is given
            if batch > 1:
                cache.batch_repeat_interleave(batch)
            return cache
        cache = StaticCache(config=self.model.config, max_cache_len=length)
        for layer, src in zip(cache.layers, kept.layers):
            layer.lazy_initialization(src.keys.expand(batch, -1, -1, -1), src.values.expand(batch, -1, -1, -1))
            layer.keys[:, :, :len(head)] = src.keys
            layer.values[:, :, :len(head)] = src.values
            layer.cumulative_length.fill_(len(head))
        return cache

    def _sample(self, prompts: list[list[int]], head: tuple = ()) -> list[Generation]:
        """Sample one answer per prompt in one generate call. The part after the shared `head` (if
        any: its KV cache is reused) is left-padded, so padding sits between head and rest: the
        attention mask hides it and positions are counted from the mask, as the model saw them."""
        import torch

        width = max(map(len, prompts))
        h = len(head)
        ids = torch.tensor([p[:h] + [self.pad_id] * (width - len(p)) + p[h:] for p in prompts], device=self.device)
        mask = torch.tensor([[1] * h + [0] * (width - len(p)) + [1] * (len(p) - h) for p in prompts],
                            device=self.device)
        s = self.sampling
        config = generation_config(s, self.eos_id, self.pad_id)
        extra = {"cache": self._prefix_cache(head, len(prompts), width + s.max_new_tokens)} if head else {}
        extra.update(sampler(s))
        out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config, **extra)
        return self._generations(out, prompts, width)

    def _generations(self, out, prompts: list[list[int]], width: int) -> list[Generation]:
        """The answers of a generate call whose prompts took `width` positions."""
        import torch

        s = self.sampling
        new = out.sequences[:, width:]
        logp = torch.log_softmax(torch.stack(out.logits, dim=1).float() / s.logprob_temperature, dim=-1)
        token_logp = logp.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)  # per position: how spread the sampled distribution was
        results = []
        for b, prompt in enumerate(prompts):
            tokens = new[b].tolist()
            n = tokens.index(self.eos_id) + 1 if self.eos_id in tokens else len(tokens)
            results.append(Generation(
                text=self.tokenizer.decode(tokens[:n], skip_special_tokens=True), prompt_ids=prompt,
                response_ids=tokens[:n], logprobs=token_logp[b, :n].tolist(),
                finish="stop" if tokens[n - 1] == self.eos_id else "length",
                entropy=entropy[b, :n].mean().item(), engine=self.engine))
        return results

    def load_weights(self, checkpoint: Path) -> None:
        """The new version's tensors copied into the loaded model; the system prompts' KV caches, computed
        with the old ones, are dropped."""
        load_weights(self.model, checkpoint)
        self._prefixes.clear()

    def forget_prefixes(self) -> None:
        """Drop the cached system prompts (a benchmark's model-only run starts cold, like a rollout)."""
        self._prefixes.clear()

    def close(self) -> None:
        self.model = None


def generation_config(s: Sampling, eos_id: int, pad_id: int):
    """`generate`'s settings for `s`: always its greedy step, which at a temperature above 0 takes the
    token `InverseCdfSampler` drew (the only one it leaves possible)."""
    from transformers import GenerationConfig

    return GenerationConfig(do_sample=False, max_new_tokens=s.max_new_tokens, eos_token_id=eos_id,
                            pad_token_id=pad_id, output_logits=True, return_dict_in_generate=True)


def sampler(s: Sampling) -> dict:
    """generate's argument that draws the tokens at temperature > 0 (greedy: none)."""
    return {"logits_processor": [InverseCdfSampler(s.temperature)]} if s.temperature > 0 else {}


class InverseCdfSampler:
    """A logits processor that draws each row's next token from softmax(logits / temperature), the
    whole distribution, and leaves only that token possible.

    It inverts the distribution's cumulative sum (in float64, so that tokens of tiny probability keep
    their share) with one uniform number a row from torch's seeded generator: 0.2 ms a step, where
    `torch.multinomial`'s random number for every vocabulary entry took 3 ms."""

    def __init__(self, temperature: float):
        self.temperature = temperature

    def __call__(self, input_ids, scores):
        import torch

        # `scores` are the raw logits generate also returns (the log-probs' source): never changed in place
        cdf = torch.softmax(scores.double() / self.temperature, -1).cumsum_(-1)
        if not torch.isfinite(cdf[:, -1]).all():  # as torch.multinomial refused them
            raise ValueError("the model's logits hold inf or nan: no distribution to sample from")
        u = torch.rand(len(scores), 1, dtype=torch.float64, device=scores.device) * cdf[:, -1:]
        # u < the total but where rounding makes them equal (~1e-16 a draw): then the last token
        drawn = torch.searchsorted(cdf, u, right=True).clamp_(max=scores.shape[-1] - 1)
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)


@contextlib.contextmanager
def shared_head_attention(model, tokens: int):
    """Within: `model` decodes with `shared_attention`, the first `tokens` cached positions read once
    for the batch (0: the model's own attention, untouched)."""
    if not tokens:
        yield
        return
    config = model.config
    before = config._attn_implementation
    config._attn_implementation = shared_attention.register()
    try:
        with shared_attention.shared_prefix(tokens):
            yield
    finally:
        config._attn_implementation = before


@contextlib.contextmanager
def packed_head(model, kept: dict | None):
    """Within: `model`'s output layer (a float32 `lm_head` without bias, on a CPU) multiplies through
    oneDNN with its weight packed once, and again only when the weight changes (`kept` holds the copy,
    keyed by the tensor and its version counter, which every in-place update bumps). Generating, that
    layer gets one row per answer: on this project's AMD CPU MKL read the 49,152 × 576 head at ~2 GB/s
    for that (54 ms of a ~300 ms decoded token for 3 answers), oneDNN's packed copy takes 17 ms. The
    numbers differ by float rounding only (log-probs within 4e-5 of the unpacked layer's)."""
    import torch

    head = getattr(model, "lm_head", None)
    if kept is None or not (isinstance(head, torch.nn.Linear) and head.weight.device.type == "cpu"
            and head.bias is None and head.weight.dtype == torch.float32 and torch.backends.mkldnn.is_available()):
        yield
        return
    key = (head.weight.data_ptr(), head.weight._version)
    if kept.get("key") != key:
        kept.clear()  # the old copy goes before the new one is made
        kept.update(key=key, weight=head.weight.detach().to_mkldnn())
    weight = kept["weight"]
    head.forward = lambda x: torch.ops.aten.mkldnn_linear(x.to_mkldnn(), weight, None).to_dense()
    try:
        yield
    finally:
        del head.forward  # the class's own again (training, and the trainer's log-probs)


CPU_DTYPE = "COMPUTERRL_CPU_DTYPE"  # float32 or bfloat16: the engines' precision on a CPU, whatever it computes


def fast_dtype(device: str) -> str:
    """bfloat16 on a CPU that computes it natively (AMX or AVX-512 BF16), else float32 (on a GPU too:
    the trainer's dtype, as before). $COMPUTERRL_CPU_DTYPE decides on a CPU where it is set: runs compared
    across machines of both kinds, or a check of the engines' numbers against the trainer's."""
    if not device.startswith("cpu"):
        return "float32"
    if forced := os.environ.get(CPU_DTYPE):
        if forced not in ("float32", "bfloat16"):
            raise ValueError(f"${CPU_DTYPE}={forced!r}: expected float32 or bfloat16")
        return forced
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "float32"
    return "bfloat16" if {"amx_bf16", "avx512_bf16"} & set(flags.split()) else "float32"
