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
    from computerrl.cli.options import refuse
    from computerrl.data.datasets_io import load
    from computerrl.data.folders import EVAL, STEPS, WrongInput, expect
    from computerrl.data.viewer import write_page

    try:
        steps = folder / "steps" if expect(folder, "FOLDER", STEPS, EVAL) == EVAL else folder
    except WrongInput as e:
        refuse(e)
    ds = load(steps)
    page = write_page(ds, out or folder / "view.html", title=str(folder))
    typer.echo(f"wrote {page} ({len(ds)} steps); open it in a browser")
