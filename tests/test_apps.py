"""GIMP, Thunderbird and Nautilus in a real desktop: started as OSWorld's tasks start them, shown in the
accessibility tree the agent reads, gone after reset."""

from __future__ import annotations

import pytest

from computerrl.envs.service.client import DesktopEnv
from computerrl.play.scripted import response

pytestmark = pytest.mark.desktop


@pytest.mark.parametrize("command, app, shown, rows", [
    (["gimp"], "gimp", "GNU Image Manipulation Program", 10),
    (["/usr/bin/thunderbird"], "thunderbird", "Mozilla Thunderbird", 10),  # as OSWorld's thunderbird tasks launch it
    (["nautilus", "/home/user/Documents"], "nautilus", "Documents", 1),  # GTK 4: its window only (a known gap)
])
def test_an_app_starts_as_tasks_start_it_shows_its_tree_and_is_gone_after_reset(server, command, app, shown, rows):
    env = DesktopEnv(server[1], 0, max_steps=5)
    task = {"id": f"open-{app}", "instruction": f"Use {app}.", "config": [
        {"type": "launch", "parameters": {"command": command}}], "evaluator": {"func": "infeasible"}}
    obs, _ = env.reset(options={"task": task})
    for _ in range(20):  # its main window may come after a splash screen
        if obs["focused_app"] == app and shown in obs["a11y_tree"] and len(obs["a11y_tree"].splitlines()) > rows:
            break
        obs, *_ = env.step(response("Agent.wait()"))
    assert obs["focused_app"] == app, obs["windows"]
    assert shown in obs["a11y_tree"] and len(obs["a11y_tree"].splitlines()) > rows, obs["a11y_tree"][:500]
    obs, _ = env.reset()
    assert obs["windows"] == []
    assert app not in server[0].slots[0].desktop.sandbox.run(["ps", "-eo", "comm"], env={}).stdout
