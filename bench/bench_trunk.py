"""What keeping the frozen layers' output saves (`--trunk-memory-gib`, policy/frozen_trunk.py): `sft` with
`--train-layers N` over the same rows for several epochs, once recomputing the frozen layers every pass and
once computing them in the first epoch only.

    python -m computerrl.bench.bench_trunk --data runs/demo/tasks/expert                 # BC's data, ~10 min
    python -m computerrl.bench.bench_trunk --data runs/demo/tasks/expert --repeats 2 --epochs 4

Each run is a child process of its own (the stage's CLI, one after the other, alternating). Reported per
setting: the median seconds of the first epoch and of the later ones (the metrics' per-step seconds), the
whole run's wall time, and the largest difference of a step's loss between the two (float rounding only).
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_sft(data: str, out: Path, args, gib: float) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "computerrl.cli.main", "sft", "--data", data, "--model", args.model, "--out", str(out),
           "--epochs", str(args.epochs), "--train-layers", str(args.train_layers), "--batch-rows", str(args.batch_rows),
           "--lr", "3e-4", "--save-every", "1000", "--trunk-memory-gib", str(gib)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    from computerrl.data.datasets_io import load

    metrics = load(out / "metrics")
    per_epoch = [sum(s for s, e in zip(metrics["seconds"], metrics["epoch"]) if e == k) for k in range(args.epochs)]
    return {"wall": wall, "first": per_epoch[0], "later": statistics.median(per_epoch[1:]), "loss": metrics["loss"]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="runs/demo/tasks/expert", help="an SFT or step dataset (BC's expert replays)")
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-layers", type=int, default=8)
    ap.add_argument("--batch-rows", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)
    if args.epochs < 2:
        raise SystemExit("--epochs must be at least 2: the later epochs are what the kept output saves")
    runs: dict[str, list[dict]] = {"recomputed": [], "kept": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name, gib in (("recomputed", 0.0), ("kept", 2.0)):
                runs[name].append(run_sft(args.data, Path(tmp) / name, args, gib))
                last = runs[name][-1]
                print(f"{name:10s} run {r + 1}: wall {last['wall']:.1f} s, first epoch {last['first']:.1f} s, "
                      f"later epochs {last['later']:.1f} s each")
    figures = {name: {k: statistics.median(x[k] for x in rs) for k in ("wall", "first", "later")}
               for name, rs in runs.items()}
    loss_gap = max(abs(a - b) for x, y in zip(runs["recomputed"], runs["kept"]) for a, b in zip(x["loss"], y["loss"]))
    result = {"epochs": args.epochs, "train_layers": args.train_layers, "repeats": args.repeats,
              **{f"{name}_{k}_s": round(v, 2) for name, f in figures.items() for k, v in f.items()},
              "later_epoch_speedup": round(figures["recomputed"]["later"] / figures["kept"]["later"], 2),
              "wall_speedup": round(figures["recomputed"]["wall"] / figures["kept"]["wall"], 2),
              "max_loss_difference": loss_gap}
    print(f"later epochs: {result['later_epoch_speedup']}x faster with the frozen layers' output kept; whole run "
          f"{result['wall_speedup']}x; largest loss difference {loss_gap:.1e}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
