"""A scripted policy: a fixed Calc episode, for the demo, the benchmarks and the tests.

It is what a model's answers look like (a thought and one line of Python), so it goes through
the same parser, server and desktop as a trained policy's.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from computerrl.apis.parser import format_answer as response


def calc_episode(text: str) -> list[str]:
    """Open Calc, write `text` into A1, bold it, select a range by dragging, undo, finish."""
    return [
        response("Agent.open_app('calc')", "I need a spreadsheet."),
        response(f"Agent.type(text={text!r}, enter=True)", "A1 is active; type the value."),
        response("Agent.hotkey(['ctrl', 'Home'])", "Back to A1."),
        response("Agent.hotkey(['ctrl', 'b'])", "Make it bold."),
        response("Agent.drag_and_drop([200, 250], [400, 330])", "Select a block of cells."),
        response("Agent.scroll([700, 500], 'down')", "Look further down."),
        response("Agent.exit(True)", "Done."),
    ]


def run_episode(env, actions: list[str]) -> dict[str, Any]:
    """Play `actions` on a DesktopEnv; report what a person watching would want to know."""
    t0 = time.perf_counter()
    obs, _ = env.reset()
    reset_s = time.perf_counter() - t0
    step_s, results, valid, seen = [], [], 0, {}
    terminated = truncated = False
    for action in actions:
        t = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(action)
        step_s.append(time.perf_counter() - t)
        if info.get("aborted"):
            results.append(f"aborted: {info['aborted']}")
            break
        valid += info["action_valid"]
        results.append(info["exec_result"])
        seen[len(results)] = obs["a11y_tree"]
        if terminated or truncated:
            break
    return {"steps": len(step_s), "valid": valid, "reset_s": reset_s,
            "step_p50_s": statistics.median(step_s) if step_s else 0.0, "results": results,
            "terminated": terminated, "aborted": env.aborted, "trees": seen, "last_obs": obs}
