"""Step-level GRPO, the ComputerRL paper's form, written out.

For a task's G trajectories every step is one sample with reward r (1 when its trajectory
succeeded and its action was valid). With R the rewards of all steps of the group:

    A    = (r − mean(R)) / (std(R) + ε)                  a group with no spread is skipped
    ρ    = exp(log πθ − log πold)                        per response token
    L    = −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A)·w + β·k3(πθ ‖ πref)
    k3   = exp(log πref − log πθ) − (log πref − log πθ) − 1
    loss = token-mean of L over every response token of the batch

An anchor (`Clip.anchor`) holds what the policy already solves while the groups with signal move it:
rows of groups without spread (all wins, all losses) then enter the update too, with A = 0, and every
token of an anchored row adds

    nll: −w·log πθ                       on the plays that earned a reward (all-win groups included)
    kl:  w·½(log πθ − log πref)²         on every played row (k2: its gradient is the reverse KL's,
                                         where k3 as a loss is biased once πθ moves from the sampler)

The surrogate keeps its own token-mean, over the rows with signal, so an anchor adds a term without
shrinking the policy-gradient step (TRL's flat rows, with A = 0, count in its denominator and do).

w is 1 when the trainer itself sampled the rows. When another engine did (vLLM, a server), its
numbers differ from the trainer's by kernels and precision, so πold is recomputed by the trainer
and w = min(πold_trainer / π_behaviour, cap) corrects for the mismatch (truncated importance
sampling, as verl and TRL do). Rows an older policy version sampled (the asynchronous loop's, a lag
behind the trainer) are corrected the same way: πold is the trainer's current policy, w weighs
the lag.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Sequence


def group_advantages(rewards: Sequence[float], groups: Sequence[str], eps: float = 1e-6) -> tuple[list[float], set[str]]:
    """(advantage of every step, the groups skipped because all their rewards are equal).

    std is the population standard deviation over the group's steps (all steps of its G trajectories)."""
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    advantages, skipped = [0.0] * len(rewards), set()
    for g, idx in members.items():
        values = [rewards[i] for i in idx]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if std == 0:  # no signal: every step would get A = 0
            skipped.add(g)
            continue
        for i in idx:
            advantages[i] = (rewards[i] - mean) / (std + eps)
    return advantages, skipped


ANCHORS = ("", "nll", "kl")


@dataclasses.dataclass(frozen=True)
class Clip:
    low: float = 0.2  # ε_low: ρ below 1 − ε_low stops pushing a negative-advantage token down
    high: float = 0.28  # ε_high (clip-higher, DAPO): more room for raising unlikely tokens
    beta: float = 0.0  # KL weight; 0 = no reference model at all
    tis_cap: float = 2.0  # cap of the truncated importance weight for rows of another engine
    anchor: str = ""  # "", "nll" or "kl": the term that holds solved answers (module docstring)
    anchor_weight: float = 0.0  # w

    def __post_init__(self):
        if self.anchor not in ANCHORS:
            raise ValueError(f"anchor {self.anchor!r}: expected one of {', '.join(map(repr, ANCHORS))}")


