"""The `transformers` engine: one `generate` call for a batch of chats, on the CPU or a GPU.

Chats go through the checkpoint's own chat template, are left-padded into one batch and sampled
with temperature only (no top-k / top-p, so the distribution is the one the trainer recomputes).
Log-probabilities come from the raw logits `generate` returns, divided by the temperature.
"""

from __future__ import annotations

from pathlib import Path

from computerrl.policy.checkpoint import load_model, load_tokenizer
from computerrl.policy.engines import ENGINES, Generation, Sampling


@ENGINES.register("transformers")
class TransformersEngine:
    name = "transformers"

    def __init__(self, checkpoint: Path, sampling: Sampling, *, device: str = "cpu", dtype: str = "float32",
                 model=None, tokenizer=None):
        """`model` / `tokenizer`: already loaded ones (the trainer's), else loaded from `checkpoint`."""
        self.sampling = sampling
        self.tokenizer = tokenizer or load_tokenizer(checkpoint)
        self.model = model if model is not None else load_model(checkpoint, device=device, dtype=dtype)
        self.eos_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id

    def chat_ids(self, chat: list[dict[str, str]]) -> list[int]:
        text = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        import torch
        from transformers import GenerationConfig

        prompts = [self.chat_ids(c) for c in chats]
        width = max(map(len, prompts))
        device = next(self.model.parameters()).device
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        s = self.sampling
        config = GenerationConfig(do_sample=s.temperature > 0, temperature=s.temperature or None, top_k=None,
                                  top_p=None, max_new_tokens=s.max_new_tokens, eos_token_id=self.eos_id,
                                  pad_token_id=self.pad_id, output_logits=True, return_dict_in_generate=True)
        torch.manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        self.model.train(was_training)
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
                entropy=entropy[b, :n].mean().item()))
        return results

    def close(self) -> None:
        self.model = None
