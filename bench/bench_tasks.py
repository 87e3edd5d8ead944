"""Task-suite benchmarks: build time, replay steps/s, per-domain counts.

    python -m computerrl.bench.bench_tasks --replay 26 --envs 1      # small: one replay per template
    python -m computerrl.bench.bench_tasks                             # full: default suite, 2 desktops

Generation: `tasks build`'s default 2,000 train + 300 test instances (files made in memory and
written to a cache folder), no desktop. Replay: the first --replay instances of the suite
(round-robin, so every template is covered once --replay >= templates) replayed on --envs local
desktops (a `spawn-envs` run reading the suite's files), as `tasks build --replay` does. Prints the figures, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console

from computerrl.stages.spawn_envs import SpawnEnvsConfig, run as spawn
from computerrl.stages.tasks_build import BuildConfig, replay_solutions_and_starts, why_dropped
from computerrl.tasks.suites import all_templates
from computerrl.tasks.suites.build import generate, write_files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--test", type=int, default=300)
    ap.add_argument("--replay", type=int, default=60, help="instances replayed on desktops (0 = none)")
    ap.add_argument("--envs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        train, test = generate(args.train, args.test, args.seed)
        gen_s = time.perf_counter() - t0
        write_files(train + test, out / "files")
        build_s = time.perf_counter() - t0
        console.print(f"generated {len(train) + len(test)} instances in {gen_s:.1f} s (+ files: {build_s:.1f} s)")
        result = {"templates": len(all_templates()), "instances": len(train) + len(test),
                  "generate_s": round(gen_s, 2), "build_s": round(build_s, 2),
                  "per_domain": dict(Counter(i.domain for i in train + test))}
        if args.replay:
            sample = train[:args.replay]
            envs = out / "envs"
            t1 = time.perf_counter()
            if spawn(SpawnEnvsConfig(out=envs, count=args.envs, cache=out / "files", detach=True)):
                raise SystemExit(f"the desktops did not start; see {envs}")
            try:
                start_s = time.perf_counter() - t1
                cfg = BuildConfig(out=out, train=len(sample), test=0, envs=envs, replay=True)
                t1 = time.perf_counter()
                replays, untouched = replay_solutions_and_starts(cfg, out, sample, console)
                wall = time.perf_counter() - t1
            finally:
                spawn(SpawnEnvsConfig(out=envs, stop=True))
            steps = sum(len(r.rows) for r in replays + untouched)
            kept = sum(not why_dropped(r, u) for r, u in zip(replays, untouched))
            result.update(replayed=len(sample), kept=kept, replay_wall_s=round(wall, 1),
                          start_s=round(start_s, 1), replay_steps_per_s=round(steps / wall, 2) if wall else 0.0,
                          envs=args.envs)
            console.print(f"replayed {len(sample)} on {args.envs} desktops in {wall:.0f} s (after {start_s:.0f} s "
                          f"to start them): {result['kept']} kept, {result['replay_steps_per_s']} steps/s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
