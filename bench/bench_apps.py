"""What each app costs a desktop: memory (PSS of the desktop with the app open), the time from a
task's launch step to the app's settled window, and the reset after it (median of N rounds).

    just bench-apps --rounds 5

Ends with one JSON line: {"<app>": {"pss_mb", "start_s_p50", "reset_s_p50"}, ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from computerrl.bench.bench_envs import pss_mb
from computerrl.envs.service.client import DesktopEnv, EnvClient
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.server import EnvServer

APPS = {  # app -> the setup steps that open it, as OSWorld's tasks do
    "calc": [{"type": "launch", "parameters": {"command": ["libreoffice", "--calc"]}}],
    "chrome": [{"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}}],
    "vlc": [{"type": "launch", "parameters": {"command": "vlc"}}],
    "gimp": [{"type": "launch", "parameters": {"command": ["gimp"]}}],
    "thunderbird": [{"type": "launch", "parameters": {"command": ["/usr/bin/thunderbird"]}}],
    "nautilus": [{"type": "launch", "parameters": {"command": ["nautilus", "/home/user"]}}],
    "code": [{"type": "launch", "parameters": {"command": ["code"]}}],  # VS Code: code-server in Chromium
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--apps", default=",".join(APPS), help="the apps measured, comma-separated")
    args = p.parse_args(argv)
    apps = {app: APPS[app] for app in args.apps.split(",")}
    server = EnvServer(desktops=1, workdir=Path(tempfile.mkdtemp(prefix="bench-apps-")), settle_s=0.03).start()
    client = EnvClient(f"127.0.0.1:{server.port}", timeout_s=120)
    results = {}
    try:
        assert wait_healthy(client, 180) == "", "the desktop did not start"
        env = DesktopEnv(client, 0, max_steps=5)
        env.reset()
        results["empty"] = {"pss_mb": round(pss_mb(os.getpid()), 1)}  # the server runs in this process
        for app, steps in apps.items():
            task = {"id": f"open-{app}", "instruction": f"Open {app}.", "config": steps,
                    "evaluator": {"func": "infeasible"}}
            starts, resets, pss = [], [], []
            for _ in range(args.rounds):
                t = time.perf_counter()
                env.reset(options={"task": task})
                starts.append(time.perf_counter() - t)
                time.sleep(2.0)  # the app past its start: pages loaded, caches warm
                pss.append(pss_mb(os.getpid()))
                t = time.perf_counter()
                env.reset()
                resets.append(time.perf_counter() - t)
            results[app] = {"pss_mb": round(statistics.median(pss), 1),
                            "start_s_p50": round(statistics.median(starts), 2),
                            "reset_s_p50": round(statistics.median(resets), 2)}
            print(f"{app:8s} PSS {results[app]['pss_mb']:7.1f} MB  start p50 {results[app]['start_s_p50']:.2f} s  "
                  f"reset p50 {results[app]['reset_s_p50']:.2f} s")
    finally:
        client.close()
        server.stop()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
