"""Asynchronous-loop benchmark: what decoupling rollout from training buys, and what a weight sync costs.

    python -m computerrl.bench.bench_async                     # simulation at 4 and 16 desktops, syncs (~15 min)
    python -m computerrl.bench.bench_async --desktops 0        # the weight syncs only (~2 min)
    python -m computerrl.bench.bench_async --desktops 4 --updates 2
    python -m computerrl.bench.bench_async --compare runs/compare-async   # what `just compare-async` ran

- The shape at GPU scale, simulated: real desktops (generated Calc tasks, env servers over gRPC) under
  `async-rl`'s loop, with STAND-INS for the GPU parts: an engine that answers every batch after a
  fixed latency (`--answer-s`, a cheap valid action) and a trainer that takes a fixed time per update
  (`--update-s`). Synchronous (`--sync`: a version's groups played, then trained while the desktops
  wait) against asynchronous (lag ≤ `--max-lag`), the same number of trained groups per update (one
  wave of the desktops: desktops ÷ G groups) and of updates. Reports steps/s played, the desktops'
  busy share (time in an episode, reset included, over desktops × wall), the trainer's busy share,
  wall time, the groups dropped as too stale, and the lag.
- Weight sync of the embedded model per engine: a live engine switched to another checkpoint of it
  (`Engine.load_weights`), median of `--syncs`: transformers (tensors copied in place), llamacpp
  (exported to GGUF and loaded anew), vllm (in .venv-vllm when it is there: in place on a GPU, started anew on a CPU).
- `--compare RUN` reads what `just compare-async` wrote: the demo's RL phase run from one BC
  synchronously and asynchronously on the real model and desktops, the same trained groups each way;
  wall time, the desktops' and trainer's busy shares, lag and importance weights, and success after
  the phase on the same held-out tasks (paired McNemar p against BC and between the two loops).
Prints the figures, then one flat JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ANSWER = "Agent.hotkey(['down'])"  # the stand-in engine's answer: valid, cheap, never ends an episode


class StandInEngine:
    """STAND-IN for a GPU engine: every batch answered after `latency_s`, whatever its size; a weight sync
    takes `sync_s`. Its rows carry one made-up token each (the stand-in trainer reads none)."""

    name = engine = "stand-in"

    def __init__(self, latency_s: float, sync_s: float = 0.0):
        from computerrl.apis.parser import format_answer
        from computerrl.policy.engines import Sampling

        self.latency_s, self.sync_s, self.sampling = latency_s, sync_s, Sampling(1.0, 8)
        self.text = format_answer(ANSWER)

    def generate(self, chats, *, seed: int):
        from computerrl.policy.engines import Generation

        time.sleep(self.latency_s)
        return [Generation(self.text, [0], [0], [0.0], "stop", engine=self.engine) for _ in chats]

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def load_weights(self, checkpoint) -> None:
        time.sleep(self.sync_s)

    def close(self) -> None:
        pass


def stand_in_trainer(latency_s: float):
    """STAND-IN for a GPU trainer: each update takes `latency_s`, and publishes the checkpoint it was given
    under a new version."""

    def train(version: int, batch: Path, checkpoint: str) -> tuple[str, str]:
        time.sleep(latency_s)
        return checkpoint, f"stand-in-{version}"

    return train


def simulate(root: Path, desktops: int, sync: bool, args) -> dict:
    """One run of the loop with the stand-ins on `desktops` desktops of the spawn-envs run at ROOT/envs."""
    from rich.console import Console

    from computerrl.policy.agent import ModelPolicy
    from computerrl.policy.checkpoint import embedded_checkpoint, policy_version
    from computerrl.policy.prompt import BUDGETS
    from computerrl.stages.async_rl import AsyncRLConfig, run

    cfg = AsyncRLConfig(tasks=root / "tasks", envs=root / "envs", out=root / f"{'sync' if sync else 'async'}-{desktops}",
                        samples=args.samples, groups=max(1, desktops // args.samples), updates=args.updates,
                        max_lag=args.max_lag, sync=sync, max_steps=args.max_steps)
    policy = ModelPolicy(StandInEngine(args.answer_s), BUDGETS["tiny"], version=policy_version(embedded_checkpoint()),
                         max_batch=desktops, background=False)
    return run(cfg, Console(quiet=True), train=stand_in_trainer(args.update_s), policy=policy)


def spawn(root: Path, desktops: int):
    """Generated Calc tasks with their file cache at ROOT, and a detached spawn-envs run of `desktops` at ROOT/envs
    (a run stopped before)."""
    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import TASK_FEATURES
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run
    from computerrl.tasks.suites.build import generate, task_rows, write_files

    train, _ = generate(16, 0, seed=0, templates=["calc_column_stat", "calc_sort_column", "calc_row_total"])
    write_files(train, root / "files")
    save_atomic(datasets.Dataset.from_dict(task_rows(train), features=TASK_FEATURES), root / "tasks")
    if run(SpawnEnvsConfig(out=root / "envs", count=desktops, cache=root / "files", detach=True)) != 0:
        raise SystemExit(f"the desktops did not start; see {root / 'envs'}")


def stop(root: Path) -> None:
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run

    run(SpawnEnvsConfig(out=root / "envs", stop=True))


def other_version(folder: Path, base: Path | None = None) -> Path:
    """A copy of `base` (default: the embedded model) with every weight nudged: a new version to switch to."""
    import torch

    from computerrl.policy.checkpoint import embedded_checkpoint, load_model, load_tokenizer

    base = base or embedded_checkpoint()
    model = load_model(base)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-3)
    model.save_pretrained(folder)
    load_tokenizer(base).save_pretrained(folder)
    return folder


SYNC_SCRIPT = """
import json, sys, time
from computerrl.policy.checkpoint import embedded_checkpoint
from computerrl.policy.engines import Sampling, make_engine
engine = make_engine(sys.argv[1], embedded_checkpoint(), Sampling(1.0, 8))
times = []
for k in range(int(sys.argv[3])):
    t = time.monotonic()
    engine.load_weights(sys.argv[2] if k % 2 == 0 else embedded_checkpoint())
    times.append(time.monotonic() - t)
