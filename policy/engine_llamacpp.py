"""The `llamacpp` engine: llama.cpp in-process, what small models run on a CPU with.

The checkpoint is exported to GGUF on first use (`gguf_export`, at `gguf_type`). Prompts are
rendered by the checkpoint's own chat template and passed as token ids, so the rows' ids are the
trainer's. Sampling happens here, in numpy, from softmax(logits / T) with no truncation, so the
reported log-probability and entropy are those of the distribution sampled from.

What makes it quick on a CPU:
- the chats of a batch are sequences of one context: they prefill together, then decode together,
  one token of each per forward pass;
- prefixes are kept as sequences of their own: each chat's system message is kept after it is
  read, and a later chat starts from the cached prefix it shares most with (a task's later steps,
  its group's other samples, the app's other tasks), copied rather than computed again.
Weights at F16 or Q8_0 round the trainer's: the rows say `llamacpp:<type>`, and GRPO recomputes
πold with its own weights and weighs the difference (truncated importance sampling), as for vLLM.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from computerrl.policy.checkpoint import load_tokenizer
from computerrl.policy.engines import ENGINES, Generation, Sampling
from computerrl.policy.logprobs import chat_prompt_ids

PREFIXES_KEPT = 4  # cached system prompts (sequences of their own in the KV cache)
CHUNK = 512  # tokens per forward pass while prefilling


@ENGINES.register("llamacpp")
class LlamaCppEngine:
    name = "llamacpp"

    def __init__(self, checkpoint: Path, sampling: Sampling, *, gguf_type: str = "f16", max_batch: int = 8,
                 context: int = 4096, threads: int = 0):
        """`max_batch`: chats sampled together at most; `context`: tokens a chat may hold, prompt and
        answer; `threads`: llama.cpp's threads (0 = as many as torch computes with: OMP_NUM_THREADS where set,
        else the physical cores; its threads spin while they wait, so more than there are cores to spare
        slows it down). The KV cache holds (max_batch + PREFIXES_KEPT) × context tokens, allocated at once:
        1.1 GB for SmolLM2 at the defaults."""
        try:
            import llama_cpp
        except ImportError:
            raise ImportError("--engine llamacpp needs llama-cpp-python: pip install 'computerrl[llamacpp]'") from None
        from llama_cpp._logger import set_verbose

        set_verbose(False)  # llama.cpp's log goes through this logger: errors only

        self.sampling, self.gguf_type = sampling, gguf_type
        self.engine = f"llamacpp:{gguf_type}"  # rows name the weights' precision
        self.tokenizer = load_tokenizer(checkpoint)
        self.eos_id = self.tokenizer.eos_token_id
        self.max_batch, self.context = max_batch, context
        self._lib, self.threads = llama_cpp, threads
        llama_cpp.llama_backend_init()
        self._open(checkpoint)

    def _open(self, checkpoint: Path) -> None:
        """The checkpoint's weights (exported to GGUF) and a context for them."""
        from computerrl.policy.gguf_export import export

        llama_cpp, max_batch, context, gguf_type = self._lib, self.max_batch, self.context, self.gguf_type
        path = export(checkpoint, gguf_type)
        self._model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        params = llama_cpp.llama_context_default_params()
        params.n_seq_max = max_batch + PREFIXES_KEPT
        params.n_ctx = params.n_seq_max * context
        params.n_batch = params.n_ubatch = CHUNK
        params.kv_unified = False  # a stream per sequence: each attends over its own tokens only
        if gguf_type == "f32":  # the trainer's numbers: keys, values and attention in float32 too
            params.type_k = params.type_v = llama_cpp.GGML_TYPE_F32
            params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # its CPU kernel rounds to float16
        import torch  # the process's thread count, as its other engines and the trainer compute

        params.n_threads = params.n_threads_batch = self.threads or torch.get_num_threads()
        self._ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not make a context (out of memory?)")
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self._model))
        self._batch = llama_cpp.llama_batch_init(CHUNK, 0, 1)
        self._prefixes: dict[tuple, int] = {}  # cached tokens -> their sequence id, least recently used first

    def chat_ids(self, chat: list[dict[str, str]]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, chat)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        results: list[Generation] = []
        for start in range(0, len(chats), self.max_batch):
            part = chats[start:start + self.max_batch]
            results += self._generate([self.chat_ids(c) for c in part], [self._system_len(c) for c in part],
                                      seed + start)
        return results

    def _system_len(self, chat: list[dict[str, str]]) -> int:
        if chat[0]["role"] != "system":
            return 0
        return len(chat_prompt_ids(self.tokenizer, chat[:1]))

    def _generate(self, prompts: list[list[int]], heads: list[int], seed: int) -> list[Generation]:
        s = self.sampling
        for prompt in prompts:
            if len(prompt) + s.max_new_tokens > self.context:
                raise ValueError(f"a prompt of {len(prompt)} tokens and {s.max_new_tokens} new ones exceed "
                                 f"the llamacpp engine's context of {self.context}")
        rngs = [np.random.default_rng([seed, k]) for k in range(len(prompts))]
        try:
            logits = self._prefill(prompts, heads)
            answers: list[list[int]] = [[] for _ in prompts]
            logps: list[list[float]] = [[] for _ in prompts]
            entropies: list[list[float]] = [[] for _ in prompts]
            live = list(range(len(prompts)))
            while live:
                nexts = []
                for k in live:
                    token, logp, entropy = self._sample(logits[k], rngs[k])
                    answers[k].append(token)
                    logps[k].append(logp)
                    entropies[k].append(entropy)
                    if token != self.eos_id and len(answers[k]) < s.max_new_tokens:
                        nexts.append(k)
                live = nexts
                if live:
                    logits = self._decode([(k, [answers[k][-1]], len(prompts[k]) + len(answers[k]) - 1)
                                           for k in live])
        finally:
            for k in range(len(prompts)):
                self._lib.llama_memory_seq_rm(self._mem, k, -1, -1)
        return [Generation(text=self.tokenizer.decode(a, skip_special_tokens=True), prompt_ids=p, response_ids=a,
                           logprobs=lp, finish="stop" if a[-1] == self.eos_id else "length",
                           entropy=float(np.mean(e)), engine=self.engine)
                for p, a, lp, e in zip(prompts, answers, logps, entropies)]

    def _prefill(self, prompts: list[list[int]], heads: list[int]) -> dict[int, np.ndarray]:
        """Sequence k gets prompt k from its best cached prefix on; its system message is then kept."""
        pieces = []
        for k, prompt in enumerate(prompts):
            cached, seq = self._best_prefix(prompt)
            if cached:
                self._copy(seq, k, cached)
            pieces.append((k, prompt[cached:], cached))
        logits = self._decode(pieces)
        for k, (prompt, head) in enumerate(zip(prompts, heads)):
            if head:
                self._keep_prefix(k, tuple(prompt[:head]))
        return logits

    def _best_prefix(self, prompt: list[int]) -> tuple[int, int]:
        """(tokens shared, sequence) of the cached prefix sharing the most with `prompt`; one token
        is always left to read, for its logits."""
        best, best_seq, whole = 0, -1, tuple(prompt)
        for tokens, seq in self._prefixes.items():
            n = min(len(os.path.commonprefix([tokens, whole])), len(prompt) - 1)
            if n > best:
                best, best_seq = n, seq
        if best:
            key = next(t for t, s in self._prefixes.items() if s == best_seq)
            self._prefixes[key] = self._prefixes.pop(key)  # now the most recently used
        return best, best_seq

    def _keep_prefix(self, seq: int, tokens: tuple) -> None:
        if tokens in self._prefixes:
            return
        if len(self._prefixes) < PREFIXES_KEPT:
            slot = self.max_batch + len(self._prefixes)
        else:
            slot = self._prefixes.pop(next(iter(self._prefixes)))  # the least recently used
            self._lib.llama_memory_seq_rm(self._mem, slot, -1, -1)
        self._copy(seq, slot, len(tokens))
        self._prefixes[tokens] = slot

    def _copy(self, src: int, dst: int, n: int) -> None:
        """Sequence `dst` becomes the first `n` tokens of `src` (llama.cpp copies whole streams)."""
        self._lib.llama_memory_seq_rm(self._mem, dst, -1, -1)
        self._lib.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        self._lib.llama_memory_seq_rm(self._mem, dst, n, -1)

    def _decode(self, pieces: list[tuple[int, list[int], int]]) -> dict[int, np.ndarray]:
        """Read each (sequence, tokens, first position) in forward passes of at most CHUNK tokens;
        returns each sequence's logits after its last token."""
        flat = [(k, token, pos + i, i == len(tokens) - 1) for k, tokens, pos in pieces for i, token in enumerate(tokens)]
        out: dict[int, np.ndarray] = {}
        b = self._batch
        for start in range(0, len(flat), CHUNK):
            chunk = flat[start:start + CHUNK]
            for j, (k, token, pos, last) in enumerate(chunk):
                b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, pos, 1, last
                b.seq_id[j][0] = k
            b.n_tokens = len(chunk)
            if self._lib.llama_decode(self._ctx, b) != 0:
                self._forget_prefixes()
                raise RuntimeError("llama.cpp found no room in its KV cache; its cached prefixes were dropped")
            for j, (k, _, _, last) in enumerate(chunk):
                if last:
                    ptr = self._lib.llama_get_logits_ith(self._ctx, j)
                    out[k] = np.ctypeslib.as_array(ptr, shape=(self._vocab,)).astype(np.float64)
        return out

    def _sample(self, logits: np.ndarray, rng) -> tuple[int, float, float]:
        """(token, its log-probability, the distribution's entropy) at the sampling temperature."""
        t = self.sampling.logprob_temperature
        z = logits / t
        logp = z - z.max()
        logp -= np.log(np.exp(logp).sum())
        p = np.exp(logp)
        if self.sampling.temperature > 0:
            token = int(rng.choice(len(p), p=p / p.sum()))
        else:
            token = int(np.argmax(logits))
        return token, float(logp[token]), float(-(p * logp).sum())

    def _forget_prefixes(self) -> None:
        for slot in self._prefixes.values():
            self._lib.llama_memory_seq_rm(self._mem, slot, -1, -1)
        self._prefixes.clear()

    def forget_prefixes(self) -> None:
        """Drop the cached prefixes (a benchmark's model-only run starts cold, like a rollout)."""
        self._forget_prefixes()

    def load_weights(self, checkpoint: Path) -> None:
        """llama.cpp reads weights from a GGUF file only: the new version is exported and loaded anew,
        with its context (a reload, not a switch in place)."""
        self.close()
        self._open(checkpoint)

    def close(self) -> None:
        if self._ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._lib.llama_model_free(self._model)
            self._ctx = self._model = None

