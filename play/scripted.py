"""Plays whose answers are written down: `play_scripted` (`tasks build`'s reference solutions and untouched
starts, `tasks check --run`'s), and `ScriptedPolicy`, fixed answers for the fleet demo, the benchmarks and the
tests.

Their answers are what a model's look like (a thought and one line of Python), and they play through the
one episode loop (`episode.play`), so they go through the same parser, server and desktop as a
trained policy's.
"""

from __future__ import annotations

import contextlib
import dataclasses
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


@dataclasses.dataclass(frozen=True)
class ScriptedPlay:
    """One scripted play: `solution`'s lines are the agent's answers, one per step."""
    name: str  # its journal key
    task: dict
    domain: str
    solution: tuple[str, ...]
    task_dir: str = ""


NO_ACTION = ("Agent.exit(success=True)",)  # "done" before any action: scores the state the setup left


def play_scripted(pool, plays: list[ScriptedPlay], expert_prompt, journal, *, label: str, console=None) -> list:
    """Play every scripted play on the pool's desktops, one worker per desktop, each journaled as it
    finishes (`journal`: data/journal.Journal); the trajectories (journaled ones too) come back in the
    order of `plays`. `expert_prompt`: (Budgets, count_tokens) the expert's chats are built with."""
    from computerrl.data.journal import work_through
    from computerrl.envs.service.client import EnvError
    from computerrl.play.episode import Trajectory, play
    from computerrl.policy.agent import ExpertPolicy

    def one(p: ScriptedPlay) -> dict:
        try:
            with pool.lease() as env:
                t = play(env, ExpertPolicy(p.solution, *expert_prompt), p.task, domain=p.domain,
                         group_id=f"{p.task.get('id', '')}:expert", task_dir=p.task_dir)
        except (EnvError, TimeoutError) as e:
            t = Trajectory(p.task.get("id", ""), 0, [], error=f"env: {e}")
        return dataclasses.asdict(t)

    work_through(journal, [(p.name, p) for p in plays], one, workers=pool.size, label=label, console=console,
                 tally=lambda t: {"scored": t["score"] > 0}, shown=lambda n, seconds: f"scored {n.get('scored', 0)}")
    return [Trajectory(**journal.get(p.name)) for p in plays]
