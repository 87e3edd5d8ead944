"""Rollout benchmark: the embedded model acting in real desktops on this machine, the rollout path
as it was (the baseline: transformers in float32, its KV cache growing every token, answered by a
batcher thread) against the CPU demo's (the engine as rollout opens it: here transformers in
bfloat16, which this CPU computes natively, decoding into a KV cache allocated once and reading the
batch's shared system prompt once per step, its prompts attending by bfloat16 matrix products,
answered from the main thread as rollout serves it).

    python -m computerrl.bench.bench_rollout                          # 1, 4 and 8 desktops (~25 min)
    python -m computerrl.bench.bench_rollout --desktops 4 --steps 12    # quick look

Prompts are the demo's (its budgets and answer cap). For each number of desktops n and each path,
two runs of about `--steps` steps each on generated Calc tasks (the file cache of a small suite,
real env servers over gRPC), then one env-only run per n:
- rollout: the engine behind the batcher (batch ≤ n) plays episodes through the episode loop, as
  `computerrl rollout` does. Reports steps/s, generated tokens/s, and the share of wall time the
  model spent generating and the desktops spent stepping (each ≤ 1; they add up to more than 1
  when the two overlap).
- model only: the rollout's first chats again (at least 6), n per generate call, back to back,
  from a cold prefix cache: steps/s.
- env only: n desktops stepping a constant valid action, no model: steps/s.
overlap = rollout steps/s ÷ min(model-only, env-only) steps/s: 1 means the slower side never
waits on the faster one. speedup_<n> = the fast path's rollout steps/s ÷ the baseline's.
What the CPU allows: `env_cpu_s` and `model_cpu_s` are the machine's busy CPU-seconds (all cores,
from /proc/stat) per step of the env-only run and per chat of the model-only run (full batches of n);
on a machine whose cores both sides share, a rollout can do at most cores ÷ (env_cpu_s + model_cpu_s)
steps/s (`cpu_bound_steps_per_s`), however well they overlap. The bound takes the machine as the
bench's own: a CPU quota or other busy processes make it wrong.
Where a step's time goes (per chat, seconds): `build_s` building its prompt (the a11y tree cut to
budget with the tokenizer), `tokenize_s` turning the chat into ids, `prefill_s` the model reading
it (the model-only chats again with a one-token answer) and `decode_s` the rest of model-only's
time, the answer's tokens. Prints the figures, then one flat JSON line of results.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from computerrl.apis.parser import format_answer
from computerrl.data.schemas import Decision
from computerrl.envs.fleet.backends.local import LocalBackend
from computerrl.envs.fleet.pool import EnvPool, wait_healthy
from computerrl.play.episode import play
from computerrl.policy import agent


class TimedEnv:
    """A DesktopEnv that adds up the seconds its steps take."""

    def __init__(self, env, clock: dict):
        self.env, self.clock = env, clock

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action, *frame):
        t = time.monotonic()
        try:
            return self.env.step(action, *frame)
        finally:
            with self.clock["lock"]:
                self.clock["env_s"] += time.monotonic() - t


class ConstantPolicy:
    """Env-only runs: always the same cheap valid action, no model."""

    version = engine_name = "constant"

    def act(self, instruction, observation, history) -> Decision:
        return Decision([], format_answer("Agent.hotkey(['down'])"))

    def episode(self):
        return contextlib.nullcontext()


def episodes(pool, policy, tasks, n: int, steps: int, clock: dict) -> tuple[int, float]:
    """(steps played, wall seconds) of n workers playing tasks until `steps` steps are done."""
    done = {"steps": 0}
    lock = threading.Lock()

    def worker(k: int) -> None:
        i = k
        while True:
            with lock:
                if done["steps"] >= steps:
                    return
            item = tasks[i % len(tasks)]
            i += n
            with pool.lease() as env:
                t = play(TimedEnv(env, clock), policy, item.task, domain=item.domain)
            with lock:
                done["steps"] += len(t.rows)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    if getattr(policy, "needs_serving", False):  # as rollout serves it: from the main thread
        policy.serve(until=lambda: not any(th.is_alive() for th in threads))
    for th in threads:
        th.join()
    return done["steps"], time.monotonic() - t0


def rollout_run(engine, budgets, pool, tasks, n: int, steps: int, background: bool) -> dict:
    """One path at n desktops: the rollout (the policy served by a thread of its own, or by the main
    thread), then its first chats again with the model alone."""
    clock = {"env_s": 0.0, "model_s": 0.0, "build_s": 0.0, "tokens": 0, "batches": 0, "lock": threading.Lock()}
    chats: list = []

    def on_batch(size: int, seconds: float) -> None:
        clock["model_s"] += seconds
        clock["batches"] += 1

    engine.forget_prefixes()  # cold, as a rollout starts
    policy = agent.ModelPolicy(engine, budgets, version="bench", max_batch=n, on_batch=on_batch, background=background)
    act = policy.act

    def recorded(instruction, observation, history, act=act):
        d = act(instruction, observation, history)
        with clock["lock"]:
            chats.append(d.messages)
            clock["tokens"] += len(d.response_ids)
        return d

    policy.act = recorded
    build = agent.build_messages

    def timed_build(*args, **kwargs):
        t = time.monotonic()
        try:
            return build(*args, **kwargs)
        finally:
            with clock["lock"]:
                clock["build_s"] += time.monotonic() - t

    agent.build_messages = timed_build
    try:
        played, wall = episodes(pool, policy, tasks, n, steps, clock)
    finally:
        agent.build_messages = build
    policy.close(engine=False)
    batches = [chats[k:k + n] for k in range(0, min(len(chats), max(6, 2 * n)), n)]  # the rollout's first chats
    cpu = busy_cpu_s()
    model_only = model_time(engine, batches)
    cpu = busy_cpu_s() - cpu
    sampling = engine.sampling
    engine.sampling = dataclasses.replace(sampling, max_new_tokens=1)
    try:
        prefill = model_time(engine, batches)
    finally:
        engine.sampling = sampling
    t0 = time.monotonic()
    for chat in sum(batches, []):
        engine.chat_ids(chat)
    asked = sum(map(len, batches))
    return {"steps_per_s": played / wall, "tokens_per_s": clock["tokens"] / wall,
            "model_share": clock["model_s"] / wall, "env_share": clock["env_s"] / n / wall,
            "mean_batch": played / max(1, clock["batches"]), "model_only": asked / model_only,
            "model_cpu_s": cpu / asked,
            "build_s": clock["build_s"] / played, "tokenize_s": (time.monotonic() - t0) / asked,
            "prefill_s": prefill / asked, "decode_s": (model_only - prefill) / asked}


def busy_cpu_s() -> float:
    """CPU-seconds this machine has spent busy since boot, on all cores (/proc/stat: user, nice, system,
    irq and softirq; not steal, and not guest, which user already counts)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return (sum(ticks[:3]) + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


def model_time(engine, batches: list) -> float:
    """Seconds the engine takes to answer these batches, from a cold prefix cache as a rollout starts."""
    engine.forget_prefixes()
    t0 = time.monotonic()
    for k, batch in enumerate(batches):
        engine.generate(batch, seed=k)
    engine.forget_prefixes()
    return time.monotonic() - t0


@contextlib.contextmanager
def calc_desktops(root: Path, count: int):
    """(tasks, env handles): 16 generated Calc tasks with their file cache at ROOT, and `count` healthy
    desktops (one env server each) that read it, stopped on leaving."""
    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import TASK_FEATURES
    from computerrl.tasks.suites.build import generate, task_rows, write_files
    from computerrl.tasks.task_set import load_task_set

    train, _ = generate(16, 0, seed=0, templates=["calc_column_stat", "calc_sort_column", "calc_row_total"])
    write_files(train, root / "files")
    save_atomic(datasets.Dataset.from_dict(task_rows(train), features=TASK_FEATURES), root / "tasks")
    backend = LocalBackend(root / "envs", server_args=("--cache", str(root / "files")))
    handles = [backend.start(f"bench-{k}") for k in range(count)]
    try:
        for h in handles:
            problem = wait_healthy(EnvPool([h]).clients[h.env_id], 180)
            if problem:
                raise SystemExit(f"{h.env_id} did not start: {problem}")
        yield load_task_set(root / "tasks"), handles
    finally:
        for h in handles:
            backend.stop(h)


def main() -> None:
    from computerrl.policy.checkpoint import embedded_checkpoint
    from computerrl.policy.engines import Sampling, make_engine
    from computerrl.policy.prompt import BUDGETS
    from computerrl.policy.session import open_engine
    from computerrl.stages.presets import schedule

    demo = schedule("demo")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--desktops", default="1,4,8", help="comma-separated desktop counts")
    ap.add_argument("--steps", type=int, default=24, help="steps per measured run")
    ap.add_argument("--max-steps", type=int, default=3, help="steps per episode")
    ap.add_argument("--max-new-tokens", type=int, default=demo.play["max_new_tokens"])
    ap.add_argument("--budgets", default=demo.play["budgets"], help="prompt budgets (the demo's by default)")
    ap.add_argument("--model", default=str(embedded_checkpoint()), help="checkpoint folder (the embedded model's)")
    args = ap.parse_args()
    counts = [int(c) for c in args.desktops.split(",")]
    sampling = Sampling(1.0, args.max_new_tokens)
    paths = {"baseline": make_engine("transformers", args.model, sampling, dtype="float32",
                                     static_cache=False),  # the engine as it was
             "fast": open_engine(args.model, engine="transformers", temperature=1.0,  # as rollout opens it
                                 max_new_tokens=args.max_new_tokens, device="cpu", llm_url="")}
    budgets = BUDGETS[args.budgets]
    cores = len(os.sched_getaffinity(0))
    results: dict = {"max_new_tokens": args.max_new_tokens, "budgets": args.budgets,
                     "fast_engine": paths["fast"].engine or "transformers:float32"}
    with tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp, \
            calc_desktops(Path(tmp), max(counts)) as (tasks, handles):
        for n in counts:
            pool = EnvPool(handles[:n], max_steps=args.max_steps)
            cpu = busy_cpu_s()
            env_steps, env_wall = episodes(pool, ConstantPolicy(), tasks, n, args.steps,
                                           {"env_s": 0.0, "lock": threading.Lock()})
            env_cpu = (busy_cpu_s() - cpu) / env_steps
            env_only = env_steps / env_wall
            results[f"env_only_steps_per_s_{n}"] = round(env_only, 3)
            results[f"env_cpu_s_{n}"] = round(env_cpu, 3)
            for path, engine in paths.items():
                r = rollout_run(engine, budgets, pool, tasks, n, args.steps, background=path == "baseline")
                prefix = "" if path == "fast" else "baseline_"
                r["overlap"] = r["steps_per_s"] / min(r["model_only"], env_only)
                r["cpu_bound_steps_per_s"] = cores / (env_cpu + r["model_cpu_s"])
                for key in ("steps_per_s", "tokens_per_s", "model_share", "env_share", "mean_batch", "model_only",
                            "model_cpu_s", "cpu_bound_steps_per_s", "overlap", "build_s", "tokenize_s", "prefill_s",
                            "decode_s"):
                    results[f"{prefix}{key}_{n}"] = round(r[key], 3)
                print(f"{n} desktops, {path}: {r['steps_per_s']:.3f} steps/s, {r['tokens_per_s']:.1f} tokens/s, "
                      f"{r['mean_batch']:.1f} chats a batch; "
                      f"wall time in model {r['model_share']:.0%}, in desktops {r['env_share']:.0%}; model only "
                      f"{r['model_only']:.3f} steps/s, env only {env_only:.3f} steps/s; overlap {r['overlap']:.2f}; "
                      f"CPU-s per step: desktops {env_cpu:.2f}, model {r['model_cpu_s']:.2f}, so at most "
                      f"{r['cpu_bound_steps_per_s']:.3f} steps/s on {cores} cores; "
                      f"per chat: prompt {r['build_s']:.3f} s, ids {r['tokenize_s']:.3f} s, prefill "
                      f"{r['prefill_s']:.3f} s, decode {r['decode_s']:.3f} s", flush=True)
            results[f"speedup_{n}"] = round(results[f"steps_per_s_{n}"] / results[f"baseline_steps_per_s_{n}"], 2)
            print(f"{n} desktops: speedup {results[f'speedup_{n}']}x", flush=True)
            pool.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
