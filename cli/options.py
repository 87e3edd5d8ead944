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
