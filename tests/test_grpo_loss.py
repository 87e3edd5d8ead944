"""The GRPO loss, checked numerically: cases worked by hand, a finite-difference gradient check on a
tiny model, and agreement with a plain implementation written here from the formula in policy/grpo_loss.py."""

from __future__ import annotations

import math

import pytest
import torch

from computerrl.policy.grpo_loss import Clip, group_advantages, rows_loss, token_losses, truncated_is_weight


def test_advantages_are_normalised_over_the_group_and_flat_groups_are_skipped():
    adv, skipped = group_advantages([1, 0, 1, 0, 1, 1, 0.0], ["a", "a", "a", "a", "b", "b", "c"])
    # group a: mean 0.5, population std 0.5 -> ±0.5/(0.5 + 1e-6)
    assert adv[:4] == pytest.approx([0.5 / 0.500001, -0.5 / 0.500001, 0.5 / 0.500001, -0.5 / 0.500001], rel=1e-9)
    assert adv[4:] == [0.0, 0.0, 0.0] and skipped == {"b", "c"}
    adv, _ = group_advantages([1, 0, 0, 0], ["g"] * 4)
    std = math.sqrt(3) / 4  # mean 0.25, variance (0.75² + 3·0.25²) / 4 = 3/16
    assert adv == pytest.approx([0.75 / (std + 1e-6), -0.25 / (std + 1e-6), -0.25 / (std + 1e-6), -0.25 / (std + 1e-6)])


def _one(ratio: float, advantage: float, clip=Clip(0.2, 0.28), **kw):
    logp = torch.tensor([math.log(ratio)])
    loss, stats = token_losses(logp, torch.zeros(1), torch.tensor([advantage]), clip, **kw)
    return loss.item(), {k: v.item() for k, v in stats.items()}


def test_clipped_surrogate_by_hand():
    assert _one(1.0, 2.0)[0] == pytest.approx(-2.0)  # on-policy: -A
    loss, s = _one(1.5, 1.0)  # above 1 + eps_high with A > 0: clipped at 1.28
    assert loss == pytest.approx(-1.28) and s["clipped_high"] and not s["clipped_low"]
    loss, s = _one(1.2, 1.0)  # inside the clip-higher range (it would be clipped at eps 0.2)
    assert loss == pytest.approx(-1.2) and not s["clipped_high"]
    loss, s = _one(0.5, -1.0)  # below 1 - eps_low with A < 0: clipped at 0.8
    assert loss == pytest.approx(0.8) and s["clipped_low"]
    loss, s = _one(0.5, 1.0)  # the pessimistic min keeps the unclipped 0.5 when it is smaller
    assert loss == pytest.approx(-0.5) and not s["clipped_low"] and not s["clipped_high"]
    loss, _ = _one(2.0, -1.0)  # ratio above the clip with A < 0: never clipped (min picks -2)
    assert loss == pytest.approx(2.0)


def test_k3_kl_and_importance_weight_by_hand():
    clip = Clip(0.2, 0.28, beta=0.5)
    loss, s = _one(1.0, 1.0, clip, ref_logp=torch.tensor([1.0]))  # logπref - logπθ = 1
    assert s["kl"] == pytest.approx(math.e - 2) and loss == pytest.approx(-1.0 + 0.5 * (math.e - 2))
    _, s = _one(1.0, 1.0, clip, ref_logp=torch.tensor([0.0]))
    assert s["kl"] == 0.0
    loss, _ = _one(1.0, 3.0, is_weight=torch.tensor([0.25]))
    assert loss == pytest.approx(-0.75)
    w = truncated_is_weight(torch.log(torch.tensor([0.5, 0.5])), torch.log(torch.tensor([0.5, 0.1])), cap=2.0)
    assert w.tolist() == pytest.approx([1.0, 2.0])  # 0.5/0.1 = 5 is truncated to the cap


