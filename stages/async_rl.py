"""`computerrl async-rl`: rollout and training at once. The desktops keep playing while the trainer
trains, each answer from the newest policy version the live engine holds.

    a worker per desktop ── trajectories ──▶ groups (G plays of a task) ── lag ≤ K ──▶ trainer (`grpo`)
            ▲                                                                            │
            └──── live engine (ModelPolicy.publish: weights switched in place) ◀── policy-v

- The live engine is the policy every episode asks (`policy.agent.ModelPolicy`, served by this
  process's main thread). A new version is switched in between two of its batches: its weights
  loaded in place (`Engine.load_weights`), the caches of the old ones dropped; each switch is timed,
  and one that does not finish within --sync-timeout fails the run, saying so.
- Groups: tasks are drawn in a seeded order, round after round; each draw is played G times
  (--samples) and is complete when its G trajectories are. A trajectory whose desktop was lost is
  played again (the pool replaces the desktop): it costs its episode, never a training step.
- The trainer takes the --groups oldest complete groups whose lag — the current version minus the
  oldest version that answered in them — is at most --max-lag (older ones are dropped, counted),
  writes them as OUT/rollout-v (the step schema plus `lag`, the lag each row was trained at) and runs
  `computerrl grpo` on them from policy-(v-1) to OUT/policy-v, a process of its own (--launcher);
  GRPO recomputes πold for rows an older version sampled and weighs the lag with truncated importance
  weights (their mean and clip fraction are in its summary). Desktops never wait for the trainer, and
  a reset does not hold the other desktops' batches.
- `--sync` plays the textbook way, for comparison: each version's groups are played, then trained
  on while the desktops wait.

The outputs are `rollout` and `grpo`'s own (step datasets, checkpoints with lineage), so `eval`,
`filter-success`, `sft` and the schedule take them as they are. Killed, rerun the same command: the
journaled trajectories and the published checkpoints are kept, a batch written but not trained is
trained (grpo resumes from its state), and a trainer process that fails is run again (--retries).

Reads:  --tasks, --envs (a spawn-envs run), --model (the starting policy).
Writes: OUT/policy-1..N and OUT/rollout-1..N; OUT/loop.jsonl, a line per update (version, groups, lag,
        dropped groups, weight sync and trainer seconds, grpo's figures); OUT/summary.json (wall time,
        steps/s, the desktops' and the trainer's busy shares, lag, sync times).

    computerrl async-rl --tasks runs/tasks/train --envs runs/envs --model runs/sft-bc --samples 4 --groups 4 \\
        --updates 2 --max-lag 1 --out runs/async
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

from computerrl.data.config import setting
from computerrl.play.async_loop import Loop, Train, batch_draws
from computerrl.play.config import PlayConfig


@dataclasses.dataclass
class AsyncRLConfig(PlayConfig):
    tasks: Path = Path("runs/tasks/train")
    out: Path = setting(Path("runs/async"), "Run folder: OUT/policy-v, OUT/rollout-v, the loop's log and summary.",
                        "--out", "-o")
    samples: int = 4  # G
    temperature: float = 1.0
    groups: int = setting(4, "Groups (a task's G trajectories) per update.")
    updates: int = setting(2, "Policy versions to train and publish.")
    max_lag: int = setting(1, "K: a group is trained on only while the current version is at most K past the "
                              "oldest version that answered in it; older ones are dropped.")
    sync: bool = setting(False, "Play each version's groups, then train while the desktops wait (the synchronous "
                                "loop, to compare).")
    launcher: str = setting("", "The trainer's command up to `-m computerrl.cli.main grpo …` ('' = this Python; "
                                "e.g. 'accelerate launch --config_file configs/accelerate/ddp.yaml', or "
                                ".venv/bin/python beside .venv-vllm's engine).")
    grpo: list[str] = setting([], "A setting of each update, KEY=VALUE by `computerrl grpo`'s option names (repeat): "
                                  "e.g. lr=5e-5, epochs=2, updates_per_epoch=4, train_layers=8, anchor=nll. The "
                                  "starting --model is the KL reference.")
    sync_timeout: float = setting(600.0, "Seconds a weight sync may take before the run fails, saying so.")
    retries: int = setting(2, "Times a failed trainer process is run again (it resumes from its state).")

    def __post_init__(self):
        super().__post_init__()
        if bad := [item for item in self.grpo if "=" not in item]:
            raise ValueError(f"--grpo {bad[0]!r}: expected KEY=VALUE")  # names, types, values: cli/async_rl.py
        if self.groups < 1 or self.updates < 1 or self.max_lag < 0 or self.retries < 0:
            raise ValueError("--groups and --updates must be at least 1, --max-lag and --retries at least 0")
        if self.engine == "openai":
            raise ValueError("async-rl needs a live engine it can switch to a new version: transformers, vllm or "
                             "llamacpp (an openai server's weights are its owner's)")

    @property
    def journal(self) -> Path:
        return self.out / ".journal"

    def key(self) -> dict:
        """Settings a resumed run must share (the trajectories journaled belong to them)."""
        return {k: v for k, v in super().key().items() if k not in ("out", "updates", "sync_timeout", "retries",
                                                                   "launcher")}


def grpo_process(cfg: AsyncRLConfig, console) -> Train:
    """The trainer: `computerrl grpo` on the batch, a process of its own (--launcher); a failed one raises."""
    import subprocess

    def train(version: int, batch: Path, checkpoint: str) -> tuple[str, str]:
        from computerrl.data.config import cli_args
        from computerrl.policy.checkpoint import policy_version

        out = cfg.out / f"policy-{version}"
        command = (shlex.split(cfg.launcher) if cfg.launcher else [sys.executable]) + [
            "-m", "computerrl.cli.main", "grpo", "--rollouts", str(batch), "--model", checkpoint, "--out", str(out),
            "--ref", cfg.model, "--temperature", str(cfg.temperature or 1.0), "--seed", str(cfg.seed + version),
            *cli_args({k: {"true": True, "false": False}.get(v.lower(), v)  # booleans as grpo's flags
                       for k, _, v in (item.partition("=") for item in cfg.grpo)})]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{shlex.join(command)}` exited with {done.returncode}:\n{done.stderr[-2000:]}")
        return str(out), policy_version(out)

    return train


def published(cfg: AsyncRLConfig) -> list[str]:
    """The policy versions so far: the starting model's, then each OUT/policy-v a run finished."""
    from computerrl.policy.checkpoint import policy_version, resolve

    versions = [policy_version(resolve(cfg.model))]
    while (cfg.out / f"policy-{len(versions)}" / "summary.json").exists():
        versions.append(policy_version(cfg.out / f"policy-{len(versions)}"))
    return versions


