"""The `vllm` engine: vLLM in-process on a GPU (imported only when `--engine vllm` is chosen).

Prompts are rendered by the checkpoint's own chat template here and passed as token ids, so the
rows' `prompt_ids` are exactly what vLLM read. Sampling is temperature only (top-p 1, top-k off);
vLLM is started with `logprobs_mode="processed_logprobs"`, so the log-probability it reports for a
sampled token is taken after the temperature: log softmax(logits / T), the trainer's quantity.
A LoRA adapter folder is served on its base model with vLLM's LoRA support.
"""

from __future__ import annotations

import math
from pathlib import Path

from computerrl.policy.checkpoint import ADAPTER_CONFIG, base_of, load_tokenizer
from computerrl.policy.engines import ENGINES, Generation, Sampling
from computerrl.policy.logprobs import chat_prompt_ids


@ENGINES.register("vllm")
class VLLMEngine:
    name = "vllm"

    def __init__(self, checkpoint: Path, sampling: Sampling, *, gpu_memory_utilization: float = 0.85,
                 tensor_parallel_size: int = 1, max_model_len: int | None = None):
        try:
            import vllm
        except ImportError:
            raise ImportError("--engine vllm needs vLLM and a GPU: pip install 'computerrl[vllm]'") from None
        self.sampling = sampling
        self.tokenizer = load_tokenizer(checkpoint)
        checkpoint = Path(checkpoint)
        self.lora = None
        if (checkpoint / ADAPTER_CONFIG).exists():
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("policy", 1, str(checkpoint))
        self.llm = vllm.LLM(model=str(base_of(checkpoint)), tokenizer=str(base_of(checkpoint)),
                            logprobs_mode="processed_logprobs", enable_lora=self.lora is not None,
                            gpu_memory_utilization=gpu_memory_utilization,
                            tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len)
        self.eos_id = self.tokenizer.eos_token_id

    def chat_ids(self, chat: list[dict[str, str]]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, chat)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        import vllm
        from vllm.inputs import TokensPrompt

        prompts = [self.chat_ids(c) for c in chats]
        s = self.sampling
        params = [vllm.SamplingParams(temperature=s.temperature, top_p=1.0, top_k=-1, max_tokens=s.max_new_tokens,
                                      seed=seed + k, logprobs=0, stop_token_ids=[self.eos_id]) for k in range(len(chats))]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                    lora_request=self.lora, use_tqdm=False)
        results = []
        for prompt, out in zip(prompts, outputs):
            o = out.outputs[0]
            ids = list(o.token_ids)
            # logprobs=0 gives, per position, a dict holding at least the sampled token.
            logprobs = [step[token].logprob for token, step in zip(ids, o.logprobs or [])]
            results.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), prompt_ids=prompt,
                                      response_ids=ids, logprobs=logprobs if len(logprobs) == len(ids) else [],
                                      finish="length" if o.finish_reason == "length" else "stop",
                                      entropy=math.nan))
        return results

    def close(self) -> None:
        self.llm = None
