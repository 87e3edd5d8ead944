"""A checkpoint folder as a GGUF file, for the `llamacpp` engine: every policy version the trainer
writes is exported on first use, so llama.cpp samples from the weights the trainer holds.

Llama-architecture models (SmolLM2, Llama, and what shares their layout). Weights are written at
the `--gguf-type` asked for: F32 keeps the trainer's weights bit for bit; F16 and Q8_0 are faster
on a CPU and round them (small updates partly vanish in the rounding: the trainer recomputes πold
with its own weights and weighs the difference, as for vLLM). Norms stay F32. The tokenizer is
written from the checkpoint's own tokenizer.json; the engine passes token ids and never asks
llama.cpp to tokenize, so only the vocabulary's size and its end-of-turn token matter there.

Exports are cached by the weights' identity (path, size, mtime) under `$COMPUTERRL_HOME/gguf`.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

from computerrl.policy.checkpoint import ADAPTER_CONFIG, base_of, home, load_model, load_tokenizer

TYPES = ("f32", "f16", "q8_0")


def gguf_path(folder: Path, kind: str) -> Path:
    """Where the export of `folder` at `kind` lives (it changes when the weights do)."""
    folder = Path(folder).resolve()
    files = sorted(p for p in [*folder.glob("*.safetensors"), *base_of(folder).glob("*.safetensors")])
    ident = [str(folder)] + [f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files]
    digest = hashlib.sha256("\n".join(ident).encode()).hexdigest()[:16]
    return home() / "gguf" / f"{folder.name}-{digest}.{kind}.gguf"


def export(folder: Path, kind: str = "f16") -> Path:
    """The GGUF file of a checkpoint folder (a LoRA adapter is merged into its base), written once."""
    if kind not in TYPES:
        raise ValueError(f"GGUF type {kind!r}: expected one of {', '.join(TYPES)}")
    out = gguf_path(folder, kind)
    if out.exists():
        return out
    config = json.loads((base_of(Path(folder)) / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise ValueError(f"{folder}: the llamacpp engine exports Llama-architecture models, not "
                         f"{config.get('model_type')!r}; use --engine transformers")
    model = load_model(folder)
    if (Path(folder) / ADAPTER_CONFIG).exists():
        model = model.merge_and_unload()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}")
    try:
        _write(tmp, config, model.state_dict(), load_tokenizer(folder), kind)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _write(path: Path, config: dict, state: dict, tokenizer, kind: str) -> None:
    import gguf
    import numpy as np

    n_layers, n_head, n_kv = config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // n_head
    rope = config.get("rope_parameters") or {"rope_theta": config.get("rope_theta", 10000.0),
                                             "rope_type": (config.get("rope_scaling") or {}).get("rope_type", "default")}
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE scaling {rope['rope_type']!r} is not exported; use --engine transformers")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(config.get("_model_name_or_path") or path.stem)
    w.add_block_count(n_layers)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(rope["rope_theta"]))
    w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    w.add_vocab_size(config["vocab_size"])
    w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[kind])
    _add_vocab(w, tokenizer, config)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, n_layers)
    for hf_name, tensor in state.items():
        if hf_name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue  # llama.cpp reads the embedding for a missing output matrix
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"tensor {hf_name!r} has no GGUF name for the llama architecture")
        data = tensor.detach().float().cpu().numpy()
        if hf_name.endswith("q_proj.weight"):
            data = _rope_permute(data, n_head)
        elif hf_name.endswith("k_proj.weight"):
            data = _rope_permute(data, n_kv)
        if data.ndim == 1 or kind == "f32":
            w.add_tensor(name, data.astype(np.float32))
        elif kind == "f16":
            w.add_tensor(name, data.astype(np.float16))
        else:
            q = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(data, q), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _rope_permute(weight, n_heads: int):
    """HF's rotary layout (halves) to llama.cpp's (interleaved pairs), per head."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, 2, rows // n_heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _add_vocab(w, tokenizer, config: dict) -> None:
    import gguf

    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec["model"]
    if model["type"] != "BPE":
        raise ValueError(f"tokenizer {model['type']!r}: the llamacpp engine exports BPE tokenizers")
    size = config["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for text, i in model["vocab"].items():
        if i < size:
            tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for added in spec.get("added_tokens", []):
        if added["id"] < size:
            tokens[added["id"]] = added["content"]
            types[added["id"]] = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("pad_token_id", w.add_pad_token_id)):
        value = config.get(key)
        if isinstance(value, int):
            add(value)
    w.add_add_bos_token(False)  # the chat template writes every special token itself
