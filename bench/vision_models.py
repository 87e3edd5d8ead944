"""Vision-language checkpoints for the tests and the vision benchmark, built from configs with random
vision towers (no trained vision model can be had on this machine): the two families computer-use agents
build on.

- `qwen_vl`: Qwen2.5-VL's architecture (UI-TARS, OpenCUA, EvoCUA build on it), a 2-layer text model of
  hidden size 64, the embedded tokenizer with Qwen's four vision tokens, Qwen's own chat template.
- `smolvlm`: Idefics3's architecture (SmolVLM), whose text model is the embedded SmolLM2-135M-Instruct
  with its trained weights, the image tokens SmolVLM adds, and SmolLM2's ChatML with image slots.

Each is saved as a checkpoint folder (model, tokenizer, processor), as a downloaded one would be.
"""

from __future__ import annotations

from pathlib import Path

# Qwen2-VL/Qwen2.5-VL-Instruct's chat template, as their tokenizer_config.json has it
QWEN_VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in "
    "content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
    "== 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
    "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "<|im_start|>assistant\n{% endif %}")

# SmolLM2's ChatML, with SmolVLM's <image> slot where a message holds an image
CHATML_IMAGE_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for c in message['content'] %}{% if c['type'] == 'image' %}<image>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen_vl(folder: Path, *, max_pixels: int = 64 * 28 * 28) -> Path:
    """A tiny random Qwen2.5-VL (3.5M parameters): at most max_pixels / 784 tokens a screenshot."""
    import torch
    from transformers import AutoTokenizer, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from computerrl.policy.checkpoint import embedded_checkpoint
    from computerrl.policy.vision import image_only_processor

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_checkpoint()))
    vision_tokens = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tokenizer.add_special_tokens({"additional_special_tokens": vision_tokens})
    ids = dict(zip(("vision_start_token_id", "vision_end_token_id", "image_token_id", "video_token_id"),
                   tokenizer.convert_tokens_to_ids(vision_tokens)))
    text = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]})  # head_dim/2
    vision = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=64,
                  fullatt_block_indexes=[1], window_size=112)
    model = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(text_config=text, vision_config=vision,
                                                                tie_word_embeddings=True, **ids))
    processor = image_only_processor("Qwen2_5_VLProcessor")(
        image_processor=Qwen2VLImageProcessorPil(min_pixels=4 * 28 * 28, max_pixels=max_pixels),
        tokenizer=tokenizer, chat_template=QWEN_VL_TEMPLATE)
    return _save(folder, model, processor)


def smolvlm(folder: Path, *, image_size: int = 128, base: Path | None = None) -> Path:
    """Idefics3 with SmolLM2-135M-Instruct's weights (or `base`'s, a checkpoint of its family) as its text model,
    a random 2-layer vision tower and no image splitting: (image_size / 16)² / 4 + 3 tokens a screenshot (19 at
    128)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer, Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    from computerrl.policy.checkpoint import embedded_checkpoint

    torch.manual_seed(0)
    base = Path(base) if base else embedded_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    known = len(tokenizer)
    # the processor looks these up; it adds only the first three itself
    extra = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>",
             *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7))]
    tokenizer.add_special_tokens({"additional_special_tokens": extra})
    text = AutoConfig.from_pretrained(str(base))
    text.vocab_size, text.tie_word_embeddings = len(tokenizer), True
    config = Idefics3Config(text_config=text.to_dict(), scale_factor=2, tie_word_embeddings=True,
                            vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                               num_attention_heads=4, image_size=image_size, patch_size=16),
                            image_token_id=tokenizer.convert_tokens_to_ids("<image>"), pad_token_id=tokenizer.pad_token_id)
    model = Idefics3ForConditionalGeneration(config)
    weights = {k.replace("model.", "model.text_model.", 1): v for k, v in load_file(str(base / "model.safetensors")).items()}
    embed = weights.pop("model.text_model.embed_tokens.weight")
    with torch.no_grad():
        table = model.get_input_embeddings().weight
        table[:known], table[known:] = embed, embed.mean(0)  # the new tokens start as the average token
    unexpected = model.load_state_dict(weights, strict=False).unexpected_keys
    assert not unexpected, unexpected
    processor = Idefics3Processor(
        image_processor=Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": image_size},
                                                  max_image_size={"longest_edge": image_size}),
        tokenizer=tokenizer, image_seq_len=(image_size // 16) ** 2 // 4, chat_template=CHATML_IMAGE_TEMPLATE)
    return _save(folder, model, processor)


def _save(folder: Path, model, processor) -> Path:
    folder = Path(folder)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
