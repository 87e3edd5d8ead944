"""A stage's config field carries its own help: the one place for an option's default and its text.

    out: Path = setting(Path("runs/rollout"), OUT, "--out", "-o")
    samples: int = setting(1, "Trajectories per task (pass@K is reported when K > 1).")

`setting` is a `dataclasses.field` whose metadata holds the help and, where the option is not
plainly `--name`, its flags (`"--out", "-o"`; `"--replay/--no-replay"`) and other command-line
settings (`argument=True` for a positional argument, `metavar=...`). `cli/options.py` turns a
config's fields into its command's options; this module knows no CLI library. A subclass that only
changes a default (`samples: int = 4`) keeps its parent's help and flags (`described`).

Help several stages share is defined once below.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

OUT = "Output folder of this stage (a run folder's subfolder)."
SEED = "Random seed; the same seed gives the same run."
TASKS = ("Task dataset written by `tasks build` (e.g. runs/tasks/train), or a folder of OSWorld-format JSON task "
         "files.")
ENVS = "Run folder (or manifest dataset) written by `spawn-envs`."
MODEL = ("Policy checkpoint: a local transformers folder, a LoRA adapter folder, or 'embedded' (SmolLM2-135M-Instruct, "
         "shipped with the package).")
ENGINE = ("Generation engine: transformers (a local --model, CPU/GPU; bfloat16 on CPUs that compute it natively), "
          "llamacpp (llama.cpp on a CPU, the model exported to GGUF), vllm (GPU), openai (an OpenAI-compatible "
          "server: --llm-url).")
LLM_URL = ("For --engine openai: the server's base URL (comma-separate several to spread requests), e.g. "
           "http://127.0.0.1:8000/v1; the API key, if any, from $OPENAI_API_KEY.")
DEVICE = "Torch device for the transformers engine (cpu, cuda)."
MAX_NEW_TOKENS = "Answer length cap, in tokens."
DEFAULT_MAX_STEPS = 15  # steps an episode may take before it is cut: every player's default; DesktopEnv enforces it


def setting(default: Any, help: str, *flags: str, **cli: Any) -> Any:
    """A dataclass field with its command-line help (and flags, where not `--name`). A list, dict or
    set default becomes a `default_factory` that copies it, so no two configs share one."""
    metadata = {"help": help, "flags": flags, "cli": cli}
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def described(config: type, name: str) -> dict[str, Any]:
    """The help, flags and settings of field `name` of `config`, from the nearest class in its MRO
    that gave them (a subclass that only changes a default keeps its parent's)."""
    for cls in config.__mro__:
        field = getattr(cls, "__dataclass_fields__", {}).get(name)
        if field is not None and "help" in field.metadata:
            return dict(field.metadata)
    raise TypeError(f"{config.__name__}.{name} has no help: declare it with data.config.setting")


def default_of(field: dataclasses.Field) -> Any:
    """A field's default value (its factory's product), or dataclasses.MISSING."""
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def coerce(key: str, value: Any, like: Any, where: str = "") -> Any:
    """`value` (a command line's string, or as YAML read it: 1e-5 without a dot is a string there) as the type
    of `like`, setting `key`'s default; ValueError, prefixed by `where`, when it is none."""
    kind = type(like)
    try:
        if kind is bool and isinstance(value, str):
            value = value.lower() in ("1", "true", "yes")
        elif kind in (int, float) and isinstance(value, (str, int)) and not isinstance(value, bool):
            value = kind(value)
    except ValueError:
        pass
    if not isinstance(value, kind) or kind is int and isinstance(value, bool):
        raise ValueError(f"{where}{key} takes a {kind.__name__}, not {value!r}")
    return value


def stage_settings(given: dict | list[str], config: type, kept: tuple[str, ...], where: str, what: str) -> dict:
    """Settings of a stage by its own names (`{"lr": 1e-5}` from a settings file, or `["lr=1e-5"]` from a command
    line), each read as `config`'s field type; `kept`: its fields the caller sets itself. ValueError, prefixed by
    `where`, names a wrong one (`what`: the stage, as the message calls it)."""
    fields = {f.name: default_of(f) for f in dataclasses.fields(config) if f.name not in kept}
    if isinstance(given, list):
        pairs = [item.partition("=") for item in given]
        if bad := next((f"{k}{eq}{v}" for k, eq, v in pairs if not eq), None):
            raise ValueError(f"{where}{bad!r}: expected KEY=VALUE")
        given = {k: v for k, _, v in pairs}
    if not isinstance(given, dict):
        raise ValueError(f"{where}expected a mapping of {what} settings, not {given!r}")
    if unknown := sorted(set(given) - set(fields)):
        raise ValueError(f"{where}unknown {what} setting {unknown[0]!r}; known: {', '.join(sorted(fields))}")
    return {key: coerce(key, value, fields[key], where) for key, value in given.items()}


def cli_args(options: dict) -> list[str]:
    """A stage's options as its command line (lists repeat their option, booleans are flags)."""
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, list):
            for v in value:
                args += [flag, str(v)]
        elif value is not None and value != "":  # "" is every stage's default where it is one
            args += [flag, str(value)]
    return args


def require_datasets(paths: list[Path], flag: str, *kinds: str) -> None:
    """A stage's config refuses input datasets that are not there, or not of these kinds (data.folders),
    naming the option, the path and what it is."""
    from computerrl.data.folders import expect

    for path in paths:
        if not Path(path).exists():
            raise ValueError(f"{flag} {path}: no such dataset")
        if kinds:
            expect(path, flag, *kinds)
