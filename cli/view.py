"""`computerrl view`: a step dataset (or an eval folder) → one static HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

HELP = ("Write one static HTML page for a step dataset (rollout output, an eval folder, expert replays): per "
        "trajectory, per step the screenshot, thought, action, result and reward, with filters by task, domain and "
        "outcome. Open it in a browser; no server needed.")


def command(
    folder: Annotated[Path, typer.Argument(help="A step dataset, or an eval output folder (its steps/ are shown).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The page to write (default: FOLDER/view.html; "
                                            "thumbnails go to a _files folder beside it).")] = None,
):
    from computerrl.data.datasets_io import load
    from computerrl.data.viewer import write_page

    steps = folder / "steps" if (folder / "steps" / "dataset_info.json").exists() else folder
    try:
        ds = load(steps)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e), param_hint="FOLDER") from None
    missing = [c for c in ("task_id", "group_id", "sample", "step", "response", "action", "exec_result", "reward")
               if c not in ds.column_names]
    if missing:
        raise typer.BadParameter(f"{steps} is not a step dataset: it lacks {', '.join(missing)}", param_hint="FOLDER")
    page = write_page(ds, out or folder / "view.html", title=str(folder))
    typer.echo(f"wrote {page} ({len(ds)} steps); open it in a browser")