def run(cfg: AsyncRLConfig, console=None, *, train: Train | None = None, policy=None) -> dict:
    """The loop until --updates versions are published. `train` and `policy`: stand-ins for the GRPO
    process and the live engine (the benchmark's GPU-scale simulation)."""
    from rich.console import Console

    from computerrl.data.journal import Journal
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.tasks.task_set import load_task_set, playable

    console = console or Console(soft_wrap=True)
    summary_path = cfg.out / "summary.json"
    if summary_path.exists() and not cfg.overwrite:
        console.print(f"{cfg.out} is already complete (--overwrite runs it again)")
        return json.loads(summary_path.read_text())
    if cfg.overwrite and cfg.out.exists():
        import shutil

        shutil.rmtree(cfg.out)
    cfg.check_inputs()
    items = playable(load_task_set(cfg.tasks, cfg.limit), cfg.tasks, console)
    cfg.out.mkdir(parents=True, exist_ok=True)
    versions = published(cfg)
    trained = {d for v in range(1, len(versions)) for d in batch_draws(cfg.out / f"rollout-{v}")}
    journal = Journal(cfg.journal, cfg.key())
    if len(versions) > 1 or len(journal):
        console.print(f"resuming: {len(versions) - 1} of {cfg.updates} versions published, {len(journal)} "
                      "trajectories journaled")
    policy = policy or cfg.open_policy(cfg.out / f"policy-{len(versions) - 1}" if len(versions) > 1 else cfg.model)
    pool = EnvPool.from_manifest(cfg.envs, max_steps=cfg.max_steps, screenshot=policy.sees_screen)
    try:
        summary = Loop(cfg, items, pool, policy, journal, train or grpo_process(cfg, console), console,
                       versions, trained).run()
    finally:
        pool.close()
        policy.close()
    summary["policy"] = str(cfg.out / f"policy-{summary['versions']}")
    summary_path.write_text(json.dumps(summary, indent=2))
    console.print(f"wrote {cfg.out}: {summary['versions']} versions ({summary['updates']} this run, "
                  f"{summary['wall_s']:.0f} s), "
                  f"{summary['steps_per_s']:.2f} steps/s, desktops busy {summary['desktop_busy']:.0%}, trainer busy "
                  f"{summary['trainer_busy']:.0%}, lag {summary['lag_mean'] or 0:.2f} mean / {summary['lag_max']} max")
    return summary
