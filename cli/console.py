"""`computerrl console`: the web console of a `spawn-envs` fleet (envs/fleet/console.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

HELP = ("Serve a web page of a spawn-envs fleet: every server and desktop (status, uptime, restarts, task and "
        "step, reset/step latency, steps/s, last error, a live screenshot), the rollout or eval using it, and "
        "actions (restart a desktop; drain, remove or add servers); /metrics in Prometheus' format. Loopback "
        "by default; actions, and everything on a wider --host, need the fleet's token (ENVS/console.token, "
        "or $COMPUTERRL_CONSOLE_TOKEN).")


def command(
    envs: Annotated[Path, typer.Option(help="The spawn-envs run folder (it holds the manifest).")] = Path("runs/envs"),
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    host: Annotated[str, typer.Option(help="Interface to bind; anything but loopback needs the token for every "
                                           "request.")] = "127.0.0.1",
    ssl_certfile: Annotated[str, typer.Option(help="Serve HTTPS with this certificate (PEM), so the token does "
                                                   "not cross the network in clear.")] = "",
    ssl_keyfile: Annotated[str, typer.Option(help="The certificate's private key (PEM).")] = "",
):
    from computerrl.envs.fleet.backends.base import is_loopback
    from computerrl.envs.fleet.console import TOKEN_FILE, server
    from computerrl.envs.fleet.manifest import manifest_path

    if not manifest_path(envs).exists():
        raise typer.BadParameter(f"{envs} has no env manifest: start a fleet with `computerrl spawn-envs --out "
                                 f"{envs}`", param_hint="--envs")
    token = os.environ.get("COMPUTERRL_CONSOLE_TOKEN", "")
    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise typer.BadParameter("give both --ssl-certfile and --ssl-keyfile, or neither")
    if not is_loopback(host) and not ssl_certfile:
        typer.echo(f"warning: {host} is not loopback and there is no certificate: the token crosses the network in "
                   "clear (--ssl-certfile/--ssl-keyfile serve HTTPS)", err=True)
    console = server(envs, host=host, port=port, token=token, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile)
    where = "$COMPUTERRL_CONSOLE_TOKEN" if token else envs / TOKEN_FILE
    scheme = "https" if ssl_certfile else "http"
    typer.echo(f"console of {envs} at {scheme}://{host}:{port}/ (the token to act on it is in {where}); Ctrl-C "
               "stops it")
    console.run()
