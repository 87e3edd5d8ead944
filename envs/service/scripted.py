"""A scripted policy: fixed answers, for the fleet demo, the benchmarks and the tests.

Its answers are what a model's look like (a thought and one line of Python), and it plays through the
one episode loop (`episode.play`), so they go through the same parser, server and desktop as a
trained policy's.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

from computerrl.apis.parser import format_answer as response
from computerrl.data.schemas import Decision


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


class ScriptedPolicy:
    """Answers step i with answer i, whatever it sees; past the last, it gives up."""

    version = engine_name = "scripted"

    def __init__(self, answers: Sequence[str]):
        self.answers = list(answers)

    def episode(self):
        return contextlib.nullcontext()

    def act(self, instruction: str, observation: dict, history: list) -> Decision:
        step = len(history)
        return Decision([], self.answers[step] if step < len(self.answers) else response("Agent.exit(False)"))
