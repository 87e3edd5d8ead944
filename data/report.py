"""The Entropulse schedule's report: per evaluated phase, pooled over seeds, its success with paired
tests between phases and its exploration (entropies, pass@k and distinct actions of sampled plays,
GRPO's flat groups), and the paper's training-curve figure (rollout reward and policy entropy
across every training step)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from computerrl.data.stats import mcnemar, wilson

# Training outputs of a schedule run folder, in order: (phase label, checkpoint folders, glob).
# An RL phase's checkpoints: RUN/<phase>/policy-v, or RUN/<phase>/async/policy-v from the asynchronous loop.
TRAINING = (("bc", "bc"), ("rl1", "rl1/**/policy-*"), ("entropulse", "entropulse"), ("rl2", "rl2/**/policy-*"))


def phase_row(phase: str, summary: dict, folder: Path) -> dict:
    """What the report needs of one evaluated phase: its summary's figures and each task's outcome
    (task id -> (split, success)), for the paired tests between phases."""
    from computerrl.data.datasets_io import load

    outcomes = {}
    if (folder / "results").exists():
        for r in load(folder / "results"):
            if r["samples"]:  # a task whose trajectories were all aborted has no outcome
                outcomes[r["task_id"]] = (split_of(r), r["successes"] / r["samples"] >= 0.5)
    overall = summary["overall"]
    return {"phase": phase, "outcomes": outcomes, "entropy": overall["mean_entropy"],
            "action_entropy": overall.get("action_entropy", float("nan")), "folder": str(folder)}


SPLITS = ("seen", "near", "far")  # a task's template: trained on; held out, near one trained on; held out


def split_of(result: dict) -> str:
    """Which of SPLITS an eval result's task belongs to (eval writes it; older evals only say held out or not,
    and their held-out tasks count as far)."""
    return result.get("split") or ("far" if result["ood"] else "seen")


def exploration(summary: dict) -> dict:
    """What a phase's sampled eval (K plays a task at T = 1) says of how much it explores."""
    overall = summary["overall"]
    return {"k": summary["samples"], "pass_1": overall["success_rate"], "pass_k": overall["pass_at_k"],
            "distinct": overall.get("distinct_actions", float("nan")), "mixed": overall.get("mixed", float("nan"))}


def phase_figures(run: Path, phase: str, summary: dict, sampled: dict | None) -> dict:
    """One evaluated phase's row of the report: its eval's `summary`, its RL batches, and its sampled
    eval's summary (None when it had none)."""
    return phase_row(phase, summary, run / f"eval-{phase}") | rl_figures(run, phase) \
        | (exploration(sampled) if sampled else {}) | {"untrained": untrained(run, phase)}


def untrained(run: Path, phase: str) -> str:
    """Why a phase had nothing to train on ("" when it trained): an RL phase whose every group was flat, an
    Entropulse with no success to learn from. Its policy is the previous phase's, and so are its figures."""
    if phase.startswith("rl"):
        figures = rl_figures(run, phase)
        return "no rows" if figures and not figures["rows"] else ""  # no GRPO group with signal
    successes = run / "successes" / "summary.json"
    if phase == "entropulse" and successes.exists() and not json.loads(successes.read_text())["rows"]:
        return "no successes"  # RL 1 won no play
    return ""


# The small files of a schedule run folder that phases_done and iteration_table read, as globs under it.
REPORT_FILES = ("eval-*/summary.json", "eval-*/results/*", "explore-*/summary.json", "rl*/**/policy-*/summary.json",
                "successes/summary.json", "rl*/tasks-*.weights.json",
                "rl*/eval-*/summary.json", "rl*/eval-*/results/*", "drift-bc.json", "rl*/drift-*.json")  # `track`


def keep_report_files(run: Path, dest: Path) -> int:
    """Copy `run`'s REPORT_FILES to the same places under `dest` (to commit or pool a seed run elsewhere);
    returns how many."""
    import shutil

    run, dest = Path(run), Path(dest)
    files = {f for pattern in REPORT_FILES for f in run.glob(pattern) if f.is_file()}
    for f in files:
        (dest / f.relative_to(run)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest / f.relative_to(run))
    return len(files)


def phases_done(run: Path, phases: list[str]) -> list[dict]:
    """The rows of the phases (in order) that a schedule's run folder holds evaluated, read from its
    small files alone: eval-*/summary.json and results/, explore-*/summary.json, the policies' summaries."""
    def read(folder: Path) -> dict | None:
        return json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").exists() else None

    return [phase_figures(run, phase, summary, read(run / f"explore-{phase}")) for phase in phases
            if (summary := read(run / f"eval-{phase}")) is not None]


def rl_figures(run: Path, phase: str) -> dict:
    """An RL phase's GRPO batches: the mean share of flat groups (all rewards equal: no signal) and
    the rows trained on, over its iterations."""
    summaries = [json.loads(p.read_text()) for p in sorted(run.glob(f"{phase}/**/policy-*/summary.json"))]
    if not summaries:
        return {}
    return {"flat": sum(s["skipped_fraction"] for s in summaries) / len(summaries),
            "rows": sum(s.get("rows", 0) for s in summaries), "iterations": len(summaries)}


