"""The statistics `eval` and the schedule report: confidence intervals, pass@k, entropies, paired tests."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Iterable


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% for z = 1.96) of a success rate; (0, 1) when n = 0.

    Unlike p ± z·sqrt(p(1-p)/n) it stays inside [0, 1] and is not zero-width at 0 or n successes,
    which matters for the small task sets of a CPU run."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with c successes among n samples (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def entropy(labels: Iterable[str]) -> float:
    """Entropy (nats) of the empirical distribution of `labels`; 0 for none or one kind."""
    counts = Counter(labels)
    total = sum(counts.values())
    return 0.0 - sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0  # never -0.0


def action_function(step: dict) -> str:
    """"Agent.click", "CalcTools.set_cell_value", … or "invalid": what a step row chose to do."""
    if not step["action_valid"] or not step["action"]:
        return "invalid"
    action = json.loads(step["action"])
    return f"{action['api']}.{action['name']}"


def action_key(step: dict) -> str:
    """What a step row did, exactly (function and arguments), or "invalid": two steps that did the
    same thing have the same key."""
    return step["action"] if step["action_valid"] and step["action"] else "invalid"


def mcnemar(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value for paired binary outcomes: `only_a` pairs where only A
    succeeded, `only_b` where only B did (the pairs where both agree say nothing of a difference).
    Under no difference the discordant pairs split as Binomial(only_a + only_b, 1/2)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)
