"""`grpo`'s loss and gradient against a reference implementation's: TRL's `GRPOTrainer._compute_loss`
(PyPI `trl`, a test dependency), given the same log-probs, advantages, clip range and KL weight.

TRL's trainer is built without its `__init__` (which wants a dataset, reward functions and a generation
engine): only the attributes its loss reads are set, and its log-prob pass returns ours, padded as TRL
pads (completions right-padded, a mask over them). The model is test_grpo_loss's float64 GPT-2, so the
two agree to float64 rounding.

Where the two match, and where they differ (the closing note of issue 42 repeats this):
- per-token clipped surrogate with ε_low / ε_high (TRL's `epsilon`, `epsilon_high`), k3 KL to the reference
  added per token before the normalisation: the same;
- normalisation: ours is the token-mean over every response token of the optimizer step, whatever the
  micro-batches: TRL's `loss_type="bnpo"` within one pass, and `"dapo"` (normalised by the tokens of the
  whole batch) across gradient-accumulation passes;
- flat groups: we drop them from the batch, so from the denominator; TRL keeps their rows with A = 0, whose
  tokens dilute every other token's weight (TRL #6367): our step is TRL's times all tokens / signal tokens;
- advantages (not compared here): ours normalise each step's reward over all the group's steps with the
  population std and ε = 1e-6; TRL one reward per completion with Bessel's std and ε = 1e-4.
"""

from __future__ import annotations

import types
from collections import defaultdict

import pytest
import torch

from computerrl.policy.grpo_loss import Clip, rows_loss
from computerrl.policy.logprobs import response_logprobs
from test_grpo_loss import tiny_model

PROMPTS = [[1, 5, 7, 9, 3], [2, 4, 6], [3, 3, 8, 1], [9, 2]]
ANSWERS = [[11, 12, 13], [14, 15, 16, 17, 2], [21, 22], [23, 24, 25, 26]]
ADVANTAGES = [1.3, -0.7, 0.4, -1.0]
CLIP = Clip(0.2, 0.28, beta=0.05)


def padded(per_row: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """TRL's (B, T) layout: completions right-padded, with their mask."""
    width = max(len(x) for x in per_row)
    out = torch.zeros(len(per_row), width, dtype=per_row[0].dtype)
    mask = torch.zeros(len(per_row), width, dtype=torch.long)
    for b, x in enumerate(per_row):
        out[b, :len(x)] = x
        mask[b, :len(x)] = 1
    return out, mask


def trl_loss(model, rows: list[int], old, ref, *, loss_type: str, accumulation: int = 1, batch_tokens: int = 0,
             advantages=ADVANTAGES, clip: Clip = CLIP):
    """TRL's loss for `rows` of the module's batch, log-probs ours (as the same differentiable tensors)."""
    from trl import GRPOTrainer

    logp, entropy = response_logprobs(model, [PROMPTS[i] for i in rows], [ANSWERS[i] for i in rows], with_entropy=True)
    logp, mask = padded(logp)
    trainer = GRPOTrainer.__new__(GRPOTrainer)
    trainer.__dict__.update(
        loss_type=loss_type, beta=clip.beta, epsilon_low=clip.low, epsilon_high=clip.high,
        importance_sampling_level="token", top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        use_vllm=False, aux_loss_enabled=False, _entropy_bonus_enabled=False, _metrics={"train": defaultdict(list)},
        current_gradient_accumulation_steps=accumulation, model=types.SimpleNamespace(training=True),
        args=types.SimpleNamespace(use_bias_correction_kl=False, delta=None, steps_per_generation=accumulation),
        accelerator=types.SimpleNamespace(num_processes=1, reduce=lambda t, reduction: t, gather=lambda t: t),
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, padded(entropy)[0], None))
    inputs = {"prompt_ids": torch.zeros(len(rows), 1, dtype=torch.long), "prompt_mask": torch.ones(len(rows), 1),
              "completion_ids": mask.clone(), "completion_mask": mask,
              "advantages": torch.tensor([advantages[i] for i in rows], dtype=logp.dtype),
              "old_per_token_logps": padded([old[i] for i in rows])[0],
              "ref_per_token_logps": padded([ref[i] for i in rows])[0],
              "num_items_in_batch": torch.tensor(float(batch_tokens))}
    return trainer._compute_loss(None, inputs)


