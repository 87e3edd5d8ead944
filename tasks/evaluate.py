"""Scoring an episode with its task's evaluator, the way OSWorld combines metrics.

`conj: "and"` — any metric at 0 scores 0, else the mean; `"or"` — any metric at 1 scores 1, else
the best. `infeasible` tasks score 1 when the agent gave up (`Agent.exit(False)`), and no other
task gives credit for giving up.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.tasks import catalog, metric_worker  # noqa: F401 - catalog: what a task names, registered
from computerrl.tasks.getters import fetch
from computerrl.tasks.setup import Budget, run_steps
from computerrl.tasks.task import Task

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop


class EvaluatorError(RuntimeError):
    """The task's evaluator cannot score this episode through no fault of the agent: its metric fails on
    the task's own expected file too. The episode is left out, like a lost one, and counted apart."""


def _per_metric(value, n: int) -> list:
    return value if isinstance(value, list) else [value] * n


def evaluate(desktop: "Desktop", task: Task, exit_success: bool | None) -> tuple[float, str]:
    """(score in [0, 1], what decided it). `exit_success`: the agent's Agent.exit claim, None if it never exited."""
    if task.metrics == ["infeasible"]:
        gave_up = exit_success is False
        return float(gave_up), "infeasible task: " + ("the agent gave up" if gave_up else "the agent did not give up")
    if exit_success is False:
        return 0.0, "the agent gave up on a feasible task"
    ev, n = task.evaluator, len(task.metrics)
    budget = Budget.of(trusted=True)  # the evaluation's commands run out of the agent's reach
    failed: list[str] = []  # a postconfig step that fails on what the agent left (a closed window) is noted
    run_steps(desktop, ev.get("postconfig", []), budget, failed)
    results, expected = _per_metric(ev.get("result"), n), _per_metric(ev.get("expected"), n)
    options = _per_metric(ev.get("options") or {}, n)
    conj, scores, notes = ev.get("conj", "and"), [], [f"postconfig {f}" for f in failed]
    broken: list[str] = []  # metrics that fail on the task's own expected file: the evaluator's fault
    with tempfile.TemporaryDirectory(prefix="computerrl-eval-") as out:
        for name, res, exp, opts in zip(task.metrics, results, expected, options):
            result, gold = fetch(desktop, res, Path(out), budget), fetch(desktop, exp, Path(out), budget)
            try:  # out of this process: the metric parses what the agent made
                score = metric_worker.score(name, result, gold, opts or {}, budget.left(metric_worker.CPU_S))
            except ValueError as e:
                if isinstance(e, metric_worker.MetricRaised) and not failed and \
                        _fails_on_gold(name, exp, gold, opts, budget.left(metric_worker.CPU_S)):
                    broken.append(f"{name} fails on the task's own expected file: {e}")
                    continue
                score, notes = 0.0, notes + [f"{name} failed on the output: {e}"]  # the agent's: a wrong output
            scores.append(score)
            if conj == "and" and score == 0.0 or conj == "or" and score == 1.0:
                break
    decided = conj == "and" and 0.0 in scores or conj == "or" and 1.0 in scores
    if broken and not decided:  # the metrics that worked cannot settle it: no score, not a failure
        raise EvaluatorError("; ".join(broken))
    if not scores:
        return 0.0, "; ".join(notes)
    total = (0.0 if 0.0 in scores else sum(scores) / len(scores)) if conj == "and" else max(scores)
    return total, "; ".join([", ".join(f"{m}={s:g}" for m, s in zip(task.metrics, scores)), *notes, *broken])


def _fails_on_gold(name: str, spec, gold, opts, timeout_s: float) -> bool:
    """Whose fault a metric's exception is: the task's own expected file, from its cache (never anything
    the agent could have placed), scored against itself. If the metric raises there too, the evaluator is
    broken; if it scores it, the agent's output broke it: a wrong output. (Were every failure the
    evaluator's, an agent could corrupt its answer to have a failure left out.) Within what is left of the
    evaluation's budget: with time of its own, an output that made the metric slow could make the
    evaluation outlast its client's deadline, and the episode would be lost instead of failed."""
    if not (isinstance(spec, dict) and spec.get("type") == "cloud_file" and isinstance(gold, str) and gold):
        return False
    try:
        metric_worker.score(name, gold, gold, opts or {}, timeout_s)
    except metric_worker.MetricRaised:
        return True
    except ValueError:  # timed out, killed, out of memory: nothing learnt about the evaluator
        return False
    return False
