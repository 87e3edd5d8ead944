"""The asynchronous loop (`computerrl async-rl`): a live engine that switches versions in place, each answer
recording the version that gave it, a weight sync that fails in time when it cannot happen, and the loop
on real desktops with a real model (the tiny stand-in, conftest's `tiny_model`: what is checked is the loop's,
not what the model answers): versions published, lag bounded, a kill resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import generated_desktops
from test_policy import OBS

from computerrl.bench.bench_async import other_version
from computerrl.policy.engines import Generation, Sampling


def test_a_live_engine_switched_to_a_new_version_answers_as_that_version_loaded_afresh(tmp_path, tiny_model):
    """The transformers engine takes the new weights in place and drops the system prompt's KV cache it
    computed with the old ones: its answers are then those of an engine opened on the new checkpoint (the
    tiny model's: the engine's bookkeeping is checked, not the embedded model's numbers)."""
    from computerrl.policy.engines import make_engine
    from computerrl.policy.prompt import BUDGETS, build_messages

    other = other_version(tmp_path / "v1", tiny_model)
    greedy = Sampling(0.0, 12)
    live = make_engine("transformers", tiny_model, greedy, dtype="float32")
    chats = [build_messages(f"Put {v} in B2.", OBS, [], BUDGETS["quick"], live.count_tokens) for v in (1, 22)]
    before = live.generate(chats, seed=0)  # also caches the shared system prompt's keys and values
    live.load_weights(other)
    after = live.generate(chats, seed=0)
    fresh = make_engine("transformers", other, greedy, dtype="float32").generate(chats, seed=0)
    for a, f, b in zip(after, fresh, before):
        assert a.response_ids == f.response_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, f.logprobs)) < 1e-4
        assert abs(a.logprobs[0] - b.logprobs[0]) > 1e-3  # the switch changed the model's numbers


class Recorder:
    """An engine whose answer names the weights it holds; `answering` and `loading` can hold it in a
    batch or in a weight load (a hung GPU call)."""

    name, engine, sampling = "recorder", "", Sampling(1.0, 8)

    def __init__(self):
        self.weights, self.answering, self.loading = "v0", threading.Event(), threading.Event()
        self.answering.set()
        self.loading.set()

    def generate(self, chats, *, seed):
        self.answering.wait()
        return [Generation(self.weights, [1], [2], [-0.5], "stop") for _ in chats]

    def count_tokens(self, text):
        return len(text) // 4

    def load_weights(self, checkpoint):
        self.loading.wait()
        self.weights = str(checkpoint)

    def close(self):
        pass


def test_a_published_version_answers_every_later_step_and_a_sync_that_cannot_finish_fails_in_time():
    from computerrl.policy.agent import ModelPolicy
    from computerrl.policy.prompt import BUDGETS

    engine = Recorder()
    policy = ModelPolicy(engine, BUDGETS["tiny"], version="version-0", gather_s=0.0)
    first = policy.act("t", OBS, [])
    assert (first.response, first.version) == ("v0", "version-0")
    sync = policy.publish("v1", "version-1")
    assert sync.version == "version-1" and sync.load_s >= 0 and sync.waited_s >= 0
    second = policy.act("t", OBS, [])
    assert (second.response, second.version) == ("v1", "version-1")

    engine.answering.clear()  # a batch that does not end
    stuck = []
    asker = threading.Thread(target=lambda: stuck.append(policy.act("t", OBS, [])))
    asker.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="not begun within 1 s.*still in a batch"):
        policy.publish("v2", "version-2", timeout_s=1.0)
    assert time.monotonic() - t0 < 3
    engine.answering.set()
    asker.join(timeout=5)
    assert stuck[0].version == "version-1"
    third = policy.act("t", OBS, [])  # the switch that gave up never happens later
    assert (third.response, third.version) == ("v1", "version-1")

    engine.loading.clear()  # a weight load that does not end
    with pytest.raises(TimeoutError, match="still loading after 1 s"):
        policy.publish("v3", "version-3", timeout_s=1.0)
    engine.loading.set()
    policy.close()


@pytest.fixture(scope="module")
def desktops(tmp_path_factory):
    """Two generated Calc tasks with their file cache, and two desktops behind a detached spawn-envs."""
    with generated_desktops(tmp_path_factory.mktemp("async"), tasks=2, desktops=2) as root:
        yield root


def stand_in_run(root, out, *, sync: bool, max_lag: int, on_start=lambda cfg: None) -> dict:
    """The loop on the desktops with STAND-INS for the GPU parts: an engine answering at once, a trainer
    taking 8 s an update."""
    from rich.console import Console

    from computerrl.bench.bench_async import StandInEngine, stand_in_trainer
    from computerrl.policy.agent import ModelPolicy
    from computerrl.policy.checkpoint import embedded_checkpoint, policy_version
    from computerrl.policy.prompt import BUDGETS
    from computerrl.stages.async_rl import AsyncRLConfig, run

    cfg = AsyncRLConfig(tasks=root / "tasks", envs=root / "envs", out=out, samples=2, groups=1, updates=2,
                        max_lag=max_lag, sync=sync, max_steps=2)
    policy = ModelPolicy(StandInEngine(0.05), BUDGETS["tiny"], version=policy_version(embedded_checkpoint()),
                         max_batch=2, background=False)
    on_start(cfg)
    return run(cfg, Console(quiet=True), train=stand_in_trainer(8.0), policy=policy)


