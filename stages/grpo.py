"""`computerrl grpo`: one step-level GRPO update of the policy from a batch of rollouts.

The loss is the paper's, written out with its formula in `policy/grpo_loss.py`. How this stage departs from the
textbook (trajectory-level) GRPO:
1. Every step is a sample: its reward is its trajectory's outcome gated by its own action's
   validity, normalised over all steps of the task's G trajectories (the ComputerRL form).
2. Groups whose steps all earned the same reward are skipped (A = 0 everywhere), and counted —
   unless an `--anchor` holds them: then their rows enter with A = 0 and only the anchor acts on them
   (`policy/grpo_loss.py`). Aborted trajectories (a desktop was lost) are left out entirely: they say
   nothing of the policy.
3. πold is the sampler's own log-probabilities when the trainer's engine sampled the rows in
   float32. Rows of another engine or precision (`transformers:bfloat16`, `llamacpp:f16`, vLLM, a
   server) or by an older policy version than --model (`async-rl`'s, a lag behind) get πold
   recomputed by the trainer before the first epoch, and a truncated importance weight
   min(πold/πsampler, cap) per token (as verl and TRL).
4. Several epochs over the one batch (`--epochs`), each in `--updates-per-epoch` optimizer steps;
   the loss is the token-mean over the step's response tokens; logits only at response positions.

Reads:  --rollouts, one or more step datasets (schemas.STEP_FEATURES); --model, the policy that
        sampled them (normally); --ref, the KL reference (when --beta > 0).
Writes: --out, the updated checkpoint (full, or a LoRA adapter that rollout loads) with
        lineage.json, summary.json and OUT/metrics: per optimizer step loss, entropy, kl, anchor,
        clip_low, clip_high, ratio, grad_norm, lr, tokens, and the batch's mean_reward,
        skipped_groups, groups, distinct_actions (mean distinct actions per group), stale_rows (sampled
        by an older version), is_weight_mean and is_clip_fraction (the truncated importance weights).

    computerrl grpo --rollouts runs/rollout-0 --out runs/policy-1
    accelerate launch --config_file configs/accelerate/fsdp.yaml -m computerrl.cli.main grpo \\
        --rollouts runs/rollout-7 --model runs/policy-7 --ref runs/sft-bc --beta 0.001 --lr 1e-6 \\
        --dtype bfloat16 --gradient-checkpointing --out runs/policy-8
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections import defaultdict
from pathlib import Path

from computerrl.data.config import require_datasets, setting
from computerrl.data.folders import STEPS
from computerrl.policy.trainer import TrainConfig



@dataclasses.dataclass
class GRPOConfig(TrainConfig):
    rollouts: list[Path] = setting([], "Step dataset written by `rollout` (normally sampled by --model); repeat to "
                                       "pool several.")  # the step datasets of one RL iteration
    out: Path = Path("runs/policy")
    ref: str = setting("", "KL reference checkpoint ('' = --model); loaded only with --beta > 0.")
    beta: float = setting(0.0, "KL weight (k3 estimator); 0 loads no reference model.")
    eps_low: float = setting(0.2, "Clip the ratio below at 1 - eps_low.")
    eps_high: float = setting(0.28, "Clip the ratio above at 1 + eps_high (clip-higher).")
    epochs: int = setting(2, "Optimisation passes over the rollout batch.")
    updates_per_epoch: int = setting(1, "Optimizer steps per pass.")
    temperature: float = setting(0.0, "The rows' sampling temperature (0 = from the rollouts' lineage).")
    tis: bool = setting(True, "Truncated importance sampling for rows another engine sampled (vLLM, a server).")
    tis_cap: float = setting(2.0, "Cap of the truncated importance weight.")
    anchor: str = setting("", "Hold what the policy solves while it learns: '' (off), 'nll' (a likelihood term on "
                              "every play that earned a reward, all-win groups included) or 'kl' (k2 KL to --ref on "
                              "every played row). Groups without spread then enter the update, with A = 0.")
    anchor_weight: float = setting(0.1, "Weight of the --anchor term (per token, beside the clipped surrogate's "
                                        "token-mean over the rows with signal).")
    lr: float = 1e-5

    def __post_init__(self):
        super().__post_init__()
        self.rollouts = [Path(p) for p in self.rollouts]
        if not self.rollouts:
            raise ValueError("give at least one step dataset with --rollouts")
        require_datasets(self.rollouts, "--rollouts", STEPS)
        check_update(self)


def check_update(c) -> None:
    """The update's own settings make sense together (`c`: a GRPOConfig, or any object with its fields)."""
    from computerrl.policy.grpo_loss import ANCHORS

    if c.epochs < 1 or c.updates_per_epoch < 1:
        raise ValueError("--epochs and --updates-per-epoch must be at least 1")
    if not (0 <= c.eps_low < 1 and c.eps_high >= 0 and c.beta >= 0 and c.tis_cap >= 1):
        raise ValueError("need 0 <= --eps-low < 1, --eps-high >= 0, --beta >= 0, --tis-cap >= 1")
    if c.anchor not in ANCHORS or c.anchor_weight < 0:
        raise ValueError(f"--anchor {c.anchor!r}: expected '', 'nll' or 'kl', with --anchor-weight >= 0")


