"""Reset A/B: this tree's desktop against another commit's, side by side, resets alternating between them so
both meet the same noise (what an A/B of separate bench_envs runs, minutes apart, on a busy 2-core machine cannot).

    git worktree add --detach /tmp/before 2f498e5
    python -m computerrl.bench.reset_ab --before /tmp/before --pairs 30

Each side is an env server with one desktop, its code imported from its own tree (the other tree through a
folder holding a `computerrl` link to it on PYTHONPATH). Each reset is one round of that side's own
bench_envs.latency: Reset and opening Calc timed, then its steps, which dirty the desktop for the next. Prints
the medians, then one JSON line: before_p50_s, after_p50_s, change, and paired_ratio_p50 (the median of
after/before over the pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DRIVER = """
import sys
from computerrl.bench.bench_envs import latency
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.client import EnvClient
from computerrl.envs.service.server import EnvServer
srv = EnvServer(desktops=1).start()
client = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=120)
assert wait_healthy(client, 120) == ""
latency(client, 1)  # a first reset, untimed
print("ready", flush=True)
for line in sys.stdin:
    resets, _ = latency(client, 1)
    print(f"{resets[0]:.4f}", flush=True)
srv.stop()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the commit to compare with")
    ap.add_argument("--pairs", type=int, default=30, help="resets a side")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="reset-ab-") as tmp:
        (Path(tmp) / "computerrl").symlink_to(args.before.resolve())
        sides = {}
        for side, path in (("before", tmp), ("after", "")):
            sides[side] = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path},
                                           cwd=tmp)
            if sides[side].stdout.readline().strip() != "ready":
                raise SystemExit(f"the {side} side's desktop did not start")
        times: dict[str, list[float]] = {"before": [], "after": []}
        for i in range(args.pairs):
            for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
                sides[side].stdin.write("\n")
                sides[side].stdin.flush()
                times[side].append(float(sides[side].stdout.readline()))
        for proc in sides.values():
            proc.stdin.close()
            proc.wait(timeout=60)
    before, after = statistics.median(times["before"]), statistics.median(times["after"])
    ratio = statistics.median(a / b for b, a in zip(times["before"], times["after"]))
    print(f"reset p50: before {before:.3f} s, after {after:.3f} s ({after / before - 1:+.1%}); "
          f"median of the {args.pairs} paired ratios {ratio:.3f}")
    print(json.dumps({"pairs": args.pairs, "before_p50_s": round(before, 4), "after_p50_s": round(after, 4),
                      "change": round(after / before - 1, 4), "paired_ratio_p50": round(ratio, 4)}))


if __name__ == "__main__":
    main()
