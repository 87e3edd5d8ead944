"""Policies: what answers an observation. Every policy builds its chat with `prompt.build_messages`,
so expert rows, rollout rows and eval see the same prompts.

- `ModelPolicy`: a generation engine behind a batcher. Episodes on many desktops call `act` from
  their own threads; the batcher gathers their chats into one `generate` call. A call costs about
  as much for four chats as for one (decoding is overhead-bound), so it waits — a moment at most —
  until every episode in play has asked, rather than answering whichever asked first. The batches
  are served by a thread of its own, or (rollout and eval) by the main thread, where torch runs
  fastest, while the episodes play in theirs. `publish` switches its engine to a new policy version
  between two batches (the asynchronous loop's weight sync); each answer records the version that gave it.
- `ExpertPolicy`: plays a task's reference solution, one line a step, through the same prompt.

The episode loop (`play.episode.play`) needs only `act(instruction, observation, history) ->
Decision`, `episode()` (a context around an episode's steps) and the attributes `version` and
`engine_name`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, Sequence

from computerrl.apis.parser import format_answer
from computerrl.data.schemas import Decision
from computerrl.policy.engines import Engine
from computerrl.policy.prompt import Budgets, CountTokens, approx_tokens, build_messages
from computerrl.policy.vision import with_screens

EXPERT = "expert"  # policy_version and engine of reference-solution rows
# A vision model's coordinate frames: a 0-1000 grid over the screenshot (Qwen2-VL, UI-TARS, ComputerRL's
# vision agent answer so; the env maps it onto the screen), or screen pixels as the accessibility tree gives them.
FRAMES = {"grid": (1000, 1000), "screen": None}
GRID_NOTE = "\n\n* Coordinates: [x, y] on a 0-1000 grid over the screenshot ([0, 0] its top left, [1000, 1000] its bottom right)"


@dataclasses.dataclass(frozen=True)
class Sync:
    """A version switch of a live engine: how long it waited for the batch in flight, and the load itself."""
    version: str
    waited_s: float
    load_s: float


class ExpertPolicy:
    """Answers step i with line i of `solution` (no thought), then gives up if asked again."""

    engine_name = EXPERT
    version = EXPERT

    def __init__(self, solution: Sequence[str], budgets: Budgets, count: CountTokens = approx_tokens):
        self.solution, self.budgets, self.count = list(solution), budgets, count

    def act(self, instruction: str, observation: dict, history: Sequence[tuple[str, str]]) -> Decision:
        messages = build_messages(instruction, observation, history, self.budgets, self.count)
        step = len(history)
        code = self.solution[step] if step < len(self.solution) else "Agent.exit(success=False)"
        return Decision(messages, format_answer(code))

    def episode(self):
        return contextlib.nullcontext()


class ModelPolicy:
    def __init__(self, engine: Engine, budgets: Budgets, *, version: str, max_batch: int = 8,
                 gather_s: float = 2.0, seed: int = 0, on_batch: Callable[[int, float], None] | None = None,
                 background: bool = True, screens: int = 2, coordinates: str = "grid"):
        """`max_batch`: chats per generate call; `gather_s`: how long a batch waits at most for the
        episodes in play that have not asked yet (one still stepping its desktop);
        `on_batch(size, seconds)`: told after every call (progress, benchmarks); `background`: a
        thread of its own answers the chats, else whoever drives the episodes calls `serve`; `screens`:
        a vision model's prompt holds this step's screenshot and those of the screens - 1 steps before;
        `coordinates`: a vision model's points, on a 0-1000 grid over the screenshot or in screen pixels."""
        if coordinates not in FRAMES:
            raise ValueError(f"coordinates={coordinates!r}: expected one of {', '.join(FRAMES)}")
        self.engine, self.budgets, self.version, self.screens = engine, budgets, version, screens
        self.frame = FRAMES[coordinates] if self.sees_screen else None
        self.max_batch, self.gather_s, self.seed, self.on_batch = max_batch, gather_s, seed, on_batch
        self.calls = 0
        self.needs_serving = not background  # the episodes' driver must call `serve`
        self._playing = 0  # episodes inside `episode()`
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._switches: queue.Queue = queue.Queue()  # (checkpoint, version, future, asked at) from `publish`
        self._closed = False
        self._worker = threading.Thread(target=self.serve, name="policy-batcher", daemon=True) if background else None
        if self._worker:
            self._worker.start()

    @property
    def engine_name(self) -> str:
        return self.engine.name

    @property
    def sees_screen(self) -> bool:
        """A vision-language model: its prompts hold screenshots (the envs must send them)."""
        return getattr(self.engine, "processor", None) is not None

    @contextlib.contextmanager
    def episode(self):
        """Around an episode's steps: while it is in play, batches wait for its next chat."""
        with self._lock:
            self._playing += 1
        try:
            yield
        finally:
            with self._lock:
                self._playing -= 1

    def act(self, instruction: str, observation: dict, history: Sequence[tuple[str, str]]) -> Decision:
        if self._closed:
            raise RuntimeError("the policy was closed")
        messages = build_messages(instruction, observation, history, self.budgets, self.engine.count_tokens)
        shots = self._screens(observation, history) if self.sees_screen else []
        if self.frame:
            messages[-1]["content"] += GRID_NOTE
        done: Future = Future()
        self._queue.put((with_screens(messages, shots), done))
        g, version = done.result()
        return Decision(messages, g.text, g.prompt_ids, g.response_ids, g.logprobs, g.entropy, g.engine, len(shots),
                        self.frame, version)

    def _screens(self, observation: dict, history: Sequence[tuple]) -> list:
        """This step's screenshot and those of the steps before it that the prompt keeps (each history
        entry is (answer, its result, the screenshot it was given on)), oldest first."""
        earlier = min(self.screens - 1, len(history), self.budgets.history_turns)  # a turn of the chat each
        shots = [h[2] if len(h) > 2 else None for h in history[len(history) - earlier:]] + [observation.get("screenshot")]
        if not all(shots):
            raise RuntimeError("a vision model's step came without its screenshot: the envs were not asked for them")
        return shots

    def _gather(self) -> list:
        """The next batch: the first chat, then the others of every episode in play (chats asked outside
        an episode are taken as they are queued)."""
        batch = [self._queue.get(timeout=0.1)]
        deadline = time.monotonic() + self.gather_s
        while len(batch) < self.max_batch:
            try:
                batch.append(self._queue.get_nowait())
                continue
            except queue.Empty:
                pass
            if len(batch) >= self._playing or time.monotonic() >= deadline:
                break
            try:
                batch.append(self._queue.get(timeout=0.01))  # short: an episode may end meanwhile
            except queue.Empty:
                pass
        return batch

    def serve(self, until: Callable[[], bool] = lambda: False) -> None:
        """Answer the queued chats, a batch per generate call, until `until()` holds or the policy is
        closed. Called from the process's main thread (where torch was first used), the model runs
        faster than from another thread: here a generate call took ~1.45× as long from a thread."""
        while not self._closed and not until():
            self._switch_versions()
            try:
                batch = self._gather()
            except queue.Empty:
                continue
            t0 = time.monotonic()
            try:
                gens = self.engine.generate([m for m, _ in batch], seed=self.seed * 1_000_003 + self.calls)
            except Exception as e:  # noqa: BLE001 - every waiting episode must hear of it
                for _, f in batch:
                    f.set_exception(e)
                continue
            finally:
                self.calls += 1
            for (_, f), g in zip(batch, gens):
                f.set_result((g, self.version))
            if self.on_batch:
                self.on_batch(len(batch), time.monotonic() - t0)

    def publish(self, checkpoint, version: str, *, timeout_s: float = 600.0) -> Sync:
        """Switch the engine to `checkpoint`'s weights (the asynchronous loop's new policy version) between
        two batches: the batch in flight ends on the old weights, every later answer is the new version's
        and its row records `version`. TimeoutError when the switch is not done within `timeout_s`, saying
        whether the engine was stuck in a batch (the switch then never happens) or the load hung."""
        done: Future = Future()
        self._switches.put((checkpoint, version, done, time.monotonic()))
        try:
            return done.result(timeout=timeout_s)
        except FutureTimeout:
            pass
        if done.cancel():  # not begun: it never will be
            raise TimeoutError(f"weight sync to {version} not begun within {timeout_s:.0f} s: the engine is still "
                               "in a batch (a hung generate?)")
        try:
            return done.result(timeout=0)  # it ended just now
        except FutureTimeout:
            raise TimeoutError(f"weight sync to {version} still loading after {timeout_s:.0f} s ({checkpoint}): the "
                               "engine's weight load hung") from None

    def _switch_versions(self) -> None:
        """Between batches: the version switches `publish` asked for, in order."""
        while not self._switches.empty():
            checkpoint, version, done, asked = self._switches.get_nowait()
            if not done.set_running_or_notify_cancel():
                continue  # its publish gave up waiting
            t0 = time.monotonic()
            try:
                self.engine.load_weights(checkpoint)
            except BaseException as e:  # noqa: BLE001 - the publisher hears of it; the old version stays
                done.set_exception(e)
                continue
            self.version = version
            done.set_result(Sync(version, waited_s=t0 - asked, load_s=time.monotonic() - t0))

    def close(self, *, engine: bool = True) -> None:
        """Stop the batcher (answers still pending fail) and, with `engine`, free the model."""
        self._closed = True
        if self._worker:
            self._worker.join(timeout=5)
        while not self._queue.empty():
            self._queue.get_nowait()[1].set_exception(RuntimeError("the policy was closed"))
        while not self._switches.empty():
            done = self._switches.get_nowait()[2]
            if done.set_running_or_notify_cancel():
                done.set_exception(RuntimeError("the policy was closed before the weight sync"))
        if engine:
            self.engine.close()
