"""The env server: a gRPC `EnvService` hosting one or more desktops of this machine.

    python -m computerrl.envs.service.server --port 0 --desktops 1      # prints "LISTENING <port>"

Every desktop runs in a sandbox of its own (envs/desktop/sandbox.py): what the agent and the tasks run
cannot touch this machine. It binds to loopback unless told otherwise; bound wider it refuses to start without a shared
token (`COMPUTERRL_ENV_TOKEN`), which every call must then carry. A desktop that dies (Xvfb,
D-Bus, soffice…), gets stuck, or fails a call is rebuilt alone, the others of the server carrying
on. The episode it was serving ends as a failure: everything of a desktop is within the agent's
reach (its apps, its X clients, its memory), so it may have broken it on purpose, and a lost
episode is left out of training and of the success rates. Episodes are lost (gRPC ABORTED,
recorded as aborted, never as failures) only with the server itself, or at a Reset. No call outlives
its client: one still running ANSWER_S before the client's deadline has its desktop killed by the
watchdog, which ends whatever it waits on, so it answers in time (the episode failed). A rebuilt
desktop must pass a clean Reset before it serves again; Health reports one that cannot, without
ever waiting on a desktop. Reset runs a
task's setup steps (`tasks/setup.py`, files from `--cache`), Evaluate its evaluator, each
within a time budget that keeps it inside the client's deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import hmac
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

from computerrl.apis import generated
from computerrl.apis.agent import on_screen
from computerrl.apis.app_api import ApiError
from computerrl.apis.parser import InvalidAction, parse_action
from computerrl.envs.desktop.actions import ActionError, GuiActions
from computerrl.envs.desktop.actions import app_of
from computerrl.envs.desktop.cgroup import Cgroup
from computerrl.envs.desktop.desktop import Desktop, Observation
from computerrl.envs.desktop.office import FACTORIES
from computerrl.envs.desktop.sandbox import Limits
from computerrl.envs.service.proto import env_pb2, env_pb2_grpc
from computerrl.envs.service.spare import RESETS, Spare
from computerrl.tasks import catalog  # noqa: F401 - registers the steps, getters and metrics
from computerrl.tasks.evaluate import EvaluatorError, evaluate
from computerrl.tasks.setup import Budget, SetupError, missing_sources, run_steps
from computerrl.tasks.task import Task, TaskError, parse_task

log = logging.getLogger("computerrl.envs.service.server")
TOKEN_ENV = "COMPUTERRL_ENV_TOKEN"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a 4K PNG screenshot plus a full tree fits many times over
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
RETRY_S = 10.0  # pause after a desktop failed to start, before the next try
TEST_API_S = 60.0  # default time for a generated API's tests, all together
SCREENSHOT_WAIT_S = 2.0  # how long a Screenshot waits for the call running on its desktop
ANSWER_S = 15.0  # a call still running this long before the client's deadline has its desktop killed
CALL_MIN_S, CALL_MAX_S = 20.0, 600.0  # bounds on how long a call may hold its desktop before that
SERVER_MEMORY_MB = 4096  # the server's own process (`--server-memory-mb`); its desktops have caps of their own
# Every reply is bounded, whatever the agent made of its desktop (a tree of a million cells, an API result of
# megabytes; window titles are cut where X is read): a reply over the client's limit would not end its
# episode as a step, it would abort it, and an agent must not be able to choose that.
TREE_CHARS = 256_000  # the paper's prompt keeps ~32,000 characters of it
TEXT_CHARS = 64_000  # app info, an action's result, a score's detail, a setup note


def bounded(text: str, chars: int = TEXT_CHARS) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


class Slot:
    """One desktop of the server with what the server knows about it."""

    def __init__(self, index: int, workdir: Path, desktop_options: dict, spare: bool = False):
        self.index, self.workdir, self.options = index, workdir, desktop_options
        self.desktop: Desktop | None = None
        # the pristine desktop a reset swaps in (envs/service/spare.py); None: every reset is in place
        self.spare = Spare(desktop_options) if spare else None
        self.folder = workdir.resolve()  # where the slot's own desktop lives; its spare is built in the other
        self.restored = self.in_place = 0  # resets that swapped in the spare; resets done in place instead
        self.lock = threading.Lock()  # one call at a time per desktop
        self.shooting = threading.Lock()  # one Screenshot at a time
        self.problem = "starting"  # why there is no usable desktop ("" when there is)
        self.closing = False  # the server is stopping: build nothing more
        self.episode = 0  # id of the running episode (0 = none)
        self.last_episode = 0  # id of the latest episode, running or over
        self.ended = ""  # why the desktop of the latest episode broke, if it did: the episode failed
        self.episodes = self.replacements = 0
        self.retry_at = 0.0  # monotonic time before which a failed build is not retried
        self.health = "starting"  # what the watchdog last saw ("" = healthy); Health reports it, never waiting
        self.task: Task | None = None  # the running (or latest) episode's task
        self.exit_success: bool | None = None  # what the agent claimed in Agent.exit (None: never exited)
        self.step = self.steps = 0  # steps of the latest episode; steps served in all
        self.reset_s = self.step_s = 0.0  # how long the latest Reset and Step took
        self.last_error = ""  # the latest thing that went wrong here, for whoever watches the fleet
        self.deadline = 0.0  # monotonic time by which the call holding the desktop must be over (0: no call)
        self.overran = ""  # why the watchdog killed the desktop under the call in flight ("" = it did not)

    def build(self, network: bool | None = None) -> None:
        """(Re)build the desktop and check that it resets; on failure the slot stays empty with the
        reason as its problem. `network`: whether its sandbox has network (None: the server's option)."""
        if self.closing:
            raise RuntimeError("the server is stopping")
        if self.desktop is not None:
            self.desktop.close()
            self.desktop = None
            self.replacements += 1
        self.problem = self.health = "starting"
        options = {**self.options, **({} if network is None else {"network": network})}
        try:
            desktop = Desktop(self.folder, **options).start()
        except Exception as e:
            self.problem = self.health = f"failed to start: {e}"
            raise
        try:
            desktop.reset()
        except Exception as e:
            desktop.close()
            self.problem = self.health = f"cannot reset: {type(e).__name__}: {e}"
            raise
        self.desktop, self.gui = desktop, GuiActions(desktop)
        self.problem = self.health = ""
        if self.spare is not None:
            self.spare.refill(self.other_folder())

    def other_folder(self) -> Path:
        """The folder the spare is built in: not the one of the slot's desktop."""
        first = self.workdir.resolve()
        return first.with_name(first.name + "-spare") if self.folder == first else first

    def fresh(self) -> None:
        """A pristine desktop for the next episode: the spare swapped in when one is ready (the desktop it
        replaces is closed in the background, and another spare built in its folder), else this one reset in
        place. Caller holds the lock."""
        old = self.desktop
        # a spare still being built is waited for, within half what is left of the call (the rest: the task's setup)
        wait_s = (self.deadline - time.monotonic()) / 2 if self.deadline else CALL_MAX_S
        spare = self.spare.take(old.network, max(0.0, wait_s)) if self.spare is not None else None
        if spare is None:
            old.reset()
            self.in_place += 1
            if self.spare is not None:
                self.spare.refill(self.other_folder())  # after a failed build: try again (none is in flight)
            return
        spare.task_dir, spare.file_cache = old.task_dir, old.file_cache  # the episode's, set before its reset
        self.desktop, self.gui, self.folder = spare, GuiActions(spare), spare.workdir
        self.restored += 1
        self.spare.refill(old.workdir, old)

    def replace_if_dead(self) -> str:
        """Rebuild a dead (or never built) desktop; returns what was wrong. Caller holds the lock."""
        why = self.overran or (self.desktop.health() if self.desktop is not None else self.problem)
        self.health = why
        if why:
            self.replace(why)
        return why

    def overrun(self) -> None:
        """Called by the watchdog while a call holds the desktop: past its deadline, everything of the
        desktop is killed, which ends whatever the call waits on (an office that does not answer, an app
        the agent stopped…), so the call answers within its client's deadline: the episode is a failure,
        never lost. What runs in a desktop is the agent's to break; the server's own loss alone aborts."""
        if self.deadline and time.monotonic() > self.deadline and not self.overran and self.desktop is not None:
            self.overran = self.health = "a call ran past its deadline; everything in the desktop was killed"
            log.warning("desktop %d: %s", self.index, self.overran)
            self.desktop.kill()

    def replace(self, why: str) -> None:
        """Rebuild the desktop, dead or not (one that failed a reset looks alive). Caller holds the lock."""
        if self.last_episode and not self.ended:  # also after Agent.exit: its Evaluate must not score a fresh desktop
            self.ended, self.episode = why, 0
        if self.closing or time.monotonic() < self.retry_at or self.overran:
            return  # (overran: the call answers now, within its client's deadline; the watchdog rebuilds)
        if self.desktop is not None:
            log.warning("desktop %d: %s; replacing it", self.index, why)
            self.last_error = f"rebuilt: {why}"
        try:
            self.build()
        except Exception:  # noqa: BLE001 - the slot reports it; the watchdog tries again later
            log.exception("desktop %d: no working replacement", self.index)
            self.retry_at = time.monotonic() + RETRY_S


def scaled_png(png: bytes, max_width: int) -> bytes:
    """The PNG at most `max_width` pixels wide (a thumbnail), its aspect kept."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png))
    if image.width <= max_width:
        return png
    image.thumbnail((max_width, image.height * max_width // image.width))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def observation_message(obs: Observation) -> env_pb2.Observation:
    return env_pb2.Observation(
        screenshot=obs.screenshot, a11y_tree=bounded(obs.a11y_tree, TREE_CHARS), focused_app=obs.focused_app,
        app_info=bounded(obs.app_info), last_result=bounded(obs.last_result),
        windows=[env_pb2.Window(id=w.hex_id, title=w.title, app=app_of(w), focused=w.focused) for w in obs.windows])


class EnvServicer(env_pb2_grpc.EnvServiceServicer):
    def __init__(self, slots: list[Slot], *, settle_s: float, on_close=None):
        self.slots, self.settle_s, self.on_close = slots, settle_s, on_close
        self.started = time.monotonic()

    @staticmethod
    @contextlib.contextmanager
    def _hold(slot: Slot, context):
        """The desktop's lock for one call, with the deadline the watchdog holds it to (`Slot.overrun`):
        the client's own less the time to answer, or CALL_MAX_S when the client set none."""
        with slot.lock:
            left = context.time_remaining()
            budget = CALL_MAX_S if left is None else min(max(left - ANSWER_S, CALL_MIN_S), CALL_MAX_S)
            slot.deadline, slot.overran = time.monotonic() + budget, ""
            try:
                yield
            finally:
                slot.deadline, slot.overran = 0.0, ""

    def _slot(self, index: int, context) -> Slot:
        if index >= len(self.slots):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no desktop {index}; this server has {len(self.slots)}")
        return self.slots[index]

    def _ready(self, slot: Slot, context) -> None:
        """Under the slot's lock: a live desktop, or the call ends UNAVAILABLE (an abort, not a failure)."""
        slot.replace_if_dead()
        if slot.desktop is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"desktop {slot.index} is unavailable: {slot.problem}")

    def _in_episode(self, slot: Slot, episode: int, context) -> None:
        """The call belongs to the running episode; one a later Reset took over ends ABORTED (the caller
        first answers for an episode its desktop's breakdown ended: see `_broke`)."""
        if episode and episode == slot.episode:
            return
        if episode and episode == slot.last_episode:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the episode is over (Agent.exit): call Reset")
        context.abort(grpc.StatusCode.ABORTED if episode else grpc.StatusCode.FAILED_PRECONDITION,
                      f"episode {episode} does not run on desktop {slot.index}: a later Reset started another"
                      if episode else "no episode named: call Reset first and pass its episode id")

    def Reset(self, request, context):
        slot = self._slot(request.desktop, context)
        with self._hold(slot, context):
            start = time.perf_counter()
            self._ready(slot, context)
            task = self._task(request.task_json, context)
            slot.episode = slot.last_episode = 0  # whatever happens next, the previous episode is over
            slot.task = None
            self._prepare(slot, task, request.task_dir, context)
            budget = Budget.of()  # the setup steps of both attempts together
            for attempt in range(2):  # no episode runs yet: a desktop that fails now is simply replaced
                try:
                    slot.fresh()
                    if task is not None:
                        run_steps(slot.desktop, task.config, budget)
                    obs = slot.desktop.observe(screenshot=request.screenshot)
                    break
                except SetupError as e:  # the task's fault, unless the desktop died under it
                    why = slot.desktop.health()
                    if not why:
                        self._clean(slot)
                        slot.last_error = f"task {task.id}: setup failed: {e}"
                        context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"task setup failed: {e}")
                except Exception as e:  # noqa: BLE001 - dead, stuck or unable to reset: rebuilt either way
                    why = slot.desktop.health() or f"reset failed: {type(e).__name__}: {e}"
                slot.replace(why)
                if attempt or slot.desktop is None:
                    context.abort(grpc.StatusCode.ABORTED, f"desktop {slot.index} could not reset ({why}); "
                                                           f"{'it was rebuilt' if slot.desktop else slot.problem}")
                self._prepare(slot, task, request.task_dir, context)
            slot.task, slot.exit_success = task, None
            slot.episode = slot.last_episode = secrets.randbits(63) or 1
            slot.ended = ""
            slot.episodes += 1
            slot.step, slot.reset_s = 0, time.perf_counter() - start
            message = observation_message(obs)
            message.episode = slot.episode
            message.setup_notes.extend(bounded(n) for n in slot.desktop.setup_notes[:32])
            return message

    def _clean(self, slot: Slot) -> None:
        """After a setup that failed: a clean desktop again, so nothing of it stays behind."""
        try:
            slot.desktop.reset()
        except Exception as e:  # noqa: BLE001
            slot.replace(f"reset failed after a failed setup: {type(e).__name__}: {e}")

    def _prepare(self, slot: Slot, task: Task | None, task_dir: str, context) -> None:
        """Before a reset: the desktop the task needs (network or not), and every file it copies in at hand."""
        want = bool(slot.options.get("network")) or bool(task is not None and task.network)
        if slot.desktop.network != want:  # the sandbox's network is fixed when it starts: start another
            try:
                slot.build(network=want)
            except Exception as e:  # noqa: BLE001
                context.abort(grpc.StatusCode.UNAVAILABLE, f"desktop {slot.index} could not restart: {e}")
        slot.desktop.task_dir = Path(task_dir).resolve() if task_dir else None
        if task is not None:
            problems = missing_sources(slot.desktop, task.config + task.evaluator.get("postconfig", []), task.getters)
            if problems:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"task {task.id} cannot be set up: "
                                                                   + "; ".join(problems))

    def Step(self, request, context):
        slot = self._slot(request.desktop, context)
        with self._hold(slot, context):
            start = time.perf_counter()
            self._ready(slot, context)
            if self._broke(slot, request.episode):
                return self._broken_step(slot)
            self._in_episode(slot, request.episode, context)
            action = parse_action(request.action)
            if request.frame_width and request.frame_height and not isinstance(action, InvalidAction):
                action = on_screen(action, (request.frame_width, request.frame_height),
                                   (slot.desktop.width, slot.desktop.height))
            done = exit_success = False
            if isinstance(action, InvalidAction):
                result = action.message  # nothing runs
            else:
                try:
                    result = self._execute(slot, action)
                except ActionError as e:
                    result = f"Action failed: {e}"
                except Exception as e:  # noqa: BLE001
                    if slot.desktop.health():
                        self._failed(slot, context, e)
                        return self._broken_step(slot)
                    log.exception("desktop %d: %s failed", slot.index, action.code)
                    result = f"Action failed: {type(e).__name__}: {e}"
                done = action.api == "Agent" and action.name == "exit"
                exit_success = done and bool(action.args.get("success"))
            slot.desktop.last_result = result
            # The a11y reads queue behind the input the app has yet to handle (one main loop), so
            # the tree is current without waiting; this short pause is for the repaint.
            time.sleep(self.settle_s)
            try:
                obs = slot.desktop.observe(screenshot=request.screenshot)
                if slot.desktop.health():  # died during the step: what we observed is not the episode
                    raise RuntimeError("desktop died during the step")
            except Exception as e:  # noqa: BLE001
                self._failed(slot, context, e)
                return self._broken_step(slot)
            if done:
                slot.episode, slot.exit_success = 0, exit_success
            slot.step, slot.steps, slot.step_s = slot.step + 1, slot.steps + 1, time.perf_counter() - start
            return env_pb2.StepResult(
                observation=observation_message(obs), action_valid=not isinstance(action, InvalidAction),
                action_json="" if isinstance(action, InvalidAction) else action.to_json(), exec_result=bounded(result),
                done=done, exit_success=exit_success, elapsed_s=slot.step_s)

    def _task(self, task_json: str, context) -> Task | None:
        if not task_json:
            return None
        try:
            task = parse_task(json.loads(task_json))
        except (ValueError, TaskError) as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad task: {e}")
        except RecursionError:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad task: JSON nested too deeply to read")
        missing = task.unsupported()
        if missing:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"task {task.id} needs {', '.join(missing)}, "
                                                            "which this env server does not support")
        return task

    def _execute(self, slot: Slot, action) -> str:
        if action.api == "Agent":
            return slot.gui.run(action.name, action.args)
        try:
            return slot.desktop.run_api(action.api, action.name, action.args)
        except ApiError as e:
            raise ActionError(str(e)) from None

    @staticmethod
    def _broke(slot: Slot, episode: int) -> bool:
        """Whether this episode's desktop broke: it ends as a failure (were it lost, an agent about to
        fail could kill its own office and have the episode left out of training and of the rates)."""
        return bool(episode) and episode == slot.last_episode and bool(slot.ended)

    @staticmethod
    def _broken_step(slot: Slot):
        return env_pb2.StepResult(observation=env_pb2.Observation(), action_valid=False, done=True,
                                  exec_result=f"The desktop broke ({slot.ended}): the episode is over, as a failure")

    @staticmethod
    def _broken_score(slot: Slot):
        return env_pb2.Score(score=0.0, configured=slot.task is not None,
                             detail=f"the desktop broke during the episode ({slot.ended}): a failure")

    def _failed(self, slot: Slot, context, error: Exception):
        """The call failed. Its desktop is broken (dead, or alive but unable to serve: a hung app, an X
        server an agent's client grabbed…): it is rebuilt, and the caller ends the episode as a failure
        (`_broken_step`, `_broken_score`); with no episode running, the call ends ABORTED."""
        why = slot.replace_if_dead()
        if not why:
            log.error("desktop %d: %s on a live desktop; replacing it", slot.index, error, exc_info=error)
            why = f"{type(error).__name__}: {error}"
            slot.replace(why)
        if not slot.ended:
            context.abort(grpc.StatusCode.ABORTED, f"desktop {slot.index} broke ({why}); it was replaced")

    def Evaluate(self, request, context):
        slot = self._slot(request.desktop, context)
        with self._hold(slot, context):
            slot.replace_if_dead()
            if self._broke(slot, request.episode):
                return self._broken_score(slot)
            if request.episode != slot.last_episode or slot.ended:
                self._ready(slot, context)
                self._in_episode(slot, request.episode, context)  # aborts with the reason
            if slot.task is None:
                return env_pb2.Score(score=0.0, configured=False, detail="the episode has no task, so no evaluator")
            try:
                score, detail = evaluate(slot.desktop, slot.task, slot.exit_success)
            except EvaluatorError as e:
                why = bounded(str(e))
                return env_pb2.Score(score=0.0, configured=True, detail=why, evaluator_error=why)
            except Exception as e:  # noqa: BLE001
                # The desktop as the episode left it defeated the evaluation (a window the postconfig wants
                # was closed, the task's own script the agent rewrote broke the sandbox, steps ran past
                # their budget…): as on OSWorld, the task is not done. A desktop it broke is replaced.
                if not isinstance(e, SetupError):
                    log.exception("desktop %d: evaluation failed", slot.index)
                why = slot.replace_if_dead()
                score, detail = 0.0, f"evaluation failed: {e}" + (f"; the desktop broke ({why})" if why else "")
            return env_pb2.Score(score=score, configured=True, detail=bounded(detail),
                                 agent_code="; ".join(slot.task.agent_code()))

    def Health(self, request, context):
        desktops = []
        for s in self.slots:  # as the watchdog last saw them: a stuck desktop must not stall the answer
            problem = s.problem or s.health
            desktops.append(env_pb2.DesktopHealth(
                desktop=s.index, healthy=not problem, problem=problem, episodes=s.episodes,
                replacements=s.replacements, task_id=s.task.id if s.task else "", step=s.step,
                in_episode=bool(s.episode), steps=s.steps, reset_s=s.reset_s, step_s=s.step_s,
                last_error=s.last_error, restored=s.restored, reset_in_place=s.in_place,
                spare=s.spare.problem if s.spare is not None else ""))
        return env_pb2.HealthReply(healthy=all(d.healthy for d in desktops), desktops=desktops, pid=os.getpid(),
                                   uptime_s=time.monotonic() - self.started)

    def Screenshot(self, request, context):
        slot = self._slot(request.desktop, context)
        # One at a time per desktop, each waiting briefly behind the desktop's call: watchers must never
        # take the server's workers from the episodes (or from the supervisor's Health).
        if not slot.shooting.acquire(blocking=False):
            context.abort(grpc.StatusCode.UNAVAILABLE, f"a screenshot of desktop {slot.index} is being taken")
        try:
            if not slot.lock.acquire(timeout=SCREENSHOT_WAIT_S):
                context.abort(grpc.StatusCode.UNAVAILABLE, f"desktop {slot.index} is busy")
            try:
                if slot.desktop is None:
                    context.abort(grpc.StatusCode.UNAVAILABLE, f"desktop {slot.index} is unavailable: {slot.problem}")
                png = slot.desktop.screenshot()
            finally:
                slot.lock.release()
        finally:
            slot.shooting.release()
        return env_pb2.ScreenshotReply(png=scaled_png(png, request.max_width) if request.max_width else png)

    def Rebuild(self, request, context):
        slot = self._slot(request.desktop, context)
        with slot.lock:
            slot.retry_at = 0.0  # asked for: try now, whatever the watchdog's back-off says
            slot.replace(f"a fresh desktop was asked for ({request.why or 'no reason given'})")
            problem = slot.problem or slot.health
            return env_pb2.DesktopHealth(desktop=slot.index, healthy=not problem, problem=problem,
                                         episodes=slot.episodes, replacements=slot.replacements)

    def TestApi(self, request, context):
        slot = self._slot(request.desktop, context)
        with self._hold(slot, context):
            self._ready(slot, context)
            slot.episode = slot.last_episode = 0  # a test is no episode: whatever ran here is over
            slot.task = None
            if request.app not in FACTORIES:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no app {request.app!r} ({', '.join(FACTORIES)})")
            hung = False
            try:
                slot.desktop.reset()
                answer = slot.desktop.run_generated(
                    generated.worker_request(request.app, request.code, mode="test", tests=request.tests),
                    request.timeout_s or TEST_API_S)
            except TimeoutError as e:
                hung, answer = True, {"ok": False, "error": str(e)}
            except Exception as e:  # noqa: BLE001 - the desktop broke under the code: rebuilt, the build goes on
                answer = {"ok": False, "error": f"the desktop broke: {type(e).__name__}: {e}"}
                slot.replace(f"generated code broke it: {e}")
            if hung or answer.get("error", "").startswith("the worker died"):
                self._clean(slot)  # a wedged or half-used office: restarted now, not under the next test
            return env_pb2.TestApiResult(answer_json=json.dumps(answer), hung=hung)

    def Close(self, request, context):
        if self.on_close is not None:
            threading.Thread(target=self.on_close, daemon=True).start()
        return env_pb2.CloseReply()


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects every call that does not carry `authorization: Bearer <token>`."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        given = dict(handler_call_details.invocation_metadata or ()).get("authorization", "")
        if hmac.compare_digest(given.encode(), self._expected):  # constant time: no guessing by timing
            return continuation(handler_call_details)
        return self._deny