# What a loop of updates (the schedule, async-rl) sets for each update itself; every other GRPOConfig field is
# one of the GRPO settings a loop passes through by name (`update_settings`), declared here alone.
SET_BY_THE_LOOP = ("rollouts", "model", "out", "ref", "seed", "overwrite", "temperature")


def update_settings(given: dict | list[str], where: str) -> dict:
    """GRPO settings by their names here (`{"lr": 1e-5}` from a settings file, or `["lr=1e-5"]` from a command
    line), each read as GRPOConfig's field type and checked as `grpo` checks them; ValueError, prefixed by
    `where`, names a wrong one."""
    import types

    from computerrl.data.config import default_of, stage_settings

    settings = stage_settings(given, GRPOConfig, SET_BY_THE_LOOP, where, "GRPO")
    defaults = {f.name: default_of(f) for f in dataclasses.fields(GRPOConfig) if f.name not in SET_BY_THE_LOOP}
    try:
        check_update(types.SimpleNamespace(**(defaults | settings)))
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None
    return settings


def load_rows(paths: list[Path]) -> list[dict]:
    """The rows GRPO reads, from every step dataset."""
    from computerrl.data.datasets_io import step_rows

    return step_rows(paths, ["task_id", "group_id", "sample", "prompt_ids", "response_ids", "behavior_logprobs",
                             "reward", "action", "action_valid", "engine", "policy_version", "error"], screens=True)


def sampling_temperature(paths: list[Path]) -> float:
    """The temperature the rollouts sampled at, from their lineage (they must agree)."""
    from computerrl.data.datasets_io import LINEAGE_FILE

    temps = set()
    for p in paths:
        card = json.loads((p / LINEAGE_FILE).read_text()) if (p / LINEAGE_FILE).exists() else {}
        temps.add(float(card.get("options", {}).get("temperature", 1.0)) or 1.0)
    if len(temps) > 1:
        raise ValueError(f"the rollouts were sampled at different temperatures {sorted(temps)}; pass --temperature")
    return temps.pop()


def batch_figures(rows: list[dict], skipped: set[str]) -> dict:
    """What the batch says of the policy: reward, groups with no signal, how varied the actions were."""
    from computerrl.data.stats import action_function

    actions = defaultdict(set)
    for r in rows:
        actions[r["group_id"]].add(r["action"] if r["action_valid"] else "invalid")
    groups = len(actions)
    return {"mean_reward": sum(r["reward"] for r in rows) / len(rows), "groups": groups,
            "skipped_groups": len(skipped), "skipped_fraction": len(skipped) / groups,
            "distinct_actions": sum(map(len, actions.values())) / groups,
            "action_functions": len({action_function(r) for r in rows})}


def anchored(row: dict, anchor: str) -> bool:
    """Whether the anchor holds this row: every played row for "kl", the rewarded ones for "nll"."""
    return anchor == "kl" or anchor == "nll" and row["reward"] > 0


