"""The env server: a gRPC `EnvService` hosting one or more desktops of this machine.

    python -m computerrl.envs.server --port 0 --desktops 1      # prints "LISTENING <port>"

It binds to loopback unless told otherwise; bound wider it refuses to start without a shared
token (`COMPUTERRL_ENV_TOKEN`), which every call must then carry. A desktop that dies (Xvfb,
D-Bus, soffice…) is rebuilt by a watchdog; the episode it was serving is reported lost
(gRPC ABORTED), which clients record as an aborted episode, never as a failure.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

from computerrl.apis.parser import InvalidAction, parse_action
from computerrl.envs.actions import ActionError, GuiActions
from computerrl.envs.desktop import Desktop, Observation, app_of
from computerrl.envs.proto import env_pb2, env_pb2_grpc

log = logging.getLogger("computerrl.envs.server")
TOKEN_ENV = "COMPUTERRL_ENV_TOKEN"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a 4K PNG screenshot plus a full tree fits many times over
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


class Slot:
    """One desktop of the server with what the server knows about it."""

    def __init__(self, index: int, workdir: Path, desktop_options: dict):
        self.index, self.workdir, self.options = index, workdir, desktop_options
        self.desktop: Desktop | None = None
        self.lock = threading.Lock()  # one call at a time per desktop
        self.problem = "starting"
        self.lost = ""  # why the current episode was lost; cleared by Reset
        self.episodes = self.replacements = 0
        self.in_episode = False

    def build(self) -> None:
        if self.desktop is not None:
            self.desktop.close()
            self.replacements += 1
        self.problem = "starting"
        self.desktop = Desktop(self.workdir, **self.options).start()
        self.gui = GuiActions(self.desktop)
        self.problem = ""

    def replace_if_dead(self) -> str:
        """Rebuild a dead desktop; returns what had died ('' if it was healthy). Caller holds the lock."""
        why = self.desktop.health() if self.desktop is not None else "not started"
        if why:
            log.warning("desktop %d: %s; replacing it", self.index, why)
            if self.in_episode:
                self.lost = why
            self.in_episode = False
            self.build()
        return why


def observation_message(obs: Observation) -> env_pb2.Observation:
    return env_pb2.Observation(
        screenshot=obs.screenshot, a11y_tree=obs.a11y_tree, focused_app=obs.focused_app, app_info=obs.app_info,
        last_result=obs.last_result,
        windows=[env_pb2.Window(id=w.hex_id, title=w.title, app=app_of(w), focused=w.focused) for w in obs.windows])


class EnvServicer(env_pb2_grpc.EnvServiceServicer):
    def __init__(self, slots: list[Slot], *, settle_s: float, on_close=None):
        self.slots, self.settle_s, self.on_close = slots, settle_s, on_close

    def _slot(self, index: int, context) -> Slot:
        if index >= len(self.slots):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no desktop {index}; this server has {len(self.slots)}")
        slot = self.slots[index]
        if slot.desktop is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"desktop {index} is {slot.problem or 'not started'}")
        return slot

    def Reset(self, request, context):
        slot = self._slot(request.desktop, context)
        with slot.lock:
            slot.replace_if_dead()
            task = json.loads(request.task_json) if request.task_json else {}
            if task.get("config") or task.get("evaluator"):
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "task setup steps and evaluators are not supported yet")
            try:
                slot.desktop.reset()
                obs = slot.desktop.observe(screenshot=request.screenshot)
            except Exception as e:  # noqa: BLE001 - whatever broke, the desktop tells us whether it died
                self._lost(slot, context, e)
            slot.lost, slot.in_episode = "", True
            slot.episodes += 1
            return observation_message(obs)

    def Step(self, request, context):
        slot = self._slot(request.desktop, context)
        with slot.lock:
            start = time.perf_counter()
            lost = slot.lost or slot.replace_if_dead()
            if lost:
                context.abort(grpc.StatusCode.ABORTED, f"episode lost: desktop replaced after {lost}")
            if not slot.in_episode:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no episode on this desktop: call Reset first")
            action = parse_action(request.action)
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
                        self._lost(slot, context, e)
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
                self._lost(slot, context, e)
            slot.in_episode = not done
            return env_pb2.StepResult(
                observation=observation_message(obs), action_valid=not isinstance(action, InvalidAction),
                action_json="" if isinstance(action, InvalidAction) else action.to_json(), exec_result=result,
                done=done, exit_success=exit_success, elapsed_s=time.perf_counter() - start)

    def _execute(self, slot: Slot, action) -> str:
        if action.api == "Agent":
            return slot.gui.run(action.name, action.args)
        raise ActionError(f"{action.api} is not available on this desktop yet")

    def _lost(self, slot: Slot, context, error: Exception):
        """The call failed: if the desktop died, replace it and report the episode lost."""
        why = slot.replace_if_dead()
        if why:
            slot.lost = ""
            context.abort(grpc.StatusCode.ABORTED, f"episode lost: desktop replaced after {why}")
        log.exception("desktop %d: call failed on a healthy desktop", slot.index, exc_info=error)
        context.abort(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")

    def Evaluate(self, request, context):
        self._slot(request.desktop, context)
        return env_pb2.Score(score=0.0, configured=False, detail="no evaluator is configured for this episode")

    def Health(self, request, context):
        desktops = []
        for s in self.slots:
            problem = s.problem or (s.desktop.health() if s.desktop is not None else "not started")
            desktops.append(env_pb2.DesktopHealth(desktop=s.index, healthy=not problem, problem=problem,
                                                  episodes=s.episodes, replacements=s.replacements))
        return env_pb2.HealthReply(healthy=all(d.healthy for d in desktops), desktops=desktops, pid=os.getpid())

    def Close(self, request, context):
        if self.on_close is not None:
            threading.Thread(target=self.on_close, daemon=True).start()
        return env_pb2.CloseReply()


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects every call that does not carry `authorization: Bearer <token>`."""

    def __init__(self, token: str):
        self._expected = ("authorization", f"Bearer {token}")

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        if self._expected in (handler_call_details.invocation_metadata or ()):
            return continuation(handler_call_details)
        return self._deny


