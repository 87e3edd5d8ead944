"""Policies that see the screen: a vision-language checkpoint (a Hugging Face image-text-to-text model,
Qwen2.5-VL, Idefics3/SmolVLM, …) reads screenshots beside the text prompt.

A step's chat holds the current screenshot, and those of up to `keep - 1` steps before it (older ones
are dropped, so the prompt stays bounded however long the episode). In a chat an image is a content part
`{"type": "image", "image": <PNG bytes or PIL image>}` of a user message; the checkpoint's own chat
template decides where its image tokens go, and its processor resizes each image as the model expects,
within a budget of tokens per image (`max_image_tokens`).

Both the engine and the trainer build a step's model inputs here (`model_inputs`), from the same chat
or from the same token ids and images, so they read exactly the same tokens, image tokens included.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Sequence


def image_only_processor(name: str):
    """The processor class `name` (Qwen2-VL's, Qwen2.5-VL's) without its video processor.

    transformers finds a processor's parts from its __init__ signature and checks each one's class; the
    video processor's check needs torchvision, which PyPI has only as a CUDA build that fails to load
    against a CPU torch. A screenshot policy reads no video: a subclass whose signature has none loads."""
    import transformers

    base = getattr(transformers, name)

    class ImageOnly(base):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    ImageOnly.__name__ = ImageOnly.__qualname__ = name  # saved configs name the real class
    return ImageOnly


def load_processor(folder: Path):
    """The checkpoint's processor (tokenizer + image processor + chat template)."""
    import inspect

    import transformers

    folder = Path(folder)
    try:
        return transformers.AutoProcessor.from_pretrained(str(folder))
    except (AttributeError, ImportError, OSError, ValueError, TypeError) as error:
        base = getattr(transformers, _processor_class(folder), None)
        if base is None or "video_processor" not in inspect.signature(base.__init__).parameters:
            raise
        try:
            return image_only_processor(base.__name__).from_pretrained(str(folder))
        except Exception:  # noqa: BLE001 - the first error is the one that explains
            raise error from None


def _processor_class(folder: Path) -> str:
    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = folder / name
        if path.exists():
            found = json.loads(path.read_text()).get("processor_class")
            if found:
                return found
    return ""


def as_image(image: Any):
    """A PIL image from PNG/JPEG bytes (as the env sends screenshots and the datasets store them) or a PIL image."""
    from PIL import Image

    if isinstance(image, (bytes, bytearray)):
        return Image.open(io.BytesIO(image)).convert("RGB")
    if isinstance(image, dict) and image.get("bytes"):  # a datasets.Image cell
        return as_image(image["bytes"])
    return image.convert("RGB")


def chat_images(chat: Sequence[dict]) -> list:
    """The images of a chat, in the order its messages hold them."""
    return [as_image(part["image"]) for message in chat if not isinstance(message["content"], str)
            for part in message["content"] if part.get("type") == "image"]


def with_screens(messages: Sequence[dict], screens: Sequence[Any]) -> list[dict]:
    """The text chat `messages` with one screenshot leading each of its last len(screens) user messages,
    oldest first: the current step's screenshot in the last one, earlier steps' in the turns before.
    Rollout builds its prompts so; the trainer rebuilds them so from a row's messages and screenshots."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if len(screens) > len(users):
        raise ValueError(f"{len(screens)} screenshots for a chat of {len(users)} user messages")
    chat = [dict(m) for m in messages]
    for i, screen in zip(users[len(users) - len(screens):], screens):
        chat[i]["content"] = [{"type": "image", "image": screen}, {"type": "text", "text": messages[i]["content"]}]
    return chat


def model_inputs(processor, chats: Sequence[Sequence[dict]], *, padding_side: str = "left") -> dict:
    """The model's inputs for a batch of chats (their images included), as the processor builds them:
    input_ids with each image's tokens, attention_mask, pixel_values and whatever else the model takes."""
    texts = [chat_text(processor, chat) for chat in chats]
    images = [chat_images(chat) for chat in chats]
    kwargs = {"images": images} if any(images) else {}
    return processor(text=texts, padding=True, padding_side=padding_side, return_tensors="pt", **kwargs)


