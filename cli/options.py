"""Options shared by several stages, defined once (each stage adds its own beside them)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Callable

import typer

OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output folder of this stage (a run folder's subfolder).")]
EnvsDir = Annotated[Path, typer.Option("--envs", help="Run folder (or manifest dataset) written by `spawn-envs`.")]
Seed = Annotated[int, typer.Option(help="Random seed; the same seed gives the same run.")]
Backend = Annotated[str, typer.Option(help="Where env servers run: local (subprocesses here) or docker.")]
Tasks = Annotated[Path, typer.Option(help="Task dataset written by `tasks build` (e.g. runs/tasks/train), or a "
                                        "folder of OSWorld-format JSON task files.")]
Model = Annotated[str, typer.Option(help="Policy checkpoint: a local transformers folder, a LoRA adapter folder, or "
                                         "'embedded' (SmolLM2-135M-Instruct, shipped with the package).")]
# --- generation (rollout, eval, build-apis) ----------------------------------------------------
Engine = Annotated[str, typer.Option(help="Generation engine: transformers (a local --model, CPU/GPU; bfloat16 on "
                                          "CPUs that compute it natively), llamacpp (llama.cpp on a CPU, the model "
                                          "exported to GGUF), vllm (GPU), openai (an OpenAI-compatible server: "
                                          "--llm-url).")]
LlmUrl = Annotated[str, typer.Option(help="For --engine openai: the server's base URL (comma-separate several to "
                                          "spread requests), e.g. http://127.0.0.1:8000/v1; the API key, if any, "
                                          "from $OPENAI_API_KEY.")]
Device = Annotated[str, typer.Option(help="Torch device for the transformers engine (cpu, cuda).")]
MaxNewTokens = Annotated[int, typer.Option(help="Answer length cap, in tokens.")]

Apis = Annotated[Path | None, typer.Option(help="A `build-apis` output folder: its accepted APIs join the built-in "
                                               "ones in the prompt and the parser (start the envs with the same "
                                               "--apis).")]

REQUIRED = object()  # in the tables below: a default each stage gives

# --- playing stages (rollout, eval): PlayConfig's fields --------------------------------------
Samples = Annotated[int, typer.Option(help="Trajectories per task: G, the GRPO group, in rollout; K in eval "
                                           "(pass@K is reported when K > 1).")]
MaxSteps = Annotated[int, typer.Option(help="Steps per trajectory before it is cut (truncated).")]
Temperature = Annotated[float, typer.Option(help="Sampling temperature (0 = greedy; more than one sample per task "
                                                 "in eval needs > 0).")]
Budgets = Annotated[str, typer.Option(help="Prompt budgets: tiny, small or paper (default: by the model's size).")]
MaxBatch = Annotated[int, typer.Option(help="Answers generated per model call at most.")]
Limit = Annotated[int, typer.Option(help="Play only the first N tasks (0 = all).")]
Screenshots = Annotated[bool, typer.Option(help="Keep every step's screenshot (for `computerrl view`).")]
Replace = Annotated[bool, typer.Option(help="Replace a finished output instead of stopping.")]

# (name, option, default) of PlayConfig's fields, in its order; a stage may change a default.
PLAYING: list[tuple[str, Any, Any]] = [
    ("tasks", Tasks, REQUIRED), ("envs", EnvsDir, Path("runs/envs")), ("model", Model, "embedded"),
    ("samples", Samples, 1), ("max_steps", MaxSteps, 15), ("out", OutDir, REQUIRED), ("engine", Engine, "transformers"),
    ("temperature", Temperature, 0.0), ("max_new_tokens", MaxNewTokens, 96), ("budgets", Budgets, ""),
    ("max_batch", MaxBatch, 8), ("limit", Limit, 0), ("seed", Seed, 0), ("screenshots", Screenshots, False),
    ("device", Device, "cpu"), ("llm_url", LlmUrl, ""), ("apis", Apis, None), ("overwrite", Replace, False),
]

# --- training stages (grpo, sft): TrainConfig's fields ---------------------------------------
Lr = Annotated[float, typer.Option(help="AdamW learning rate (constant after --warmup).")]
Warmup = Annotated[int, typer.Option(help="Optimizer steps of linear learning-rate warm-up.")]
WeightDecay = Annotated[float, typer.Option(help="AdamW weight decay.")]
MaxGradNorm = Annotated[float, typer.Option(help="Clip the gradient to this norm (0 = no clipping).")]
MicroBatchTokens = Annotated[int, typer.Option(help="Padded tokens per forward pass; rows of alike length are "
                                                    "batched together, gradients accumulate over the step.")]
LoraRank = Annotated[int, typer.Option(help="0 = full fine-tuning; > 0 trains a LoRA adapter of this rank (a LoRA "
                                            "--model keeps training its own adapter).")]
LoraAlpha = Annotated[int, typer.Option(help="LoRA scaling alpha.")]
TrainLayers = Annotated[int, typer.Option(help="0 = every layer; N trains only the top N decoder layers (backward "
                                               "stops there: about 3x cheaper, how the CPU demo fine-tunes).")]
GradientCheckpointing = Annotated[bool, typer.Option(help="Recompute activations in the backward pass: less "
                                                          "memory, about a third slower.")]
TrainDevice = Annotated[str, typer.Option(help="Torch device: cpu, cuda ('' = accelerate's choice).")]
Dtype = Annotated[str, typer.Option(help="Weights' dtype: float32, bfloat16 (GPUs).")]
SaveEvery = Annotated[int, typer.Option(help="Optimizer steps between resumable states (a killed run resumes "
                                             "from the last one; rerun the same command).")]
Overwrite = Annotated[bool, typer.Option(help="Train again even if --out holds a finished checkpoint.")]


# (name, option, default) of TrainConfig's fields, in its order; a stage may change a default.
TRAINING: list[tuple[str, Any, Any]] = [
    ("model", Model, "embedded"), ("out", OutDir, REQUIRED), ("lr", Lr, REQUIRED), ("warmup", Warmup, 0),
    ("weight_decay", WeightDecay, 0.0), ("max_grad_norm", MaxGradNorm, 1.0), ("micro_batch_tokens", MicroBatchTokens, 8192),
    ("lora_rank", LoraRank, 0), ("lora_alpha", LoraAlpha, 32), ("train_layers", TrainLayers, 0),
    ("gradient_checkpointing", GradientCheckpointing, False), ("device", TrainDevice, ""), ("dtype", Dtype, "float32"),
    ("save_every", SaveEvery, 1), ("seed", Seed, 0), ("overwrite", Overwrite, False),
]


def with_training_options(**defaults) -> Callable:
    """Decorator: the command takes the training options (before its own) and gets them in **train.
    `defaults` sets this stage's (out and lr have none in common)."""
    return with_options(TRAINING, **defaults)


def with_play_options(**defaults) -> Callable:
    """Decorator: the command takes the playing options (before its own) and gets them in **play.
    `defaults` sets this stage's (tasks and out have none in common)."""
    return with_options(PLAYING, **defaults)


def with_options(table: list[tuple[str, Any, Any]], **defaults) -> Callable:
    """Decorator: the command takes the options of `table` (before its own) in its **kwargs;
    a default of REQUIRED must be given by the stage."""
    def wrap(command: Callable) -> Callable:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD]
        shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=option,
                                    default=defaults.get(name, default)) for name, option, default in table]
        missing = [p.name for p in shared if p.default is REQUIRED]
        if missing:
            raise TypeError(f"{command.__module__}: give a default for {', '.join(missing)}")
        command.__signature__ = inspect.Signature(shared + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own])
        return command
    return wrap
