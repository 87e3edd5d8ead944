"""Client side of the env service: a thin gRPC client and a Gymnasium-style desktop env.

`DesktopEnv` keeps Gymnasium's contract — `reset(*, seed, options) -> (obs, info)`,
`step(action) -> (obs, reward, terminated, truncated, info)`, `close()` safe twice — over one
desktop of one env server. A desktop or server lost mid-episode does not raise: the episode
ends truncated with `info["aborted"]` saying why, because an abort must never be trained on as
a failure. A step or an evaluation the server could not answer for a reason the episode itself may
have made (a reply too large to send, an error inside the server) does not raise either: the
episode ends as a failure, with `info["failed"]` saying why; were it an abort, an agent about to fail
could provoke one to have its episode left out.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from computerrl.data.config import DEFAULT_MAX_STEPS
from computerrl.envs.service.proto import env_pb2, env_pb2_grpc

# Status codes that mean "this episode is gone" (desktop replaced, server dead or hung).
LOST_CODES = (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
              grpc.StatusCode.CANCELLED)
# Status codes of a call the server could not serve for what the episode made: the episode fails.
FAILED_CODES = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class EnvError(RuntimeError):
    """A call the server refused (bad request, unsupported task, wrong token…)."""


class EnvLost(EnvError):
    """The desktop or its server was lost; the episode in flight is aborted."""


class EnvFailed(EnvError):
    """The server could not serve the call, for a reason the episode may have made; the episode fails."""


class EnvClient:
    """One env server. Every call has a deadline, so a hung desktop cannot hang the caller."""

    def __init__(self, address: str, token: str = "", *, timeout_s: float = 60.0):
        self.address, self.timeout_s = address, timeout_s
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = grpc.insecure_channel(address, options=[
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        self._stub = env_pb2_grpc.EnvServiceStub(self._channel)

    def _call(self, method: str, request, timeout_s: float | None = None):
        try:
            return getattr(self._stub, method)(request, timeout=timeout_s or self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            kind = EnvLost if e.code() in LOST_CODES else EnvFailed if e.code() in FAILED_CODES else EnvError
            raise kind(f"{method} on {self.address}: {e.code().name}: {e.details()}") from None
        except ValueError as e:  # the channel was closed under us (the pool replaced this server)
            raise EnvLost(f"{method} on {self.address}: {e}") from None

    def reset(self, desktop: int = 0, task: dict | None = None, *, seed: int = 0, screenshot: bool = False,
              task_dir: str = ""):
        """`task_dir`: the task file's folder, which its file:// sources may read (besides the server's cache)."""
        return self._call("Reset", env_pb2.ResetRequest(desktop=desktop, task_json=json.dumps(task) if task else "",
                                                        seed=seed, screenshot=screenshot, task_dir=task_dir))

    def step(self, action: str, episode: int, desktop: int = 0, *, screenshot: bool = False,
             frame: tuple[int, int] | None = None):
        """`episode`: the id Reset returned (`observation.episode`); `frame`: the size of the frame the
        action's coordinates are in (None: screen pixels)."""
        width, height = frame or (0, 0)
        return self._call("Step", env_pb2.StepRequest(desktop=desktop, action=action, screenshot=screenshot,
                                                      episode=episode, frame_width=width, frame_height=height))

    def evaluate(self, episode: int, desktop: int = 0):
        return self._call("Evaluate", env_pb2.EvaluateRequest(desktop=desktop, episode=episode))

    def health(self, timeout_s: float = 5.0):
        return self._call("Health", env_pb2.HealthRequest(), timeout_s)

    def rebuild(self, desktop: int = 0, why: str = "", timeout_s: float = 120.0):
        """A fresh desktop in place of `desktop` (its episode is lost); its health once rebuilt."""
        return self._call("Rebuild", env_pb2.RebuildRequest(desktop=desktop, why=why), timeout_s)

    def screenshot(self, desktop: int = 0, max_width: int = 0, timeout_s: float = 15.0) -> bytes:
        """A PNG of the desktop as it is now, at most `max_width` wide (0: full size); changes nothing."""
        return self._call("Screenshot", env_pb2.ScreenshotRequest(desktop=desktop, max_width=max_width), timeout_s).png

    def test_api(self, app: str, code: str, tests: str, desktop: int = 0, timeout_s: float = 60.0) -> tuple[dict, bool]:
        """Run a generated API's tests on a desktop (`build-apis`): (the worker's answer, whether it hung)."""
        reply = self._call("TestApi", env_pb2.TestApiRequest(desktop=desktop, app=app, code=code, tests=tests,
                                                             timeout_s=timeout_s), timeout_s + 60)
        return json.loads(reply.answer_json), reply.hung

    def shutdown(self) -> None:
        """Ask the server to stop its desktops and exit."""
        self._call("Close", env_pb2.CloseRequest(), 10.0)

    def close(self) -> None:
        self._channel.close()