def pooled(rows: list[dict], split: str | None = None) -> dict:
    """Success over the seeds' tasks (split: None = all, else one of SPLITS)."""
    wins = [won for r in rows for kind, won in r["outcomes"].values() if split is None or kind == split]
    return {"rate": sum(wins) / len(wins) if wins else float("nan"), "n": len(wins),
            "ci": wilson(sum(wins), len(wins)) if wins else (float("nan"),) * 2}


def paired(a: list[dict], b: list[dict]) -> dict:
    """Phase B against phase A on the same (seed, task) pairs: the difference in success rate and the
    exact McNemar p-value."""
    pairs = [(wa[1], b[k]["outcomes"][task][1]) for k, ra in enumerate(a)
             for task, wa in ra["outcomes"].items() if task in b[k]["outcomes"]]
    only_a = sum(x and not y for x, y in pairs)
    only_b = sum(y and not x for x, y in pairs)
    return {"delta": (only_b - only_a) / len(pairs) if pairs else float("nan"), "p": mcnemar(only_a, only_b),
            "n": len(pairs)}


def schedule_report(seeds: dict[int, list[dict]]):
    """The schedule's two tables, each fitting 80 columns: success per phase on the held-out tasks,
    pooled over the seeds (each seed's phase rows, in schedule order), with the paired differences;
    then each phase's exploration."""
    from rich.console import Group

    common = set.intersection(*({p["phase"] for p in rows} for rows in seeds.values()))  # seeds cut short
    phases = [p["phase"] for p in next(iter(seeds.values())) if p["phase"] in common]
    by_phase = {name: [next(p for p in rows if p["phase"] == name) for rows in seeds.values()] for name in phases}
    return Group(success_table(seeds, phases, by_phase), exploration_table(by_phase))


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.0%}"


def _mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if key in r and not math.isnan(r[key])]
    return sum(values) / len(values) if values else float("nan")


