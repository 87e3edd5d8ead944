"""`grpo --anchor`: an update whose signal comes from one task's mixed group, beside a task the policy
already solves (its group all wins, so without an anchor it is dropped from the update). The anchor holds
the solved task's answer in place where the plain update lets it drift; the anchor's groups enter the
update without changing the policy-gradient step. On the tiny stand-in model (conftest's `tiny_model`): what
is checked is the update's arithmetic on any model's log-probs, not what the embedded model knows."""

from __future__ import annotations

import pytest
import torch

from computerrl.data.datasets_io import load
from test_training import step_row, write_steps

SOLVED = ("Put 7 in cell C3.", "```python\nCalcTools.set_cell_value('C3', 7)\n```")
MIXED = ("Bold row 1.", ("```python\nCalcTools.format_range('A1:D1', bold=True)\n```",
                         "```python\nAgent.wait()\n```"))


def rows(tiny_model) -> list[dict]:
    """Task `mixed`: four plays, two wins (the bold call) and two losses; task `solved`: four wins."""
    from computerrl.policy.checkpoint import load_model, load_tokenizer
    from computerrl.policy.logprobs import answer_ids, chat_prompt_ids, response_logprobs

    tok, model = load_tokenizer(tiny_model), load_model(tiny_model)
    out = []
    for task, (question, answers) in (("mixed", (MIXED[0], MIXED[1] * 2)), ("solved", (SOLVED[0], (SOLVED[1],) * 4))):
        for sample, answer in enumerate(answers):
            chat = [{"role": "system", "content": "You act on a spreadsheet."}, {"role": "user", "content": question}]
            prompt, response = chat_prompt_ids(tok, chat), answer_ids(tok, answer)
            with torch.no_grad():
                logp = response_logprobs(model, [prompt], [response])[0].tolist()
            out.append(step_row(task, sample, 0, success=task == "solved" or sample % 2 == 0) | {
                "prompt_ids": prompt, "response_ids": response, "behavior_logprobs": logp,
                "policy_version": "tiny-random"})
    return out


def chance_of_solved_answer(folder, played: list[dict]) -> float:
    from computerrl.policy.checkpoint import load_model
    from computerrl.policy.logprobs import response_logprobs

    row = next(r for r in played if r["task_id"] == "solved")
    with torch.no_grad():
        return response_logprobs(load_model(folder), [row["prompt_ids"]], [row["response_ids"]])[0].sum().item()


@pytest.fixture(scope="module")
def batch(tiny_model, tmp_path_factory):
    played = rows(tiny_model)
    return played, write_steps(tmp_path_factory.mktemp("anchor") / "steps", played)


def update(tiny_model, steps, out, **anchor):
    from computerrl.stages.grpo import GRPOConfig, run

    return run(GRPOConfig(rollouts=[steps], model=tiny_model, out=out, epochs=6, lr=1e-3, temperature=1.0,
                          train_layers=0, **anchor))


@pytest.mark.parametrize("anchor,weight", [("nll", 1.0), ("kl", 10.0)])
def test_an_anchor_holds_the_solved_tasks_answer_where_the_plain_update_lets_it_drift(tiny_model, batch, tmp_path,
                                                                                      anchor, weight):
    played, steps = batch
    start = chance_of_solved_answer(tiny_model, played)
    plain = update(tiny_model, steps, tmp_path / "plain")
    held = update(tiny_model, steps, tmp_path / anchor, anchor=anchor, anchor_weight=weight)
    assert plain["rows"] == 4 and held["rows"] == 8  # the all-win group enters only with the anchor
    moved = {name: chance_of_solved_answer(tmp_path / name, played) - start for name in ("plain", anchor)}
    print(f"Δ log π(solved answer) from {start:.2f}: {moved}")
    assert abs(moved["plain"]) > 0.05  # the plain update moves an answer it never trained on ...
    if anchor == "nll":  # ... the likelihood term pulls the solved task's wins up, never down
        assert moved["nll"] > 0
    else:  # ... the KL to the update's start holds it near where it was
        assert abs(moved["kl"]) < abs(moved["plain"]) / 2


def test_the_anchor_adds_a_term_without_shrinking_the_policy_gradient_step(tiny_model, batch, tmp_path):
    """On the first optimizer step πθ = πold = πref: the surrogate's token-mean over the rows with signal is
    the same with the kl anchor (whose term is 0 there) as without it, although twice the rows enter."""
    _, steps = batch
    update(tiny_model, steps, tmp_path / "plain")
    update(tiny_model, steps, tmp_path / "kl", anchor="kl", anchor_weight=1.0)
    plain, kl = (load(tmp_path / name / "metrics")[0] for name in ("plain", "kl"))
    assert kl["anchor"] == pytest.approx(0.0, abs=1e-9) and kl["tokens"] > plain["tokens"]
    assert kl["loss"] == pytest.approx(plain["loss"], rel=1e-4)
    assert kl["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-3)
