"""Registries of what a task file may name: setup steps, getters and metrics.

A task loads only if every setup step type, getter type and metric it names is registered, so
an unsupported one is reported by name when tasks load, not half-way through an episode.
"""

from __future__ import annotations

from computerrl.data.registry import Registry

METRICS = Registry("metric")  # name -> metric(result, expected, **options) -> score in [0, 1]
SETUP_STEPS = Registry("setup step")  # step type -> step(desktop, **parameters); run in the env server
GETTERS = Registry("getter")  # getter type -> getter(desktop, spec) -> what a metric compares
# app -> what the `launch` step waits for once the app's window shows, before the next step (a browser:
# its first tab loaded); registered by the app's own module (tasks/chrome.py)
LAUNCH_SETTLES = Registry("launch settle")
metric = METRICS.register  # @metric("name"): register under the name task files use in `evaluator.func`