def tiny_model(dtype=torch.float64, seed=0):
    """A 2-layer GPT-2 that computes in float64 throughout (Llama's RMSNorm works in float32 whatever
    the weights' dtype, which would drown a finite difference in rounding)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=64, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).to(dtype)


BATCH = {  # two steps of different lengths, one positive and one negative advantage
    "prompts": [[1, 5, 7, 9, 3], [2, 4, 6]],
    "answers": [[11, 12, 13], [14, 15, 16, 17, 2]],
    "advantages": [1.3, -0.7],
}


def _stage_loss(model, old, clip, ref=None, weight=None, temperature=1.0):
    total, _ = rows_loss(model, BATCH["prompts"], BATCH["answers"], BATCH["advantages"], old, clip,
                         temperature=temperature, pad_id=0, ref=ref, weight=weight)
    return total / sum(map(len, BATCH["answers"]))


def _perturbed_old(model, temperature=1.0, shift=0.15):
    """πold a little away from πθ, so that ratios differ from 1 (some clipped, some not)."""
    from computerrl.policy.logprobs import response_logprobs

    with torch.no_grad():
        now = response_logprobs(model, BATCH["prompts"], BATCH["answers"], temperature)
    return [x + shift * torch.linspace(-2, 2, len(x), dtype=x.dtype) for x in now]


def test_gradient_matches_finite_differences_on_a_tiny_model():
    model = tiny_model()
    clip = Clip(0.2, 0.28, beta=0.1)
    old = _perturbed_old(model)
    ref = [x - 0.3 for x in old]
    loss = _stage_loss(model, old, clip, ref=ref)
    loss.backward()
    h = 1e-6
    params = dict(model.named_parameters())
    for name in ("transformer.h.0.attn.c_attn.weight", "transformer.h.1.mlp.c_proj.weight", "transformer.wte.weight",
                 "transformer.wpe.weight", "transformer.ln_f.weight"):
        p = params[name]
        for index in [(0,) * p.dim(), tuple(s - 1 for s in p.shape), tuple(s // 2 for s in p.shape)]:
            with torch.no_grad():
                p[index] += h
                up = _stage_loss(model, old, clip, ref=ref).item()
                p[index] -= 2 * h
                down = _stage_loss(model, old, clip, ref=ref).item()
                p[index] += h
            numeric = (up - down) / (2 * h)
            assert p.grad[index].item() == pytest.approx(numeric, rel=1e-4, abs=1e-8), (name, index)


def plain_grpo_loss(model, prompts, answers, advantages, old, clip: Clip, temperature=1.0, ref=None, weight=None):
    """The formula of policy/grpo_loss.py, line by line, the slow obvious way: right-padded batch, logits of every
    position over the full vocabulary, a mask over response tokens, a token-mean at the end."""
    width = max(len(p) + len(a) for p, a in zip(prompts, answers))
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    attention = torch.zeros(len(prompts), width, dtype=torch.long)
    shape, f64 = (len(prompts), width), torch.float64
    response = torch.zeros(shape, dtype=f64)  # 1 where token t is an answer token
    A, old_t, ref_t, w_t = (torch.zeros(shape, dtype=f64), torch.zeros(shape, dtype=f64),
                            torch.zeros(shape, dtype=f64), torch.ones(shape, dtype=f64))
    for b, (p, a) in enumerate(zip(prompts, answers)):
        ids[b, :len(p) + len(a)] = torch.tensor(p + a)
        attention[b, :len(p) + len(a)] = 1
        response[b, len(p):len(p) + len(a)] = 1
        A[b, len(p):len(p) + len(a)] = advantages[b]
        old_t[b, len(p):len(p) + len(a)] = old[b]
        if ref is not None:
            ref_t[b, len(p):len(p) + len(a)] = ref[b]
        if weight is not None:
            w_t[b, len(p):len(p) + len(a)] = weight[b]
    logits = model(input_ids=ids, attention_mask=attention).logits.double()
    logprobs_all = torch.log_softmax(logits / temperature, dim=-1)
    # the token at t is predicted at t - 1
    logp = torch.zeros(len(prompts), width, dtype=logprobs_all.dtype)
    logp[:, 1:] = logprobs_all[:, :-1].gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    rho = torch.exp(logp - old_t)
    unclipped = rho * A
    clipped = torch.clamp(rho, 1 - clip.low, 1 + clip.high) * A
    per_token = -torch.minimum(unclipped, clipped) * w_t
    if ref is not None:
        per_token = per_token + clip.beta * (torch.exp(ref_t - logp) - (ref_t - logp) - 1)
    return (per_token * response).sum() / response.sum()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_stage_loss_agrees_with_the_plain_implementation_on_a_tiny_model(temperature):
    model = tiny_model()
    clip = Clip(0.2, 0.28, beta=0.05)
    old = _perturbed_old(model, temperature)
    ref = [x + 0.2 for x in old]
    weight = [torch.full((3,), 0.9, dtype=torch.float64), None]
    mine = _stage_loss(model, old, clip, ref=ref, weight=weight, temperature=temperature)
    theirs = plain_grpo_loss(model, BATCH["prompts"], BATCH["answers"], BATCH["advantages"], old, clip, temperature,
                             ref, [weight[0], torch.ones(5, dtype=torch.float64)])
    assert mine.item() == pytest.approx(theirs.item(), abs=1e-10)


def test_stage_loss_and_gradient_agree_with_the_plain_implementation_on_the_embedded_model():
    from computerrl.policy.checkpoint import embedded_checkpoint, load_model

    model = load_model(embedded_checkpoint(), trainable=True)
    rng = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 40000, (n,), generator=rng).tolist() for n in (90, 40, 65)]
    answers = [torch.randint(10, 40000, (n,), generator=rng).tolist() for n in (12, 30, 7)]
    advantages = [0.8, -1.1, 0.3]
    clip = Clip(0.2, 0.28, beta=0.02)
    from computerrl.policy.logprobs import response_logprobs

    with torch.no_grad():
        now = response_logprobs(model, prompts, answers)
    old = [x + 0.1 * torch.linspace(-2, 2, len(x)) for x in now]
    ref = [x - 0.05 for x in now]
    total, _ = rows_loss(model, prompts, answers, advantages, old, clip, ref=ref)
    mine = total / sum(map(len, answers))
    mine.backward()
    grad_mine = model.model.layers[3].mlp.up_proj.weight.grad.clone()
    model.zero_grad()
    theirs = plain_grpo_loss(model, prompts, answers, advantages, old, clip, ref=ref)
    theirs.backward()
    grad_theirs = model.model.layers[3].mlp.up_proj.weight.grad
    assert abs(mine.item() - theirs.item()) <= 1e-5
    assert torch.allclose(grad_mine, grad_theirs.float(), atol=1e-6, rtol=1e-3)


def test_anchor_terms_by_hand():
    """nll adds −w·log πθ on the tokens it holds, kl adds w·½(log πθ − log πref)²; the surrogate's scale
    multiplies only the surrogate; a token the anchor does not hold gets no anchor term."""
    logp, zero, adv = torch.log(torch.tensor([0.5, 0.25])), torch.zeros(2), torch.tensor([1.0, 1.0])
    old = logp.clone()  # on-policy: the surrogate is −A per token
    nll = Clip(anchor="nll", anchor_weight=0.1)
    loss, s = token_losses(logp, old, adv, nll, scale=torch.tensor([2.0, 2.0]), anchored=torch.tensor([1.0, 0.0]))
    assert loss.tolist() == pytest.approx([-2.0 + 0.1 * math.log(2), -2.0])
    assert s["anchor"].tolist() == pytest.approx([math.log(2), 0.0])
    kl = Clip(anchor="kl", anchor_weight=0.5)
    loss, s = token_losses(logp, old, zero, kl, ref_logp=logp - 0.4, anchored=torch.ones(2))  # A = 0: a flat group
    assert loss.tolist() == pytest.approx([0.5 * 0.5 * 0.16] * 2) and s["anchor"].tolist() == pytest.approx([0.08] * 2)
    with pytest.raises(ValueError, match="'nll', 'kl'"):
        Clip(anchor="l2")
