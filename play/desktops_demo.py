"""The desktops' smoke demo (`just desktops-demo`): start desktops, play a scripted Calc episode in each.

    python -m computerrl.play.desktops_demo --count 2 --out runs/demo
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from computerrl.envs.fleet.backends.local import LocalBackend
from computerrl.envs.fleet.manifest import write_manifest
from computerrl.envs.fleet.pool import EnvPool
from computerrl.envs.fleet.supervisor import Supervisor
from computerrl.envs.service.client import EnvError
from computerrl.play.episode import play as play_episode
from computerrl.play.scripted import ScriptedPolicy, calc_episode


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=2, help="desktops to start")
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="run folder (manifest, desktop logs)")
    args = p.parse_args(argv)
    console = Console()
    sup = Supervisor(LocalBackend(args.out / "state"), args.count)
    pool = None
    # Servers run in their own sessions, so Ctrl-C does not reach them: even one during
    # start-up must go through the `finally` that stops them.
    try:
        with console.status(f"starting {args.count} desktops (Xvfb + D-Bus + AT-SPI + openbox + LibreOffice)…"):
            sup.start_all()
        write_manifest(args.out, list(sup.handles.values()), sup.status)
        console.print(f"{sum(s == 'healthy' for s in sup.status.values())}/{args.count} desktops healthy; "
                      f"manifest at {args.out / 'manifest'}")
        healthy = [h for env_id, h in sup.handles.items() if sup.status[env_id] == "healthy"]
        if not healthy:
            console.print(f"[red]no desktop became healthy[/] ({'; '.join(sorted(set(sup.status.values())))}); "
                          f"logs in {args.out / 'state'}")
            raise SystemExit(1)
        pool = EnvPool(healthy, sup.backend)

        def play(i: int):
            text = f"Hello from desktop {i}"
            try:
                with pool.lease() as env:
                    return env.env_id, text, play_episode(env, ScriptedPolicy(calc_episode(text)), {})
            except EnvError as e:
                return "-", text, str(e)

        with console.status("playing a scripted Calc episode on every desktop…"), ThreadPoolExecutor(args.count) as ex:
            episodes = list(ex.map(play, range(args.count)))
    finally:
        if pool is not None:
            pool.close()
            for h in pool.handles.values():  # servers the pool started to replace dead ones
                if h is not sup.handles.get(h.env_id):
                    sup.backend.stop(h)
        sup.stop_all()
    table = Table(title="scripted episodes")
    for col in ("env", "steps", "valid", "seconds", "typed text in a11y tree", "last result"):
        table.add_column(col)
    for env_id, text, t in episodes:
        if isinstance(t, str) or t.aborted:
            table.add_row(env_id, "-", "-", "-", "[red]no[/]", f"[red]{t if isinstance(t, str) else t.error}[/]")
            continue
        trees = [json.loads(r["observation"])["a11y_tree"] for r in t.rows]  # what each step was shown
        table.add_row(env_id, str(len(t.rows)), str(sum(r["action_valid"] for r in t.rows)), f"{t.seconds:.1f}",
                      "[green]yes[/]" if any(text in tree for tree in trees) else "[red]no[/]",
                      t.rows[-1]["exec_result"] if t.rows else "")
    console.print(table)
    played = [t for _, _, t in episodes if not isinstance(t, str) and not t.aborted]
    if played and len(played[0].rows) > 2:
        lines = json.loads(played[0].rows[2]["observation"])["a11y_tree"].splitlines()  # right after the typing
        cells = [line for line in lines[1:] if line.startswith("table-cell")]
        console.print(f"[bold]accessibility tree after typing:[/] {len(lines) - 1} nodes; its cells:")
        console.print("\n".join(lines[:1] + cells[:10]), markup=False)
    if len(played) < len(episodes):
        raise SystemExit(1)

if __name__ == "__main__":
    main()