def token_losses(logp, old_logp, advantages, clip: Clip, *, ref_logp=None, is_weight=None, scale=None, anchored=None):
    """Per-token GRPO loss and the per-token quantities logged beside it.

    All arguments are 1-D tensors over the same response tokens (`advantages` repeated per token
    of its step); `ref_logp` is needed when clip.beta > 0 or the anchor is "kl"; `is_weight` is w above
    (None = 1); `scale` multiplies the surrogate (None = 1); `anchored` is 1 on the tokens the anchor holds.
    Returns (loss per token, {"ratio", "clipped_low", "clipped_high", "kl", "anchor"} per token, detached)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    surrogate = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip.low, 1 + clip.high) * advantages
    loss = -torch.minimum(surrogate, clipped)
    if is_weight is not None:
        loss = loss * is_weight
    if scale is not None:
        loss = loss * scale
    kl = torch.zeros_like(logp)
    if clip.beta:
        # k3: unbiased, always ≥ 0, low variance (Schulman's "approximating KL divergence").
        delta = ref_logp - logp
        kl = torch.exp(delta) - delta - 1
        loss = loss + clip.beta * kl
    anchor = torch.zeros_like(logp)
    if clip.anchor and anchored is not None:
        anchor = anchored * (-logp if clip.anchor == "nll" else 0.5 * (logp - ref_logp) ** 2)
        loss = loss + clip.anchor_weight * anchor
    # Where the clip is active, the gradient is zero: count those tokens on each side.
    stats = {"ratio": ratio.detach(), "kl": kl.detach(), "anchor": anchor.detach(),
             "clipped_low": ((ratio < 1 - clip.low) & (advantages < 0)).detach(),
             "clipped_high": ((ratio > 1 + clip.high) & (advantages > 0)).detach()}
    return loss, stats


def truncated_is_weight(trainer_old_logp, behavior_logp, cap: float):
    """w = min(exp(log πold_trainer − log π_behaviour), cap), per token, no gradient."""
    import torch

    return torch.clamp(torch.exp(trainer_old_logp - behavior_logp), max=cap).detach()


def rows_loss(model, prompts, answers, advantages, old, clip: Clip, *, temperature: float = 1.0, pad_id: int = 0,
              ref=None, weight=None, scale=None, anchored=None, trunk=None):
    """(sum of the per-token losses, summed logs) of some steps: the stage's loss on one micro-batch.

    `prompts`/`answers`: token ids per step; `advantages`: one float per step; `old`, `ref`,
    `weight`: one 1-D tensor per step (ref/weight lists may be None, an entry of weight None = 1);
    `scale`, `anchored`: one float per step (None = 1 and none), as `token_losses` takes them per token;
    `trunk`: the trainer's kept output of the frozen layers, if any (`response_logprobs`). The caller divides
    by the response tokens of the whole optimizer step (token-mean)."""
    import torch

    from computerrl.policy.logprobs import response_logprobs

    logp, entropy = response_logprobs(model, prompts, answers, temperature, pad_id=pad_id, with_entropy=True,
                                      trunk=trunk)
    logp = torch.cat(logp)
    like = {"device": logp.device, "dtype": logp.dtype}
    w = None
    if weight is not None:
        w = torch.cat([x.to(**like) if x is not None else torch.ones(len(a), **like) for a, x in zip(answers, weight)])

    def per_token(values):
        return None if values is None else torch.cat([torch.full((len(a),), float(x), **like)
                                                      for a, x in zip(answers, values)])

    loss, stats = token_losses(logp, torch.cat(list(old)).to(**like), per_token(advantages), clip,
                               ref_logp=torch.cat(list(ref)).to(**like) if ref is not None else None, is_weight=w,
                               scale=per_token(scale), anchored=per_token(anchored))
    total = loss.sum()
    return total, {"loss": total.item(), "entropy": torch.cat(entropy).sum().item(), "kl": stats["kl"].sum().item(),
                   "anchor": stats["anchor"].sum().item(),
                   "ratio": stats["ratio"].sum().item(), "clip_low": stats["clipped_low"].sum().item(),
                   "clip_high": stats["clipped_high"].sum().item()}


OWN_ENGINE = "transformers"  # rows it sampled (in float32) carry the trainer's own numbers as πold


def fixed_logprobs(trainer, rows: list[dict], temperature: float, *, micro_batch_tokens: int,
                   tis_cap: float | None, ref: str | None, dtype: str, prompts: list | None = None,
                   version: str = "") -> dict:
    """What GRPO holds fixed over an update, per token of each row's response, as lists (saved for a resume):
    πold (the sampler's numbers; the trainer's, for rows another engine or another policy version than
    `version` sampled, with the truncated importance weight w when `tis_cap` is set) and πref (the
    checkpoint `ref`; None: β = 0, no KL). `prompts`: the rows' prompts as the model reads them (a vision
    model's `ScreenPrompt`s; default: their prompt_ids); `version`: the trained model's ("" = any)."""
    import torch

    from computerrl.policy.checkpoint import load_model, resolve
    from computerrl.policy.logprobs import response_logprobs
    from computerrl.policy.trainer import micro_batches

    prompts = prompts or [r["prompt_ids"] for r in rows]
    answers = [r["response_ids"] for r in rows]

    def trainer_logprobs(model, idx, trunk=None):
        out, was_training = {}, model.training
        model.eval()
        with torch.no_grad():
            for batch in micro_batches([prompts[i] for i in idx], [len(prompts[i]) + len(answers[i]) for i in idx],
                                       micro_batch_tokens, 0):
                rows_ = [idx[j] for j in batch]
                logp = response_logprobs(model, [prompts[i] for i in rows_], [answers[i] for i in rows_], temperature,
                                         pad_id=trainer.pad_id, trunk=trunk)
                out.update({i: lp.float().cpu().tolist() for i, lp in zip(rows_, logp)})
        model.train(was_training)
        return out

    foreign = [i for i, r in enumerate(rows)
               if r["engine"] != OWN_ENGINE or len(r["behavior_logprobs"]) != len(r["response_ids"])
               or version and r.get("policy_version", version) != version]
    recomputed = trainer_logprobs(trainer.model, foreign, trainer.trunk) if foreign else {}
    old, weight = [], []
    for i, r in enumerate(rows):
        behavior = r["behavior_logprobs"]
        if i not in recomputed:
            old.append(list(behavior))
            weight.append(None)
            continue
        old.append(recomputed[i])
        known = tis_cap is not None and len(behavior) == len(r["response_ids"])
        weight.append(truncated_is_weight(torch.tensor(recomputed[i]), torch.tensor(behavior), tis_cap).tolist()
                      if known else None)
    fixed = {"old": old, "weight": weight}
    if ref is not None:
        ref_model = load_model(resolve(ref, "--ref"), device=str(trainer.device), dtype=dtype)
        ref_model.eval()
        by_row = trainer_logprobs(ref_model, list(range(len(rows))))
        fixed["ref"] = [by_row[i] for i in range(len(rows))]
        del ref_model
    return fixed


def weight_figures(weights: list, cap: float) -> dict:
    """The truncated importance weights of an update: their token mean and the share clipped at the cap
    (nan when no row needed one)."""
    flat = [w for ws in weights if ws is not None for w in ws]
    if not flat:
        return {"is_weight_mean": math.nan, "is_clip_fraction": math.nan}
    return {"is_weight_mean": sum(flat) / len(flat), "is_clip_fraction": sum(w >= cap for w in flat) / len(flat)}