def success_table(seeds: dict, phases: list[str], by_phase: dict[str, list[dict]]):
    from rich import box
    from rich.table import Table

    n_tasks = pooled(by_phase[phases[0]])["n"] // len(seeds)
    t = Table(title=f"Entropulse schedule: success on {n_tasks} held-out tasks, seed{'s' * (len(seeds) > 1)} "
                    f"{', '.join(map(str, seeds))}", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("phase", "success [95% CI]", *SPLITS, "Δ prev (p)", "Δ BC (p)"):
        t.add_column(col, justify="left" if col == "phase" else "right", no_wrap=True)

    def delta(d: dict) -> str:
        if not d["n"]:
            return "—"
        return f"{d['delta'] * 100:+.0f} ({'<0.001' if d['p'] < 0.001 else format(d['p'], '.3f')})"

    bc = phases.index("bc") if "bc" in by_phase else 0
    for k, name in enumerate(phases):
        rows = by_phase[name]
        if all(r.get("untrained") for r in rows):  # its figures would be the previous phase's, repeated
            t.add_row(name, f"— ({rows[0]['untrained']})")
            continue
        total = pooled(rows)
        prev = paired(by_phase[phases[k - 1]], rows) if k else {"n": 0}
        from_bc = paired(by_phase[phases[bc]], rows) if bc < k - 1 else {"n": 0}  # at bc + 1 it is Δ prev
        t.add_row(name, f"{_pct(total['rate'])} [{_pct(total['ci'][0])}–{_pct(total['ci'][1])}]",
                  *(_pct(pooled(rows, split)["rate"]) for split in SPLITS), delta(prev), delta(from_bc))
    t.caption = ("success pooled over seeds × tasks (greedy, one trajectory each), Wilson interval; seen: templates "
                 "trained on; near: held out, a trained template's calls on a new target; far: held out, calls no "
                 "train task shows; Δ: difference in points from the previous phase and from "
                 "BC on the same seeds and tasks, exact McNemar p-value in brackets"
                 + ("; —: nothing to train on (no rows: no GRPO group with signal; no successes: RL 1 won no play), "
                    "the previous phase's policy kept" if any(r.get("untrained") for rows in by_phase.values()
                                                              for r in rows) else ""))
    if len(seeds) > 1:
        t.caption += "\nper seed: " + "; ".join(
            f"{name} " + " ".join(_pct(pooled([r])["rate"]) for r in by_phase[name]) for name in phases)
    return t


def exploration_table(by_phase: dict[str, list[dict]]):
    from rich import box
    from rich.table import Table

    k = next((r["k"] for rows in by_phase.values() for r in rows if "k" in r), 0)
    t = Table(title="how much each phase explores", box=box.SIMPLE_HEAD, padding=(0, 1))
    sampled = {"pass@1": ("pass_1", _pct), f"pass@{k}": ("pass_k", _pct),  # header: (row key, cell)
               "acts": ("distinct", lambda x: f"{x:.1f}"), "mixed": ("mixed", _pct)} if k else {}
    for col in ("phase", "H tok", "H act", *sampled, "flat"):
        t.add_column(col, justify="left" if col == "phase" else "right", no_wrap=True)
    for name, rows in by_phase.items():
        flat = _mean(rows, "flat")
        if all(r.get("untrained") for r in rows):
            t.add_row(name, "—", *[""] * (len(sampled) + 1), "" if math.isnan(flat) else _pct(flat))
            continue
        t.add_row(name, f"{_mean(rows, 'entropy'):.3f}", f"{_mean(rows, 'action_entropy'):.2f}",
                  *[cell(_mean(rows, key)) for key, cell in sampled.values()], "" if math.isnan(flat) else _pct(flat))
    t.caption = ("H tok: mean token entropy of the greedy eval's answers (nats); H act: entropy of the action "
                 "functions it chose; "
                 + (f"pass@1, pass@{k}: success of {k} plays per task at temperature 1 (unbiased estimator), on "
                    f"the first tasks of the eval set; acts: distinct actions (function and arguments) those {k} "
                    "plays took, mean per task; mixed: tasks whose plays both won and lost (a GRPO group with "
                    "signal); " if k else "")
                 + "flat: GRPO groups whose rewards were all equal (no signal), mean over the phase's iterations; "
                 "means over seeds")
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


def iteration_table(run: Path, title: str = "RL iterations"):
    """Per RL iteration of a schedule run (a version, in the asynchronous loop): GRPO's flat-group share
    and rows, and, where the tasks were drawn by weight (rl_draw signal or gain), each template's
    estimated win rate → weight and the tasks drawn."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    tracked = any(run.glob("rl*/eval-*/results"))
    for col in ("phase", "iter", "flat", "rows", *(("success", "kept") if tracked else ()),
                "draws: template p → weight (drawn)"):
        t.add_column(col, justify="right" if col in ("flat", "rows", "success", "kept") else "left")
    for phase in ("rl1", "rl2"):
        policies = [*(run / phase).glob("policy-*"), *(run / phase).glob("async/policy-*")]  # either loop's
        for policy in sorted(policies, key=lambda p: int(p.name.rsplit("-", 1)[-1])):
            if not (policy / "summary.json").exists():
                continue
            summary, i = json.loads((policy / "summary.json").read_text()), policy.name.rsplit("-", 1)[-1]
            draws = []
            parts = [run / phase / f"tasks-{i}.weights.json", *sorted((run / phase).glob(f"tasks-{i}-*.weights.json"))]
            for weights in filter(Path.exists, parts):  # the iteration's draw, then dynamic sampling's
                w = json.loads(weights.read_text())
                draws.append(", ".join(f"{name} {w['estimates'].get(name, {}).get('p', 0.5):.2f} → {x:.2f} "
                                       f"({w['drawn'].get(name, 0)})" for name, x in w["weights"].items()))
            figures = retention(run, run / phase / f"eval-{i}") if tracked else None
            t.add_row(phase, i, _pct(summary["skipped_fraction"]), str(summary.get("rows", "")),
                      *((_pct(figures["success"]), _pct(figures["kept"])) if figures else ("", "") if tracked else ()),
                      "; ".join(draws))
    if tracked:
        t.caption = ("success: greedy, on the first eval tasks (schedule setting track); kept: the share of those "
                     "BC solved that this iteration's policy still solves")
    return t


def retention(run: Path, tracked: Path) -> dict | None:
    """A tracked iteration's success on its eval tasks and the share of the ones BC solved it still solves
    (None when it was not evaluated)."""
    if not (tracked / "results").exists():
        return None
    now = {task: won for task, (_, won) in phase_row("", {"overall": {"mean_entropy": 0}}, tracked)["outcomes"].items()}
    bc = phase_row("", {"overall": {"mean_entropy": 0}}, run / "eval-bc")["outcomes"]
    solved = [task for task in now if bc.get(task, (None, False))[1]]
    return {"success": sum(now.values()) / len(now) if now else float("nan"),
            "kept": sum(now[task] for task in solved) / len(solved) if solved else float("nan")}


def drift_table(run: Path):
    """Per template, the chance of BC's first answers (its greedy eval's) under BC and each tracked RL iteration's
    policy (schedule setting track); None when nothing was tracked."""
    from rich import box
    from rich.table import Table

    columns = {"bc": run / "drift-bc.json"} | {
        f"{phase} {f.stem.split('-')[1]}": f for phase in ("rl1", "rl2")
        for f in sorted((run / phase).glob("drift-*.json"), key=lambda f: int(f.stem.split("-")[1]))}
    chances = {name: json.loads(f.read_text()) for name, f in columns.items() if f.exists()}
    if len(chances) < 2:
        return None
    t = Table(title="chance of BC's first answers, per template", box=box.SIMPLE_HEAD, padding=(0, 1))
    t.add_column("template")
    for name in chances:
        t.add_column(name, justify="right")
    for template in chances["bc"] if "bc" in chances else next(iter(chances.values())):
        t.add_row(template, *(f"{c[template]:.2f}" if template in c else "" for c in chances.values()))
    return t
