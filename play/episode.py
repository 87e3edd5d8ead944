"""The one episode loop: observation → policy → answer → desktop → step row. Expert replay
(`tasks build`), `rollout` and `eval` all play their episodes here, so a row means the same thing
whoever wrote it, and the reward rule is applied in exactly one place (`step_reward`).

The policy is anything with `act(instruction, observation, history) -> Decision` (a chat, an
answer, token ids, log-probs), `episode()` (a context around an episode's steps) and the
attributes `version` and `engine_name` (`policy.agent`).
An episode whose desktop or server is lost, or whose task could not be set up, comes back with
`error` set and is never rewarded as a failure: the stages keep such rows out of training.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from typing import Any

from computerrl.envs.service.client import DesktopEnv, EnvError, EnvLost

OBSERVATION_FIELDS = ("focused_app", "windows", "a11y_tree", "app_info", "last_result")


EVALUATOR_ERROR = "evaluator error: "  # how a trajectory the evaluator could not score is marked (left out)
DESKTOP_LOST = "desktop lost"  # how a trajectory whose desktop or server died is marked (played again elsewhere)


def step_reward(success: bool, action_valid: bool) -> float:
    """The paper's step-level rule: 1 when the trajectory succeeded and this step's action was valid."""
    return float(success and action_valid)


@dataclasses.dataclass
class Trajectory:
    task_id: str
    sample: int
    rows: list[dict[str, Any]]  # step-schema rows (schemas.STEP_FEATURES), rewards filled in
    success: bool = False
    score: float = 0.0
    error: str = ""  # why it was aborted ("" = it was not); its rows are not rewards of the policy
    detail: str = ""  # the evaluator's explanation of the score
    setup_notes: list[str] = dataclasses.field(default_factory=list)  # setup commands that failed
    seconds: float = 0.0

    @property
    def aborted(self) -> bool:
        return bool(self.error)


def play(env: DesktopEnv, policy, task: dict, *, domain: str = "", group_id: str = "", sample: int = 0,
         task_dir: str = "", screenshots: bool = False, reset_holds_batch: bool = True) -> Trajectory:
    """Play one episode of `task` on `env` (which caps it at `env.max_steps`).

    `reset_holds_batch`: the episode is in play from its reset on, so the policy's batches wait for its
    first chat (a moment: a reset takes about a second) rather than leave it for a batch of its own:
    right where episodes start together (rollout, eval). False: from its first chat on (the asynchronous
    loop, where episodes start at any time: the others' steps go on during a reset)."""
    t0 = time.monotonic()
    task_id = task.get("id", "")
    out = Trajectory(task_id, sample, [])
    with contextlib.ExitStack() as in_play:
        if reset_holds_batch:
            in_play.enter_context(policy.episode())
        try:
            obs, reset_info = env.reset(options={"task": task, "task_dir": task_dir})
        except EnvLost as e:
            return _aborted(out, f"{DESKTOP_LOST} at reset: {e}", t0)
        except EnvError as e:
            return _aborted(out, f"setup: {e}", t0)
        if not reset_holds_batch:
            in_play.enter_context(policy.episode())
        out.setup_notes = reset_info.get("setup_notes", [])
        instruction = task.get("instruction", "")
        history: list[tuple[str, str]] = []
        info: dict[str, Any] = {}
        for step in itertools.count():  # until the agent ends it or `env` truncates it (its max_steps)
            decision = policy.act(instruction, obs, history)
            shown = obs
            frame = (decision.frame,) if decision.frame else ()  # a vision model's coordinate frame
            obs, _, terminated, truncated, info = env.step(decision.response, *frame)
            if info.get("aborted"):
                return _aborted(out, f"{DESKTOP_LOST} at step {step}: {info['aborted']}", t0)
            row = {"task_id": task_id, "domain": domain, "group_id": group_id, "sample": sample, "step": step,
                   "instruction": instruction,
                   "observation": json.dumps({k: shown.get(k) for k in OBSERVATION_FIELDS}),
                   "messages": decision.messages, "response": decision.response,
                   "prompt_ids": decision.prompt_ids, "response_ids": decision.response_ids,
                   "behavior_logprobs": decision.logprobs, "entropy": decision.entropy,
                   "action": json.dumps(info["action"]) if info.get("action") is not None else "",
                   "action_valid": bool(info["action_valid"]), "exec_result": info.get("exec_result", ""),
                   "success": False, "score": 0.0, "reward": 0.0, "done": False,
                   "env_id": getattr(env, "env_id", ""), "policy_version": decision.version or policy.version,
                   "engine": decision.engine or policy.engine_name, "error": ""}
            if screenshots:
                row["screenshot"] = {"bytes": shown.get("screenshot") or None, "path": None}
                row["screens"] = decision.screens
            out.rows.append(row)
            history.append((decision.response, info.get("exec_result", ""), shown.get("screenshot")))
            if terminated or truncated:
                break
    if info.get("evaluator_error"):
        return _aborted(out, EVALUATOR_ERROR + info["evaluator_error"], t0)
    out.score = float(info.get("score", 0.0))
    out.detail = info.get("score_detail", "")
    out.success = out.score >= 1.0
    for row in out.rows:
        row.update(success=out.success, score=out.score, reward=step_reward(out.success, row["action_valid"]))
    if out.rows:
        out.rows[-1]["done"] = True
    out.seconds = time.monotonic() - t0
    return out


def _aborted(out: Trajectory, why: str, t0: float) -> Trajectory:
    for row in out.rows:
        row.update(error=why, done=False, reward=0.0)
    out.error, out.seconds = why, time.monotonic() - t0
    return out