@pytest.mark.desktop
def test_stale_groups_are_dropped_a_lost_desktop_costs_its_episode_and_the_sync_loop_leaves_desktops_idle(desktops):
    """Asynchronous with --max-lag 0: the groups played while the trainer trained are a version behind once
    it publishes, and are dropped, never trained on. One env server is SIGKILLed mid-run: its episode is
    played again on another desktop, and the run ends with its two versions. Synchronous: nothing lags,
    nothing is dropped, and the desktops wait for the trainer (busy less of the time)."""
    import datasets

    from computerrl.envs.fleet.manifest import read_manifest

    def kill_a_server_once_a_trajectory_is_in(cfg):
        def kill():
            deadline = time.monotonic() + 120
            while not list(cfg.journal.glob("item-*.json")) and time.monotonic() < deadline:
                time.sleep(0.1)
            handles, _ = read_manifest(desktops / "envs")
            os.kill(handles[0].detail["pid"], signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()

    lagging = stand_in_run(desktops, desktops / "async", sync=False, max_lag=0,
                           on_start=kill_a_server_once_a_trajectory_is_in)
    assert lagging["versions"] == 2 and lagging["dropped_groups"] >= 1 and lagging["replayed"] >= 1, lagging
    for v in (1, 2):
        batch = datasets.load_from_disk(str(desktops / "async" / f"rollout-{v}"))
        assert set(batch["lag"]) == {0} and not any(batch["error"])
    in_step = stand_in_run(desktops, desktops / "sync", sync=True, max_lag=1)
    assert in_step["versions"] == 2 and in_step["dropped_groups"] == 0 and in_step["lag_max"] == 0, in_step
    assert in_step["desktop_busy"] < lagging["desktop_busy"]


@pytest.mark.desktop
def test_a_batch_whose_every_trajectory_failed_stops_the_run_with_the_first_error_untrained(desktops, tmp_path):
    """Tasks whose files the desktops' cache lacks fail at setup, every play: the run stops with that
    setup error instead of handing GRPO a batch with nothing to train on."""
    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import TASK_FEATURES
    from computerrl.tasks.suites.build import generate, task_rows

    uncached, _ = generate(2, 0, seed=99, templates=["calc_column_stat"])  # files never written to the cache
    save_atomic(datasets.Dataset.from_dict(task_rows(uncached), features=TASK_FEATURES), tmp_path / "tasks")
    (tmp_path / "envs").symlink_to(desktops / "envs")
    with pytest.raises(RuntimeError, match="none of the 2 trajectories for version 1 .*not in the file cache"):
        stand_in_run(tmp_path, tmp_path / "run", sync=False, max_lag=1)
    assert not (tmp_path / "run" / "policy-1").exists() and not (tmp_path / "run" / "loop.jsonl").exists()


@pytest.mark.desktop
def test_the_loop_publishes_versions_within_the_lag_and_a_killed_run_resumes(desktops, tmp_path, tiny_model):
    """Two desktops play while GRPO trains in a process of its own: the first trainer process fails and is
    run again; the run is killed once version 1 is out, and rerun, it publishes version 2 without training
    version 1 again. Every batch's rows were sampled by versions at most --max-lag behind the one trained."""
    import datasets

    from computerrl.policy.checkpoint import policy_version, read_lineage

    flaky = tmp_path / "flaky.sh"  # the first trainer process dies, as one the machine killed
    flaky.write_text(f'[ -e "{tmp_path}/failed-once" ] || {{ touch "{tmp_path}/failed-once"; exit 3; }}\n'
                     f'exec "{sys.executable}" "$@"\n')
    out, root = tmp_path / "async", desktops
    command = [sys.executable, "-m", "computerrl.cli.main", "async-rl", "--tasks", str(root / "tasks"),
               "--envs", str(root / "envs"), "--samples", "2", "--groups", "1", "--updates", "2", "--max-lag", "1",
               "--max-steps", "2", "--max-new-tokens", "24", "--grpo", "train_layers=2", "--grpo", "epochs=1",
               "--launcher", f"bash {flaky}", "--model", tiny_model, "--out", str(out)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 600
    while not (out / "loop.jsonl").exists() and first.poll() is None:  # its line: version 1 is out
        assert time.monotonic() < deadline, "version 1 not published within 10 minutes"
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the loop, its desktops' workers and any trainer process
    said = first.communicate()[0]
    assert "trainer for version 1 failed" in said, said
    weights = (out / "policy-1" / "model.safetensors").stat().st_mtime_ns
    second = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming: 1 of 2 versions published" in second.stdout
    assert (out / "policy-1" / "model.safetensors").stat().st_mtime_ns == weights  # not trained again
    versions = [policy_version(tiny_model), policy_version(out / "policy-1"), policy_version(out / "policy-2")]
    assert read_lineage(out / "policy-2")["parent"] == versions[1]
    for v in (1, 2):
        batch = datasets.load_from_disk(str(out / f"rollout-{v}"))
        assert len({(r["group_id"], r["sample"]) for r in batch}) == 2  # one group of G = 2 trajectories
        assert set(batch["policy_version"]) <= set(versions[:v]) and not any(batch["error"])
        assert [r["lag"] for r in batch] == [v - 1 - versions.index(r["policy_version"]) for r in batch]
        assert max(batch["lag"]) <= 1
    log = [json.loads(line) for line in (out / "loop.jsonl").read_text().splitlines()]
    assert [line["version"] for line in log] == [1, 2] and all(line["sync_load_s"] < 60 for line in log)
    grpo = json.loads((out / "policy-2" / "summary.json").read_text())
    assert grpo["stale_rows"] == sum(lag > 0 for lag in datasets.load_from_disk(str(out / "rollout-2"))["lag"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == str(out / "policy-2") and 0 < summary["desktop_busy"] <= 1