def ours(model, rows: list[int], old, ref, step_tokens: int, *, advantages=ADVANTAGES, clip: Clip = CLIP):
    total, _ = rows_loss(model, [PROMPTS[i] for i in rows], [ANSWERS[i] for i in rows], [advantages[i] for i in rows],
                         [old[i] for i in rows], clip, ref=[ref[i] for i in rows] if clip.beta else None)
    return total / step_tokens


def gradients(model, loss_of) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad()
    loss = loss_of()
    loss.backward()
    return loss.item(), [p.grad.clone() for p in model.parameters()]


@pytest.fixture
def setup():
    model = tiny_model()
    with torch.no_grad():
        now = response_logprobs(model, PROMPTS, ANSWERS)
    old = [x + 0.15 * torch.linspace(-2, 2, len(x), dtype=x.dtype) for x in now]  # ratios off 1, some clipped
    ref = [x - 0.3 for x in now]
    return model, old, ref


def agree(a: tuple[float, list[torch.Tensor]], b: tuple[float, list[torch.Tensor]]) -> None:
    assert a[0] == pytest.approx(b[0], abs=1e-12)
    for x, y in zip(a[1], b[1]):
        assert torch.allclose(x, y, atol=1e-12, rtol=1e-9)


def test_one_pass_is_trls_bnpo_loss_and_gradient(setup):
    model, old, ref = setup
    every = list(range(len(PROMPTS)))
    tokens = sum(map(len, ANSWERS))
    mine = gradients(model, lambda: ours(model, every, old, ref, tokens))
    agree(mine, gradients(model, lambda: trl_loss(model, every, old, ref, loss_type="bnpo")))
    # and not TRL's default "grpo" (a mean per sequence, then over sequences): rows of unequal length weigh apart
    assert gradients(model, lambda: trl_loss(model, every, old, ref, loss_type="grpo"))[0] != pytest.approx(mine[0])


def test_micro_batches_of_one_step_are_trls_dapo_over_accumulation(setup):
    """Two passes of one optimizer step: each normalised by the tokens of the whole step, as TRL's "dapo"."""
    model, old, ref = setup
    tokens = sum(map(len, ANSWERS))
    parts = ([0, 1], [2, 3])
    mine = gradients(model, lambda: sum(ours(model, part, old, ref, tokens) for part in parts))
    theirs = gradients(model, lambda: sum(trl_loss(model, part, old, ref, loss_type="dapo", accumulation=2,
                                                   batch_tokens=tokens) for part in parts))
    agree(mine, theirs)


def test_flat_groups_dilute_trls_step_and_not_ours(setup):
    """A flat group's rows (A = 0) stay in TRL's batch and count in its denominator; we leave them out. The
    same surrogate (no KL: it would act on the flat rows too), so our step is TRL's × all tokens / signal tokens."""
    model, old, ref = setup
    signal, flat = [0, 1], [2, 3]
    advantages = [ADVANTAGES[0], ADVANTAGES[1], 0.0, 0.0]
    no_kl = Clip(CLIP.low, CLIP.high, beta=0.0)
    signal_tokens, every_tokens = sum(len(ANSWERS[i]) for i in signal), sum(map(len, ANSWERS))
    mine = ours(model, signal, old, ref, signal_tokens, advantages=advantages, clip=no_kl)
    theirs = trl_loss(model, signal + flat, old, ref, loss_type="bnpo", advantages=advantages, clip=no_kl)
    assert mine.item() == pytest.approx(theirs.item() * every_tokens / signal_tokens, rel=1e-12)
    assert every_tokens / signal_tokens > 1.5  # the dilution is not a rounding matter
