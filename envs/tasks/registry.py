"""Registries of what a task file may name: setup steps, getters and metrics.

A task loads only if every setup step type, getter type and metric it names is registered, so
an unsupported one is reported by name when tasks load, not half-way through an episode.
"""

from __future__ import annotations

from typing import Callable

METRICS: dict[str, Callable[..., float]] = {}  # name -> metric(result, expected, **options) -> score in [0, 1]
SETUP_STEPS: dict[str, Callable] = {}  # step type -> step(desktop, **parameters); run in the env server
GETTERS: dict[str, Callable] = {}  # getter type -> getter(desktop, spec) -> what a metric compares


def metric(name: str):
    """Register a metric under the name task files use in `evaluator.func`."""

    def wrap(fn: Callable[..., float]) -> Callable[..., float]:
        if name in METRICS:
            raise ValueError(f"metric {name!r} is registered twice")
        METRICS[name] = fn
        return fn

    return wrap


def get_metric(name: str) -> Callable[..., float]:
    if name not in METRICS:
        raise KeyError(f"unsupported metric {name!r}; supported: {', '.join(sorted(METRICS))}")
    return METRICS[name]
