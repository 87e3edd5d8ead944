"""The `transformers` engine for a vision-language checkpoint: each chat's screenshots go through the
checkpoint's processor with its text, and the rows' prompt_ids hold the image tokens the model read.

Sampling and log-probabilities are the text engine's (`TransformersEngine`): the same seeded draw from
softmax(logits / T), the same reported quantity, so the trainer's recomputation (`vision.screen_logprobs`)
is its ratio-1 partner. No system-prompt KV cache here: a screenshot changes every prompt from its
first image on, and the chat template may place one before the system text.
"""

from __future__ import annotations

from pathlib import Path

from computerrl.policy.engine_transformers import TransformersEngine, fast_dtype, generation_config, sampler
from computerrl.policy.checkpoint import base_of, load_model
from computerrl.policy.engines import ENGINES, Generation, Sampling
from computerrl.policy.vision import load_processor, model_inputs


@ENGINES.register("vision")
class VisionEngine(TransformersEngine):
    def __init__(self, checkpoint: Path, sampling: Sampling, *, device: str = "cpu", dtype: str = "auto",
                 model=None, processor=None, **_text_only_options):
        self.processor = processor or load_processor(base_of(checkpoint))  # an adapter's: its base model's
        dtype = fast_dtype(device) if dtype == "auto" else dtype
        super().__init__(checkpoint, sampling, device=device, model=model or load_model(
            checkpoint, device=device, dtype=dtype), tokenizer=self.processor.tokenizer, prefix_cache=False)

    def chat_ids(self, chat: list[dict]) -> list[int]:
        return model_inputs(self.processor, [chat])["input_ids"][0].tolist()

    def generate(self, chats: list[list[dict]], *, seed: int) -> list[Generation]:
        import torch

        inputs = model_inputs(self.processor, chats).to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        prompts = [ids[mask.bool()].tolist() for ids, mask in zip(inputs["input_ids"], inputs["attention_mask"])]
        torch.manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                out = self.model.generate(**inputs, generation_config=generation_config(
                    self.sampling, self.eos_id, self.pad_id), **sampler(self.sampling))
        finally:
            self.model.train(was_training)
        return self._generations(out, prompts, inputs["input_ids"].shape[1])
