"""Options shared by several stages, defined once (each stage adds its own beside them)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output folder of this stage (a run folder's subfolder).")]
EnvsDir = Annotated[Path, typer.Option("--envs", help="Run folder (or manifest dataset) written by `spawn-envs`.")]
Seed = Annotated[int, typer.Option(help="Random seed; the same seed gives the same run.")]
Backend = Annotated[str, typer.Option(help="Where env servers run: local (subprocesses here) or docker.")]
Tasks = Annotated[Path, typer.Option(help="Task dataset written by `tasks build` (e.g. runs/tasks/train), or a "
                                        "folder of OSWorld-format JSON task files.")]
Model = Annotated[str, typer.Option(help="Policy checkpoint: a local transformers folder, a LoRA adapter folder, or "
                                         "'embedded' (SmolLM2-135M-Instruct, shipped with the package).")]

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
