"""The Entropulse schedule's report: one table row per evaluated phase, and the paper's
training-curve figure (rollout reward and policy entropy across every training step)."""

from __future__ import annotations

import math
from pathlib import Path

# Training outputs of a schedule run folder, in order: (phase label, checkpoint folders, glob).
TRAINING = (("bc", "bc"), ("rl1", "rl1/policy-*"), ("entropulse", "entropulse"), ("rl2", "rl2/policy-*"))


def phase_row(phase: str, summary: dict, folder: Path) -> dict:
    """What the table shows of one eval summary (`eval`'s summary.json)."""
    def rate(group: dict | None) -> dict:
        if not group:
            return {"rate": float("nan"), "ci": [float("nan")] * 2, "n": 0}
        return {"rate": group["success_rate"], "ci": group["ci95"], "n": group["trajectories"]}

    splits = summary.get("splits", {})
    overall = summary["overall"]
    return {"phase": phase, "overall": rate(overall), "id": rate(splits.get("in-distribution")),
            "ood": rate(splits.get("out-of-distribution")), "entropy": overall["mean_entropy"],
            "invalid": overall["invalid_rate"], "folder": str(folder)}


def schedule_table(phases: list[dict]):
    from rich.table import Table

    def cell(r: dict) -> str:
        if not r["n"]:
            return "—"
        return f"{r['rate']:.0%} [{r['ci'][0]:.0%}–{r['ci'][1]:.0%}] (n={r['n']})"

    t = Table(title="Entropulse schedule: success on held-out tasks per phase")
    for col in ("phase", "overall", "in-distribution", "out-of-distribution", "entropy", "invalid"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for p in phases:
        t.add_row(p["phase"], cell(p["overall"]), cell(p["id"]), cell(p["ood"]),
                  "—" if math.isnan(p["entropy"]) else f"{p['entropy']:.3f}", f"{p['invalid']:.0%}")
    t.caption = ("success: rate [95% Wilson interval] (trajectories); entropy: mean token entropy of the policy's "
                 "answers in eval (nats); invalid: share of invalid actions")
    return t


def training_curves(run: Path) -> list[dict]:
    """Every optimizer step of the schedule in order: phase, step, entropy, mean rollout reward (RL)."""
    from computerrl.data.datasets_io import load

    points = []
    for phase, pattern in TRAINING:
        folders = sorted(run.glob(pattern), key=lambda p: int(p.name.rsplit("-", 1)[-1]) if "-" in p.name else 0)
        for folder in folders:
            if not (folder / "metrics").exists():
                continue
            for row in load(folder / "metrics"):
                points.append({"phase": phase, "step": len(points), "entropy": row.get("entropy", float("nan")),
                               "reward": row.get("mean_reward", float("nan"))})
    return points


def schedule_plot(run: Path, evaluated: list[str]) -> Path:
    """RUN/schedule.png: entropy (every optimizer step) and rollout reward (RL steps) across phases,
    with eval success marked at the end of each phase."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = training_curves(run)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    colours = {"bc": "#8172b3", "rl1": "#4c72b0", "entropulse": "#dd8452", "rl2": "#55a868"}
    ends = {}
    for phase, colour in colours.items():
        mine = [p for p in points if p["phase"] == phase]
        if not mine:
            continue
        xs = [p["step"] for p in mine]
        ends[phase] = xs[-1]
        bottom.plot(xs, [p["entropy"] for p in mine], "o-", ms=3, color=colour, label=phase)
        if phase.startswith("rl"):
            top.plot(xs, [p["reward"] for p in mine], "o-", ms=3, color=colour, label=f"{phase} rollout reward")
    x = -1  # base is evaluated before any training; a phase that trained nothing sits where the last one ended
    for k, phase in enumerate(evaluated):
        x = ends.get(phase, x)
        summary = run / f"eval-{phase}" / "summary.json"
        if summary.exists():
            overall = json.loads(summary.read_text())["overall"]
            colour = colours.get(phase, "black")
            top.plot([x], [overall["success_rate"]], "s", color=colour, ms=7)
            top.annotate(f"eval {phase}", (x, overall["success_rate"]), textcoords="offset points",
                         xytext=(4, 6 if k % 2 else -12), fontsize=7)  # alternate sides: phases end close together
            bottom.plot([x], [overall["mean_entropy"]], "s", color=colour, ms=6, mfc="none")
    top.set_ylabel("reward / eval success")
    top.set_ylim(-0.05, 1.05)
    top.legend(fontsize=7, loc="upper left")
    bottom.set_ylabel("token entropy (nats)\nline: training batch; □: eval")
    bottom.set_yscale("log")  # BC starts near 2 nats, RL moves in hundredths
    bottom.set_xlabel("optimizer step across the schedule")
    bottom.legend(fontsize=7)
    fig.suptitle("Entropulse: BC → RL → SFT on successes → RL")
    fig.tight_layout()
    path = run / "schedule.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
