"""The `openai` engine: any OpenAI-compatible chat server (vLLM, SGLang, llama.cpp), on loopback or
across a cluster (`--llm-url` may list several; chats are spread over them).

Requests ask for plain temperature sampling (top_p 1, top_k and min_p off, no repetition penalty)
and for the log-probability of each sampled token. What a server can and cannot say:
- **Token ids.** vLLM returns them with `return_tokens_as_token_ids` ("token_id:123"); llama.cpp
  and others return token strings only. Then `prompt_ids` and `response_ids` stay empty and the
  row's `engine` reads "openai:no-token-ids": the trainer tokenizes such rows itself and knows
  there is nothing to compare token by token, instead of being handed a guess.
- **Log-probabilities.** Servers report them from the raw logits (temperature 1), so they are the
  sampling distribution's only when sampling at temperature 1; at any other temperature they are
  left out ([]), never rescaled by guesswork.
- **Screenshots.** A vision model's chats hold images (`policy.vision`); each is sent as an `image_url`
  part holding a PNG data URL, pixel for pixel what the trainer reads.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from computerrl.policy.checkpoint import load_tokenizer
from computerrl.policy.engines import ENGINES, Generation, Sampling


class ServerError(RuntimeError):
    """The server refused or failed a request; the message says which server and why."""


@ENGINES.register("openai")
class OpenAIEngine:
    name = "openai"

    def __init__(self, checkpoint: Path, sampling: Sampling, *, llm_url: str = "", api_key: str = "",
                 served_model: str = "", timeout_s: float = 300.0):
        """`checkpoint`: the model's local folder (its tokenizer counts prompt budgets); `llm_url`:
        comma-separated base URLs such as http://127.0.0.1:8000/v1; `served_model`: the name the
        server knows the model by ("" = the first one it lists)."""
        self.sampling, self.timeout_s, self.api_key = sampling, timeout_s, api_key
        self.urls = [u.strip().rstrip("/") for u in llm_url.split(",") if u.strip()]
        if not self.urls:
            raise ValueError("the openai engine needs --llm-url (e.g. http://127.0.0.1:8000/v1)")
        self.tokenizer = load_tokenizer(checkpoint)
        self.model = served_model or self._first_model()
        self._next = itertools.cycle(range(len(self.urls)))
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def _post(self, url: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(url + path, data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json",
                                                  **({"Authorization": f"Bearer {self.api_key}"} if self.api_key
                                                     else {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            raise ServerError(f"{url}{path}: HTTP {e.code}: {e.read()[:500].decode(errors='replace')}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise ServerError(f"{url}{path}: {e}") from None

    def _first_model(self) -> str:
        models = self._post(self.urls[0], "/models").get("data", [])
        if not models:
            raise ServerError(f"{self.urls[0]}/models lists no model")
        return models[0]["id"]

    def generate(self, chats: list[list[dict[str, str]]], *, seed: int) -> list[Generation]:
        with self._lock:
            urls = [self.urls[next(self._next)] for _ in chats]
        with ThreadPoolExecutor(max_workers=len(chats)) as pool:  # servers batch concurrent requests themselves
            return list(pool.map(lambda a: self._one(*a), zip(urls, chats, range(seed, seed + len(chats)))))

    def _one(self, url: str, chat: list[dict[str, str]], seed: int) -> Generation:
        s = self.sampling
        body = {"model": self.model, "messages": [as_openai(m) for m in chat], "max_tokens": s.max_new_tokens,
                "temperature": s.temperature, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "seed": seed,
                "logprobs": True, "top_logprobs": 1, "return_tokens_as_token_ids": True, "return_token_ids": True}
        reply = self._post(url, "/chat/completions", body)
        choice = reply["choices"][0]
        tokens = ((choice.get("logprobs") or {}).get("content")) or []
        ids = [int(t["token"][len("token_id:"):]) for t in tokens if str(t.get("token", "")).startswith("token_id:")]
        known = bool(tokens) and len(ids) == len(tokens)
        text = choice["message"].get("content") or ""
        return Generation(
            text=self.tokenizer.decode(ids, skip_special_tokens=True) if known and not text else text,
            prompt_ids=(reply.get("prompt_token_ids") or []) if known else [], response_ids=ids if known else [],
            logprobs=[float(t["logprob"]) for t in tokens] if tokens and s.temperature == 1.0 else [],
            finish="length" if choice.get("finish_reason") == "length" else "stop",
            engine="openai" if known else "openai:no-token-ids")

    def load_weights(self, checkpoint) -> None:
        raise NotImplementedError("--engine openai: the servers' weights belong to whoever started them (restart "
                                  "them on the new checkpoint); the asynchronous loop needs a live engine: "
                                  "transformers, vllm or llamacpp")

    def close(self) -> None:
        """Nothing to free: the servers belong to whoever started them."""


def as_openai(message: dict) -> dict:
    """A chat message in the OpenAI API's form: its images (PNG bytes or PIL images) as data URLs."""
    if isinstance(message["content"], str):
        return message
    return {**message, "content": [{"type": "image_url", "image_url": {"url": png_data_url(p["image"])}}
                                   if p.get("type") == "image" else p for p in message["content"]]}


def png_data_url(image) -> str:
    if not (isinstance(image, (bytes, bytearray)) and image.startswith(b"\x89PNG")):
        from computerrl.policy.vision import as_image

        buffer = io.BytesIO()
        as_image(image).save(buffer, format="PNG")
        image = buffer.getvalue()
    return "data:image/png;base64," + base64.b64encode(image).decode()