def observation_dict(obs) -> dict[str, Any]:
    return {"screenshot": obs.screenshot, "a11y_tree": obs.a11y_tree, "focused_app": obs.focused_app,
            "app_info": obs.app_info, "last_result": obs.last_result,
            "windows": [{"id": w.id, "title": w.title, "app": w.app, "focused": w.focused} for w in obs.windows]}


class DesktopEnv:
    """One desktop of an env server, with the Gymnasium contract.

    `reset(options={"task": {...}, "task_dir": "..."})` starts an episode (no task = a clean desktop);
    `info["setup_notes"]` lists the task's setup commands that failed. The agent's
    `Agent.exit(...)` or a task success ends it as terminated; `max_steps` ends it as truncated.
    """

    def __init__(self, client: EnvClient, desktop: int = 0, *, max_steps: int = DEFAULT_MAX_STEPS,
                 screenshot: bool = False):
        self.client, self.desktop, self.max_steps, self.screenshot = client, desktop, max_steps, screenshot
        self.steps = 0
        self.episode = 0  # id the server gave the running episode
        self.aborted = ""  # why the current episode was lost ("" = it was not)
        self._last_obs: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        task = (options or {}).get("task")
        self.steps, self.aborted = 0, ""
        try:
            obs = self.client.reset(self.desktop, task, seed=seed or 0, screenshot=self.screenshot,
                                    task_dir=str((options or {}).get("task_dir", "")))
        except EnvLost as e:  # the pool counts it against the desktop
            self.aborted = str(e)
            raise
        self.episode = obs.episode
        self._last_obs = observation_dict(obs)
        return self._last_obs, {"task_id": (task or {}).get("id", ""), "episode": self.episode,
                                "setup_notes": list(obs.setup_notes)}

    def step(self, action: str, frame: tuple[int, int] | None = None) -> tuple[dict, float, bool, bool, dict]:
        """`frame`: the size of the frame the action's coordinates are in (a vision model's), else screen pixels."""
        self.steps += 1
        try:
            r = self.client.step(action, self.episode, self.desktop, screenshot=self.screenshot, frame=frame)
            truncated = not r.done and self.steps >= self.max_steps
            score = self.client.evaluate(self.episode, self.desktop) if r.done or truncated else None
        except EnvLost as e:
            self.aborted = str(e)
            return self._last_obs, 0.0, False, True, {"aborted": self.aborted, "action_valid": False}
        except EnvFailed as e:
            return self._last_obs, 0.0, True, False, {
                "action_valid": False, "action": None, "exec_result": f"The step failed on the server: {e}",
                "failed": str(e), "score": 0.0, "score_detail": f"the episode failed on the server: {e}", "aborted": ""}
        self._last_obs = observation_dict(r.observation)
        info = {"action_valid": r.action_valid, "action": json.loads(r.action_json) if r.action_json else None,
                "exec_result": r.exec_result, "exit_success": r.exit_success, "elapsed_s": r.elapsed_s,
                "aborted": ""}
        reward = 0.0
        if score is not None and score.configured:
            reward = info["score"] = score.score
            info["score_detail"] = score.detail
            if score.agent_code:  # the evaluation ran a file the agent can rewrite: its score is the agent's word
                info["agent_code"] = score.agent_code
            if score.evaluator_error:  # not the agent's doing: the episode is left out
                info["evaluator_error"] = score.evaluator_error
        return self._last_obs, reward, r.done, truncated, info

    def close(self) -> None:
        """Release the env (the desktop itself belongs to its server); safe to call twice."""