def chat_text(processor, chat: Sequence[dict]) -> str:
    """The prompt text of a chat as the checkpoint's chat template renders it, one placeholder per image."""
    return processor.apply_chat_template([_without_payload(m) for m in chat], add_generation_prompt=True,
                                         tokenize=False)


def _without_payload(message: dict) -> dict:
    if isinstance(message["content"], str):
        return message
    return {**message, "content": [{"type": "image"} if p.get("type") == "image" else p for p in message["content"]]}


class ScreenPrompt(list):
    """A prompt's token ids, its image tokens included, with the image inputs the model reads beside them
    (pixel_values and what the model family adds: image_grid_thw, mm_token_type_ids, …). The trainer's
    log-probs take these where a text prompt is a plain list of ids (`logprobs.response_logprobs`)."""

    def __init__(self, ids: Sequence[int], inputs: dict):
        super().__init__(ids)
        self.inputs = inputs


def screen_prompt(processor, chat: Sequence[dict], prompt_ids: Sequence[int] | None = None) -> ScreenPrompt:
    """`chat`'s model inputs, checked to be `prompt_ids` (when given): the tokens the engine read.

    Raises where they differ (an image resized otherwise, a template changed): a row is never trained on
    other tokens than it was sampled from."""
    inputs = model_inputs(processor, [chat])
    ids = inputs.pop("input_ids")[0].tolist()
    inputs.pop("attention_mask", None)
    if prompt_ids is not None and ids != list(prompt_ids):
        raise ValueError(f"the prompt rebuilt from the row's chat and screenshots ({len(ids)} tokens) is not the "
                         f"one the engine read ({len(prompt_ids)} tokens): was the checkpoint's processor changed?")
    return ScreenPrompt(ids, dict(inputs))


def screen_prompts(processor, rows: Sequence[dict], every_row: Sequence[dict]) -> list[ScreenPrompt]:
    """Each step row's prompt as the engine read it: its messages with the screenshots of its trajectory's
    last `screens` steps (found among `every_row`, the rows of `data.datasets_io.step_rows(..., screens=True)`)."""
    shots = {(r.get("dataset"), r["group_id"], r["sample"], r["step"]): r.get("screenshot") for r in every_row
             if r.get("screens")}
    prompts = []
    for r in rows:
        steps = range(r["step"] - (r.get("screens") or 0) + 1, r["step"] + 1)
        found = [shots.get((r.get("dataset"), r["group_id"], r["sample"], s)) for s in steps]
        if not steps or not all(found):
            raise ValueError(f"step {r['step']} of {r['group_id']}/{r['sample']}: a vision model's row without the "
                             "screenshots its prompt held (a rollout of a text model, or screenshots removed?)")
        prompts.append(screen_prompt(processor, with_screens(r["messages"], found), r["prompt_ids"]))
    return prompts


def screen_logprobs(model, prompt: ScreenPrompt, response: Sequence[int], temperature: float = 1.0):
    """(log softmax(logits / T) of each answer token, the distributions' entropies) for one row; logits
    only where an answer token is predicted."""
    import torch

    n = len(response)
    sequence = torch.tensor([list(prompt) + list(response)], device=model.device)
    extra = {}
    for key, value in prompt.inputs.items():
        value = value.to(model.device)
        if value.is_floating_point():
            value = value.to(model.dtype)
        elif value.shape[:2] == (1, len(prompt)):  # per-token inputs (Qwen's mm_token_type_ids): the answer is text
            value = torch.cat([value, value.new_zeros((1, n, *value.shape[2:]))], dim=1)
        extra[key] = value
    logits = model(input_ids=sequence, attention_mask=torch.ones_like(sequence), logits_to_keep=n + 1,
                   **extra).logits[0, :-1]  # the positions that predict the answer's tokens
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    token_logp = logp.gather(-1, torch.tensor(list(response), device=logp.device)[:, None])[:, 0]
    return token_logp, -(logp.exp() * logp).sum(-1).detach()