class EnvServer:
    """Owns the gRPC server, the desktops and the watchdog that replaces dead ones."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, desktops: int = 1, workdir: Path | None = None,
                 token: str = "", settle_s: float = 0.03, watchdog_s: float = 1.0, exit_with_parent: bool = False,
                 reset: str = "in-place", **desktop_options):
        if host not in LOOPBACK and not token:
            raise ValueError(f"refusing to listen on {host} without a token: set {TOKEN_ENV}")
        if reset not in RESETS:
            raise ValueError(f"reset {reset!r}: one of {', '.join(RESETS)}")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="computerrl-env-"))
        self.slots = [Slot(i, self.workdir / f"desktop-{i}", desktop_options, spare=reset == "spare")
                      for i in range(desktops)]
        self.watchdog_s = watchdog_s
        # The process that started us (spawn-envs, tasks build): once it is gone, so are we.
        self.parent = os.getppid() if exit_with_parent else 0
        self.stopped = threading.Event()  # set when stopping begins
        self.done = threading.Event()  # set when every desktop is closed
        self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4 + 2 * desktops),
                                interceptors=[TokenInterceptor(token)] if token else [],
                                options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                                         ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        env_pb2_grpc.add_EnvServiceServicer_to_server(
            EnvServicer(self.slots, settle_s=settle_s, on_close=self.stop), self.grpc)
        self.port = self.grpc.add_insecure_port(f"{host}:{port}")
        if self.port == 0:
            raise OSError(f"cannot bind {host}:{port}")

    def start(self) -> "EnvServer":
        self.grpc.start()
        threading.Thread(target=self._watch, daemon=True, name="desktop-watchdog").start()
        return self

    def _watch(self) -> None:
        # The first builds happen here, so the port answers Health (as "starting") at once.
        while not self.stopped.is_set():
            if self.parent and os.getppid() != self.parent:  # orphaned: whoever owned us died
                log.warning("the process that started this server (pid %d) is gone; stopping", self.parent)
                threading.Thread(target=self.stop, daemon=True).start()
                return
            for slot in self.slots:
                # A busy slot's call checks its desktop itself; it is only held to its deadline.
                if not self.stopped.is_set() and slot.lock.acquire(blocking=False):
                    try:
                        slot.replace_if_dead()
                    finally:
                        slot.lock.release()
                else:
                    slot.overrun()
            self.stopped.wait(self.watchdog_s)

    def stop(self) -> None:
        """Stop serving, then close every desktop (after the call in flight on it); safe twice."""
        if self.stopped.is_set():
            self.done.wait()
            return
        self.stopped.set()
        self.grpc.stop(grace=1.0).wait()
        for slot in self.slots:
            # Every call has deadlines inside (UNO, xdotool, AT-SPI), so the lock comes back.
            locked = slot.lock.acquire(timeout=120)
            try:
                slot.closing = True
                if slot.spare is not None:
                    slot.spare.close()
                if slot.desktop is not None:
                    slot.desktop.close()
            finally:
                if locked:
                    slot.lock.release()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.done.set()

    def wait(self) -> None:
        """Block until stop() has closed every desktop."""
        self.done.wait()


def cap_own_memory(mb: int) -> None:
    """This process in a cgroup of its own, capped: whatever an agent makes the server hold (it reads
    files in pieces, answers are bounded), the host's memory is not the server's to take. Its desktops
    run in cgroups of their own (`Limits.memory_mb`)."""
    cgroup, why_not = Cgroup.make(f"computerrl-{os.getpid()}-server", mb << 20)
    if cgroup is None:
        log.warning("this server's own memory is not capped (no writable cgroup: %s)", why_not)
        return
    cgroup.join()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback)")
    p.add_argument("--port", type=int, default=0, help="0 = any free port (printed)")
    p.add_argument("--desktops", type=int, default=1, help="desktops hosted by this server")
    p.add_argument("--workdir", type=Path, default=None, help="state folder (default: a temp dir, removed at exit)")
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--settle-s", type=float, default=0.03, help="pause between an action and its observation")
    p.add_argument("--cache", type=Path, default=None,
                   help="file cache for tasks' downloads: a folder with index.json mapping URL -> file")
    p.add_argument("--reset", choices=list(RESETS), default="in-place",
                   help="in-place: the desktop's processes are killed and its folders emptied (its X server and "
                        "buses run on); spare: each reset swaps in a pristine desktop built in the background, its "
                        "office running (a new X server and buses too; more memory and CPU a reset, less waiting "
                        "where a core is free to build it)")
    p.add_argument("--network", action="store_true",
                   help="desktops get outbound network, each in a namespace of its own without the host's "
                        "loopback (default: none, unless a task asks for it)")
    defaults = Limits()
    p.add_argument("--home-mb", type=int, default=defaults.home_mb, help="size of each desktop's /home/user (RAM)")
    p.add_argument("--tmp-mb", type=int, default=defaults.tmp_mb, help="size of each desktop's /tmp (RAM)")
    p.add_argument("--shm-mb", type=int, default=defaults.shm_mb, help="size of each desktop's /dev/shm (RAM)")
    p.add_argument("--max-processes", type=int, default=defaults.processes,
                   help="processes and threads each desktop's user may have")
    p.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                   help="memory cap of each desktop, its RAM folders included (a cgroup: needs root; 0 = none)")
    p.add_argument("--server-memory-mb", type=int, default=SERVER_MEMORY_MB,
                   help="memory cap of this server's own process, apart from its desktops' (a cgroup: needs root; "
                        "0 = none)")
    p.add_argument("--apis", type=Path, action="append", default=[],
                   help="a `build-apis` folder: its APIs join the built-in ones (run inside each sandbox)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop when the process that started this server exits (backends pass it)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.server_memory_mb:
        cap_own_memory(args.server_memory_mb)
    for folder in args.apis:
        log.info("generated APIs from %s: %s", folder, ", ".join(a.name for a in generated.load(folder)))
    server = EnvServer(host=args.host, port=args.port, desktops=args.desktops, workdir=args.workdir,
                       token=os.environ.get(TOKEN_ENV, ""), settle_s=args.settle_s,
                       exit_with_parent=args.exit_with_parent, reset=args.reset, width=args.width, height=args.height,
                       file_cache=args.cache, network=args.network,
                       limits=Limits(home_mb=args.home_mb, tmp_mb=args.tmp_mb, shm_mb=args.shm_mb,
                                     processes=args.max_processes, memory_mb=args.memory_mb)).start()
    print(f"LISTENING {server.port}", flush=True)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` dumps every thread's stack to the log
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop off the handler: a second signal must not deadlock it
        signal.signal(sig, lambda *_: threading.Thread(target=server.stop, daemon=True).start())
    server.wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