class EnvServer:
    """Owns the gRPC server, the desktops and the watchdog that replaces dead ones."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, desktops: int = 1, workdir: Path | None = None,
                 token: str = "", settle_s: float = 0.03, watchdog_s: float = 1.0, **desktop_options):
        if host not in LOOPBACK and not token:
            raise ValueError(f"refusing to listen on {host} without a token: set {TOKEN_ENV}")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="computerrl-env-"))
        self.slots = [Slot(i, self.workdir / f"desktop-{i}", desktop_options) for i in range(desktops)]
        self.watchdog_s = watchdog_s
        self.stopped = threading.Event()
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
        for slot in self.slots:  # the first build happens here, so the port answers Health at once
            with slot.lock:
                try:
                    slot.build()
                except Exception as e:  # noqa: BLE001
                    slot.problem = f"failed to start: {e}"
                    log.exception("desktop %d failed to start", slot.index)
        while not self.stopped.wait(self.watchdog_s):
            for slot in self.slots:
                if slot.desktop is not None and not self.stopped.is_set() and slot.lock.acquire(blocking=False):
                    try:
                        slot.replace_if_dead()
                    except Exception:  # noqa: BLE001 - try again next round
                        log.exception("desktop %d: replacement failed", slot.index)
                    finally:
                        slot.lock.release()

    def stop(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.grpc.stop(grace=1.0)
        for slot in self.slots:
            if slot.desktop is not None:
                slot.desktop.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def wait(self) -> None:
        self.stopped.wait()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback)")
    p.add_argument("--port", type=int, default=0, help="0 = any free port (printed)")
    p.add_argument("--desktops", type=int, default=1, help="desktops hosted by this server")
    p.add_argument("--workdir", type=Path, default=None, help="state folder (default: a temp dir, removed at exit)")
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--settle-s", type=float, default=0.03, help="pause between an action and its observation")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = EnvServer(host=args.host, port=args.port, desktops=args.desktops, workdir=args.workdir,
                       token=os.environ.get(TOKEN_ENV, ""), settle_s=args.settle_s,
                       width=args.width, height=args.height).start()
    print(f"LISTENING {server.port}", flush=True)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` dumps every thread's stack to the log
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.stop())
    server.wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