def run(cfg: GRPOConfig, console=None) -> dict:
    import torch
    from rich.console import Console

    from computerrl.data.datasets_io import lineage
    from computerrl.policy.checkpoint import policy_version, resolve
    from computerrl.policy.grpo_loss import Clip, fixed_logprobs, group_advantages, rows_loss, weight_figures
    from computerrl.policy.trainer import Trainer, micro_batches, new_version, progress
    from computerrl.policy.vision import screen_prompts

    console = console or Console(soft_wrap=True)
    if cfg.out.exists() and not cfg.state_dir.exists() and not cfg.overwrite:
        console.print(f"{cfg.out} is already trained (--overwrite trains again)")
        return json.loads((cfg.out / "summary.json").read_text())
    all_rows = load_rows(cfg.rollouts)
    played = [r for r in all_rows if not r["error"]]  # aborted trajectories say nothing of the policy
    if not played:
        raise ValueError(f"no trajectory in {', '.join(map(str, cfg.rollouts))} was played to its end")
    advantages, skipped = group_advantages([r["reward"] for r in played], [r["group_id"] for r in played])
    rows = [dict(r, advantage=a, signal=r["group_id"] not in skipped, anchored=anchored(r, cfg.anchor))
            for r, a in zip(played, advantages)]
    rows = [r for r in rows if r["signal"] or r["anchored"]]  # with an anchor, flat groups' rows it holds stay
    untrainable = [r for r in rows if not r["response_ids"] or not r["prompt_ids"]]
    rows = [r for r in rows if r["response_ids"] and r["prompt_ids"]]
    version = policy_version(resolve(cfg.model))
    figures = batch_figures(played, skipped)
    figures.update(aborted_rows=len(all_rows) - len(played), rows_without_token_ids=len(untrainable), rows=len(rows),
                   stale_rows=sum(r["policy_version"] != version for r in played), is_weight_mean=math.nan,
                   is_clip_fraction=math.nan)
    temperature = cfg.temperature or sampling_temperature(cfg.rollouts)
    clip = Clip(cfg.eps_low, cfg.eps_high, cfg.beta, cfg.tis_cap, cfg.anchor, cfg.anchor_weight)
    reference = cfg.beta or cfg.anchor == "kl"
    trainer = Trainer(cfg, console, passes=cfg.epochs)
    console.print(f"grpo: {len(played)} steps of {figures['groups']} groups, mean reward {figures['mean_reward']:.3f}; "
                  f"{len(skipped)} groups without spread" + (" (anchored)" if cfg.anchor else " skipped") +
                  f"; {len(rows)} steps to train on"
                  + (f"; {len(untrainable)} rows without token ids (a server that gave none) left out" if untrainable else ""))
    if rows:
        prompts = screen_prompts(trainer.processor, rows, all_rows) if trainer.processor else [r["prompt_ids"] for r in rows]
        answers = [r["response_ids"] for r in rows]
        fixed = trainer.state.setdefault("fixed", {})  # πold and πref per token, taken before the first update
        if "old" not in fixed:
            fixed.update(fixed_logprobs(trainer, rows, temperature, micro_batch_tokens=cfg.micro_batch_tokens,
                                        tis_cap=cfg.tis_cap if cfg.tis else None,
                                        ref=(cfg.ref or cfg.model) if reference else None, dtype=cfg.dtype,
                                        prompts=prompts, version=version))
            trainer.save_state()
        figures.update(weight_figures(fixed["weight"], cfg.tis_cap))
        old = [torch.tensor(x) for x in fixed["old"]]
        weight = [torch.tensor(x) if x is not None else None for x in fixed["weight"]]
        ref = [torch.tensor(x) for x in fixed["ref"]] if reference else None
        surrogate_scale = 1.0  # the step's tokens / its rows-with-signal's: the surrogate's own token-mean

        def loss_fn(batch: list[int]):
            return rows_loss(trainer.model, [prompts[i] for i in batch], [answers[i] for i in batch],
                             [rows[i]["advantage"] for i in batch], [old[i] for i in batch], clip,
                             temperature=temperature, pad_id=trainer.pad_id, ref=[ref[i] for i in batch] if ref else None,
                             weight=[weight[i] for i in batch], scale=[surrogate_scale] * len(batch),
                             anchored=[float(rows[i]["anchored"]) for i in batch], trunk=trainer.trunk)

        per_epoch = min(cfg.updates_per_epoch, len(rows))
        with progress(console, f"grpo {cfg.out.name}", cfg.epochs * per_epoch, trainer.updates) as advance:
            for epoch in range(cfg.epochs):
                order = list(range(len(rows)))
                random.Random(cfg.seed * 7919 + epoch).shuffle(order)
                for u in range(per_epoch):
                    if epoch * per_epoch + u < trainer.updates:
                        continue  # done before the run was interrupted
                    mine = order[u::per_epoch]  # this optimizer step's rows, in micro-batches of alike prompts
                    part = [[mine[j] for j in m] for m in micro_batches(
                        [prompts[i] for i in mine], [len(prompts[i]) + len(answers[i]) for i in mine],
                        cfg.micro_batch_tokens, cfg.seed + epoch)]
                    tokens = sum(len(answers[i]) for i in mine)
                    surrogate_scale = tokens / max(1, sum(len(answers[i]) for i in mine if rows[i]["signal"]))
                    logs = trainer.step(part, tokens, loss_fn)
                    logs.update(figures, epoch=epoch)
                    trainer.record(logs)
                    advance(f"loss {logs['loss']:+.4f} entropy {logs['entropy']:.2f} clip "
                            f"{logs['clip_low']:.2f}/{logs['clip_high']:.2f}")
    else:
        console.print("[yellow]no step carries a learning signal: the checkpoint is written unchanged[/]")
        trainer.record(dict(figures, loss=0.0, entropy=float("nan"), kl=0.0, anchor=0.0, ratio=1.0, clip_low=0.0,
                            clip_high=0.0, grad_norm=0.0, lr=cfg.lr, tokens=0, epoch=0))
    summary = dict(figures, updates=trainer.updates, temperature=temperature,
                   last={k: v for k, v in trainer.state["log"][-1].items() if k not in figures})
    card = lineage("grpo", cfg, {"rollouts": [str(p) for p in cfg.rollouts], "model": cfg.model, "ref": cfg.ref})
    card.update(policy_version=new_version("grpo", cfg.out), parent=version)
    trainer.state.pop("fixed", None)
    out = trainer.save_final(card, summary)
    console.print(f"wrote {out}: {trainer.updates} optimizer steps on {len(rows)} steps")
    return summary