print(json.dumps(times))
"""


def sync_times(python: str, engine: str, checkpoint: Path, syncs: int) -> list[float] | str:
    """Seconds each switch of a live engine on the embedded model took (alternating it and `checkpoint`),
    in a process of `python`'s; or why it could not run."""
    done = subprocess.run([python, "-c", SYNC_SCRIPT, engine, str(checkpoint), str(syncs)],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(run: Path) -> dict:
    """The figures of `just compare-async`'s folder: each loop's summary and updates, and the evals."""
    from computerrl.data.report import paired, phase_row, pooled

    def read(path: Path) -> dict:
        if not path.exists():
            raise SystemExit(f"{path}: not there; run `just compare-async` to make it")
        return json.loads(path.read_text())

    evals = {name: [phase_row(name, read(run / f"eval-{name}" / "summary.json"), run / f"eval-{name}")]
             for name in ("bc", "sync", "async")}
    results: dict = {}
    for name, ev in evals.items():
        p = pooled(ev)
        print(f"{name:>5}: success {p['rate']:.0%} of {p['n']} held-out tasks (95% CI {p['ci'][0]:.0%}-{p['ci'][1]:.0%})")
        results[f"success_{name}"] = round(p["rate"], 3)
    results["tasks"] = pooled(evals["bc"])["n"]
    for loop in ("sync", "async"):
        s = read(run / loop / "summary.json")
        updates = [json.loads(line) for line in (run / loop / "loop.jsonl").read_text().splitlines()]
        grpo = [u["grpo"] for u in updates]
        groups = sum(u["groups"] for u in updates)
        is_weights, clipped = ([g[key] for g in grpo if not math.isnan(g.get(key, math.nan))]  # NaN: no stale row
                               for key in ("is_weight_mean", "is_clip_fraction"))
        vs_bc = paired(evals["bc"], evals[loop])
        weighed = (f"importance weights {_mean_or_none(is_weights)} mean, {_mean_or_none(clipped):.0%} clipped"
                   if is_weights else "no row an older version sampled")
        print(f"{loop:>5} loop: {s['wall_s'] / 60:.1f} min for {groups} trained groups ({s['versions']} versions), "
              f"{s['steps_per_s']:.3f} steps/s, desktops busy {s['desktop_busy']:.0%} (idle "
              f"{1 - s['desktop_busy']:.0%}), trainer busy {s['trainer_busy']:.0%} (idle {1 - s['trainer_busy']:.0%}), "
              f"lag {s['lag_mean'] or 0:.2f} mean / {s['lag_max']} max, {s['dropped_groups']} groups dropped, "
              f"{weighed}; after - BC {vs_bc['delta']:+.0%} (McNemar p = {vs_bc['p']:.2f})")
        results |= {f"{loop}_{key}": round(v, 3) if isinstance(v, float) else v for key, v in
                    [("wall_s", s["wall_s"]), ("groups", groups), ("steps_per_s", s["steps_per_s"]),
                     ("desktop_busy", s["desktop_busy"]), ("trainer_busy", s["trainer_busy"]),
                     ("lag_mean", s["lag_mean"] or 0.0), ("lag_max", s["lag_max"]),
                     ("dropped_groups", s["dropped_groups"]), ("is_weight_mean", _mean_or_none(is_weights)),
                     ("is_clip_fraction", _mean_or_none(clipped)), ("minus_bc", vs_bc["delta"]),
                     ("p_vs_bc", vs_bc["p"])]}
    between = paired(evals["sync"], evals["async"])
    wall_ratio = results["async_wall_s"] / results["sync_wall_s"]
    print(f"async - sync: {between['delta']:+.0%} on the same {between['n']} tasks (McNemar p = {between['p']:.2f}); "
          f"wall time async / sync {wall_ratio:.2f}")
    results |= {"async_minus_sync": round(between["delta"], 3), "p_async_vs_sync": round(between["p"], 3),
                "wall_ratio": round(wall_ratio, 3)}
    return results


def _mean_or_none(xs: list[float]) -> float | None:
    return round(statistics.mean(xs), 3) if xs else None


def main() -> None:
    import sys

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--desktops", default="4,16", help="comma-separated desktop counts (0: no simulation)")
    ap.add_argument("--samples", type=int, default=4, help="G")
    ap.add_argument("--updates", type=int, default=3, help="policy versions per run")
    ap.add_argument("--max-lag", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=3, help="steps per episode")
    ap.add_argument("--answer-s", type=float, default=0.5, help="the stand-in engine's seconds per batch")
    ap.add_argument("--update-s", type=float, default=20.0, help="the stand-in trainer's seconds per update")
    ap.add_argument("--syncs", type=int, default=3, help="weight syncs timed per engine (0: none)")
    ap.add_argument("--compare", type=Path, help="report `just compare-async`'s folder instead (runs nothing)")
    args = ap.parse_args()
    if args.compare:
        print(json.dumps(compare(args.compare)))
        return
    results: dict = {"answer_s": args.answer_s, "update_s": args.update_s, "samples": args.samples,
                     "max_lag": args.max_lag, "updates": args.updates}
    counts = [int(c) for c in args.desktops.split(",") if int(c)]
    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        root = Path(tmp)
        for n in counts:
            spawn(root, n)  # the loop plays on every desktop of the run
            try:
                for sync in (True, False):
                    mode = "sync" if sync else "async"
                    s = simulate(root, n, sync, args)
                    print(f"{n:>2} desktops, {mode:>5}: {s['steps_per_s']:.2f} steps/s, desktops busy "
                          f"{s['desktop_busy']:.0%}, trainer busy {s['trainer_busy']:.0%}, {s['wall_s']:.0f} s, "
                          f"lag {s['lag_mean']} mean / {s['lag_max']} max, {s['dropped_groups']} groups dropped",
                          flush=True)
                    for key in ("steps_per_s", "desktop_busy", "trainer_busy", "wall_s", "lag_mean", "lag_max",
                                "dropped_groups"):
                        value = s[key]
                        results[f"{mode}_{key}_{n}"] = round(value, 3) if isinstance(value, float) else value
                results[f"speedup_{n}"] = round(results[f"async_steps_per_s_{n}"] / results[f"sync_steps_per_s_{n}"], 2)
            finally:
                stop(root)
        if args.syncs:
            checkpoint = other_version(root / "other")
            vllm_python = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"
            for python, engine in [(sys.executable, "transformers"), (sys.executable, "llamacpp"),
                                   (str(vllm_python), "vllm")]:
                if not Path(python).exists():
                    print(f"{engine}: no {python} here (`install.sh --all` builds .venv-vllm)")
                    continue
                times = sync_times(python, engine, checkpoint, args.syncs)
                if isinstance(times, str):
                    print(f"{engine}: weight sync not measured: {times}")
                    continue
                results[f"sync_s_{engine}"] = round(statistics.median(times), 3)
                print(f"weight sync, {engine}: {statistics.median(times):.3f} s median of {len(times)} "
                      f"({', '.join(f'{t:.3f}' for t in times)})", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
