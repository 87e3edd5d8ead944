"""`computerrl eval`: how good is a checkpoint? Success per domain on held-out tasks.

The policy plays every task K times (`--samples`) on the desktops of a `spawn-envs` run, through
the same episode loop as `rollout`. Reported, overall, per domain and — for suites built with
`--holdout-templates` — in-distribution (seen templates, new parameters) vs out-of-distribution
(unseen templates): success rate with its 95% Wilson interval, pass@K when K > 1 (the unbiased
estimator) and the distinct actions a task's K trajectories took (how much the policy explores),
mean steps, invalid-action rate, aborted trajectories (excluded from the rates, never failures),
the policy's mean token entropy, and the entropy of its choice of action function (how varied its
actions are). Tasks this build cannot run are listed as skipped with the reason.

Departure from OSWorld's harness: the default is greedy decoding (temperature 0) for K = 1; K > 1
needs a temperature, or the K samples would be one answer K times.

Reads:  --tasks (a test split or OSWorld JSON files), --envs (spawn-envs run folder), --model.
Writes: OUT/results (per-task dataset), OUT/steps (step dataset, with screenshots unless
        --no-screenshots), OUT/summary.json, OUT/success_by_domain.png, OUT/actions.png, and a table.

    computerrl eval --tasks runs/tasks/test --envs runs/envs --limit 4 --max-steps 4 --out runs/eval-bc
    computerrl eval --tasks osworld/ --envs runs/envs --model runs/rl2 --samples 4 --temperature 1 --out runs/eval-rl2
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.data.files import write_atomic
from computerrl.data.stats import action_function, action_key, entropy, pass_at_k, wilson
from computerrl.play.config import PlayConfig

if TYPE_CHECKING:  # the episode loop (gRPC) loads when the stage runs: `computerrl --help` builds this config
    from computerrl.data.journal import Journal


@dataclasses.dataclass
class EvalConfig(PlayConfig):
    out: Path = Path("runs/eval")  # results folder
    screenshots: bool = True  # keep each step's screenshot (for `computerrl view`)

    def __post_init__(self):
        super().__post_init__()
        if self.samples > 1 and self.temperature == 0:
            raise ValueError("--samples > 1 needs --temperature > 0 (greedy decoding gives K identical samples)")


def run(cfg: EvalConfig, console=None) -> dict:
    import shutil

    from rich.console import Console

    from computerrl.play.trajectories import play_tasks

    console = console or Console(soft_wrap=True)
    if cfg.finished:
        console.print(f"{cfg.out} holds a finished evaluation (--overwrite evaluates again)")
        summary = json.loads((cfg.out / "summary.json").read_text())
        console.print(table(summary))
        return summary
    items, playable, journal = play_tasks(cfg, "eval", console)
    summary = _write(cfg, items, playable, journal)
    shutil.rmtree(cfg.journal, ignore_errors=True)
    console.print(table(summary))
    console.print(f"results in {cfg.out} (summary.json, results/, steps/, plots)")
    return summary


def task_split(item) -> str:
    """seen (a template trained on), near (held out, its template declares the trained one whose calls it makes
    on a new target) or far (held out, any other): the report's columns (data/report.SPLITS)."""
    from computerrl.tasks.suites import TEMPLATES, all_templates

    if not item.ood:
        return "seen"
    all_templates()  # loads the registry
    template = TEMPLATES.get(item.template or "")
    return "near" if template is not None and template.near else "far"


