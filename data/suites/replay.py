"""Replay reference solutions on real desktops: keep the tasks that score 1.0, record the steps.

Every solution line goes through the same path as a model's answer (`scripted.response` wraps it
as "<think></think> + code", the server parses and runs it), so a kept task is proven solvable by
the action space the agent has. The replays are the expert trajectories for behaviour cloning,
written with the step schema (`schemas.STEP_FEATURES`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable

from computerrl.data.suites import Instance
from computerrl.envs.client import EnvError
from computerrl.envs.scripted import response

A11Y_BUDGET = 12_000  # characters of the a11y tree kept in a step's placeholder user message
EXPERT = "expert"  # policy_version of reference-solution steps


@dataclasses.dataclass
class Replay:
    task_id: str
    kept: bool
    score: float
    reason: str  # why it was dropped: "setup: …", "score 0.0: <detail>", "aborted: …" ("" when kept)
    steps: list[dict[str, Any]]  # step-schema rows (empty when dropped)
    seconds: float = 0.0


def replay_one(env, inst: Instance, *, solution: list[str] | None = None) -> Replay:
    """Play one instance's solution (default: its reference solution) on a leased DesktopEnv."""
    import time

    t0 = time.monotonic()
    codes = inst.solution if solution is None else solution
    try:
        obs, _ = env.reset(options={"task": inst.task})
    except EnvError as e:
        return Replay(inst.task_id, False, 0.0, f"setup: {e}", [], time.monotonic() - t0)
    rows, score, detail, terminated = [], 0.0, "", False
    for i, code in enumerate(codes):
        text = response(code)
        # Minimal placeholder chat until the policy's prompt builder exists: the instruction and
        # the observation the step was taken on.
        messages = [{"role": "system", "content": inst.task["instruction"]},
                    {"role": "user", "content": obs["a11y_tree"][:A11Y_BUDGET]}]
        obs, reward, terminated, truncated, info = env.step(text)
        if info.get("aborted"):
            return Replay(inst.task_id, False, 0.0, f"aborted: {info['aborted']}", [], time.monotonic() - t0)
        rows.append({"task_id": inst.task_id, "domain": inst.domain, "group_id": f"{inst.task_id}:{EXPERT}",
                     "sample": 0, "step": i, "messages": messages, "response": text,
                     # No model sampled these answers, so there are no token ids or behaviour logprobs.
                     "prompt_ids": [], "response_ids": [], "behavior_logprobs": [],
                     "action": json.dumps(info["action"]) if info.get("action") is not None else "",
                     "action_valid": bool(info["action_valid"]), "exec_result": info.get("exec_result", ""),
                     "success": False, "score": 0.0, "reward": 0.0, "done": False,
                     "env_id": getattr(env, "env_id", ""), "policy_version": EXPERT, "error": ""})
        if terminated or truncated:
            score, detail = float(info.get("score", reward)), info.get("score_detail", "")
            break
    seconds = time.monotonic() - t0
    if not terminated:
        return Replay(inst.task_id, False, score, f"did not finish: {len(rows)} steps, no exit", [], seconds)
    if score < 1.0:
        return Replay(inst.task_id, False, score, f"score {score:g}: {detail}".strip(), [], seconds)
    for row in rows:  # GRPO's step reward: the trajectory succeeded and this action was valid
        row.update(success=True, score=score, reward=float(row["action_valid"]))
    rows[-1]["done"] = True
    return Replay(inst.task_id, True, score, "", rows, seconds)


def replay_all(pool, instances: list[Instance], *, workers: int | None = None,
               on_done: Callable[[Replay], None] | None = None) -> list[Replay]:
    """Replay every instance on the pool's desktops, `workers` at a time (default: one per desktop).
    Results come back in the order of `instances`."""
    results: dict[str, Replay] = {}
    lock = threading.Lock()

    def run(inst: Instance) -> Replay:
        try:
            with pool.lease() as env:
                return replay_one(env, inst)
        except (EnvError, TimeoutError) as e:
            return Replay(inst.task_id, False, 0.0, f"env: {e}", [])

    with ThreadPoolExecutor(max_workers=workers or pool.size) as ex:
        futures = [ex.submit(run, inst) for inst in instances]
        for f in as_completed(futures):
            r = f.result()
            with lock:
                results[r.task_id] = r
            if on_done:
                on_done(r)
    return [results[i.task_id] for i in instances]


def step_rows(replays: list[Replay]) -> list[dict[str, Any]]:
    return [row for r in replays if r.kept for row in r.steps]