def per_task(trajectories: list[dict], items, samples: int) -> list[dict]:
    """One result row per task from its K trajectory records (aborted ones counted apart)."""
    from computerrl.play.episode import EVALUATOR_ERROR

    rows = []
    for k, item in enumerate(items):
        group = trajectories[k * samples:(k + 1) * samples]
        played = [t for t in group if not t["error"]]
        steps = [r for t in played for r in t["rows"]]
        entropies = [r["entropy"] for r in steps if not math.isnan(r["entropy"])]
        rows.append({"task_id": item.task_id, "domain": item.domain, "ood": item.ood, "template": item.template,
                     "split": task_split(item),
                     "samples": len(played), "successes": sum(t["success"] for t in played),
                     "success_rate": sum(t["success"] for t in played) / len(played) if played else 0.0,
                     "pass_at_k": pass_at_k(len(played), sum(t["success"] for t in played), samples)
                     if len(played) >= samples else float("nan"),
                     "distinct_actions": len({action_key(r) for r in steps}),
                     "mean_steps": len(steps) / len(played) if played else 0.0,
                     "invalid_rate": sum(not r["action_valid"] for r in steps) / len(steps) if steps else 0.0,
                     "aborted": len(group) - len(played),
                     "evaluator_errors": sum(t["error"].startswith(EVALUATOR_ERROR) for t in group),
                     "mean_entropy": sum(entropies) / len(entropies) if entropies else float("nan"),
                     "scores": [t["score"] for t in played], "errors": [t["error"] for t in group if t["error"]]})
    return rows


def aggregate(results: list[dict], steps: list[dict]) -> dict:
    """Success with its 95% interval, pass@K and the other figures over a set of tasks."""
    n = sum(r["samples"] for r in results)
    wins = sum(r["successes"] for r in results)
    low, high = wilson(wins, n)
    passes = [r["pass_at_k"] for r in results if not math.isnan(r["pass_at_k"])]
    played = [r for r in results if r["samples"]]
    several = [r for r in results if r["samples"] > 1]
    entropies = [s["entropy"] for s in steps if not math.isnan(s["entropy"])]
    return {"tasks": len(results), "trajectories": n, "successes": wins, "success_rate": wins / n if n else 0.0,
            "ci95": [low, high], "pass_at_k": sum(passes) / len(passes) if passes else float("nan"),
            "distinct_actions": sum(r["distinct_actions"] for r in played) / len(played) if played else float("nan"),
            # tasks whose samples both won and lost: the GRPO groups this policy would learn from
            "mixed": sum(0 < r["successes"] < r["samples"] for r in several) / len(several)
            if several else float("nan"),
            "mean_steps": sum(r["mean_steps"] * r["samples"] for r in results) / n if n else 0.0,
            "invalid_rate": sum(not s["action_valid"] for s in steps) / len(steps) if steps else 0.0,
            "aborted": sum(r["aborted"] for r in results),
            "evaluator_errors": sum(r.get("evaluator_errors", 0) for r in results),
            "mean_entropy": sum(entropies) / len(entropies) if entropies else float("nan"),
            "action_entropy": entropy(action_function(s) for s in steps)}


def summarize(results: list[dict], steps: list[dict], samples: int, skipped: dict[str, str]) -> dict:
    by_domain, by_split, steps_of = defaultdict(list), defaultdict(list), defaultdict(list)
    for s in steps:
        steps_of[s["task_id"]].append(s)
    for r in results:
        by_domain[r["domain"]].append(r)
        by_split["out-of-distribution" if r["ood"] else "in-distribution"].append(r)

    def group(rs):
        return aggregate(rs, [s for r in rs for s in steps_of[r["task_id"]]])

    summary = {"samples": samples, "overall": aggregate(results, steps),
               "domains": {d: group(rs) for d, rs in sorted(by_domain.items())},
               "skipped": skipped}
    if "out-of-distribution" in by_split:  # a suite built with --holdout-templates
        summary["splits"] = {name: group(rs) for name, rs in sorted(by_split.items())}
    return summary


def _write(cfg: EvalConfig, items, playable, journal: Journal) -> dict:
    import datasets

    from computerrl.data.datasets_io import lineage, save_atomic
    from computerrl.play.trajectories import step_dataset

    trajectories, steps_ds = step_dataset(journal, playable, cfg.samples, cfg.screenshots)
    results = per_task(trajectories, playable, cfg.samples)
    steps = steps_ds.remove_columns([c for c in ("screenshot",) if c in steps_ds.column_names]).to_list()
    summary = summarize(results, steps, cfg.samples, {i.task_id: i.skip for i in items if i.skip})
    card = lineage("eval", cfg, {"tasks": str(cfg.tasks), "envs": str(cfg.envs), "model": cfg.model})
    save_atomic(steps_ds, cfg.out / "steps", lineage=card)
    save_atomic(datasets.Dataset.from_list(results), cfg.out / "results", lineage=card)
    plots(summary, steps, cfg.out)
    write_atomic(cfg.out / "summary.json", json.dumps(summary, indent=2))  # last: it marks a finished evaluation
    return summary


SPLIT_NAMES = {"in-distribution": "seen tmpl.", "out-of-distribution": "new tmpl."}  # short, for 80 columns


def table(summary: dict):
    """The summary as a table that fits an 80-column terminal or log."""
    from rich import box
    from rich.table import Table

    k, overall = summary["samples"], summary["overall"]
    t = Table(title=f"eval: success on {overall['tasks']} tasks ({k} sample{'s' * (k > 1)} each)",
              box=box.SIMPLE_HEAD, padding=0)
    lost, errors = overall["aborted"] - overall.get("evaluator_errors", 0), overall.get("evaluator_errors", 0)
    columns = {  # header: the cell of a group; pass@k, lost and errors only when they say something
        "group": None, "tasks": lambda g: str(g["tasks"]), "success": lambda g: f"{g['success_rate']:.0%}",
        "95% CI": lambda g: f"{g['ci95'][0]:.0%}–{g['ci95'][1]:.0%}",
        **({f"pass@{k}": lambda g: f"{g['pass_at_k']:.0%}", "acts": lambda g: f"{g['distinct_actions']:.1f}"}
           if k > 1 else {}),
        "steps": lambda g: f"{g['mean_steps']:.1f}", "invalid": lambda g: f"{g['invalid_rate']:.0%}",
        **({"lost": lambda g: str(g["aborted"] - g.get("evaluator_errors", 0))} if lost else {}),
        **({"errors": lambda g: str(g.get("evaluator_errors", 0))} if errors else {}),
        "H tok": lambda g: f"{g['mean_entropy']:.2f}", "H act": lambda g: f"{g['action_entropy']:.2f}"}
    for col in columns:
        t.add_column(col, justify="left" if col == "group" else "right", no_wrap=True)
    groups = [(d, g) for d, g in summary["domains"].items()] + \
        [(SPLIT_NAMES.get(n, n), g) for n, g in summary.get("splits", {}).items()]
    for name, g in groups + [("[bold]overall[/]", overall)]:
        t.add_row(name, *[cell(g) for cell in list(columns.values())[1:]])
    t.caption = ("seen/new tmpl.: tasks of templates seen in training (new parameters) / held-out templates; "
                 "steps: mean per trajectory; "
                 + ("acts: distinct actions a task's samples took, mean per task; " if k > 1 else "")
                 + "invalid: share of invalid actions; lost: trajectories whose desktop was lost; errors: the "
                 "evaluator failed on its own expected file (both left out of the rates); H tok: mean token entropy "
                 "(nats); H act: entropy of the action functions chosen")
    if summary["skipped"]:
        t.caption += f"\n{len(summary['skipped'])} tasks skipped (this build cannot run them; see summary.json)"
    return t


def plots(summary: dict, steps: list[dict], out: Path) -> None:
    """success_by_domain.png (rates with 95% intervals) and actions.png (what the policy chose)."""
    from collections import Counter

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(summary["domains"].items()) + list(summary.get("splits", {}).items()) + \
        [("overall", summary["overall"])]
    names = [n for n, _ in groups]
    rates = [g["success_rate"] for _, g in groups]
    errors = [[r - g["ci95"][0] for r, (_, g) in zip(rates, groups)], [g["ci95"][1] - r for r, (_, g) in zip(rates, groups)]]
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(names)), 3.5))
    ax.bar(names, rates, yerr=errors, capsize=4, color=["#4c72b0"] * (len(names) - 1) + ["#dd8452"])
    ax.set_ylim(0, 1)
    ax.set_ylabel("success rate (95% CI)")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(out / "success_by_domain.png", dpi=100)
    plt.close(fig)
    counts = Counter(action_function(s) for s in steps).most_common(15)
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(counts) + 1.2))
    ax.barh([c for c, _ in counts][::-1], [n for _, n in counts][::-1], color="#55a868")
    ax.set_xlabel("steps")
    ax.set_title("action functions chosen")
    fig.tight_layout()
    fig.savefig(out / "actions.png", dpi=100)
    plt.close(fig)
