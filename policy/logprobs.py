"""log πθ of sampled answers, as the trainer computes it: logits only where an answer token is
predicted.

With prompts of hundreds to thousands of tokens and answers of tens, projecting every position
onto the vocabulary would be most of the memory and a large share of the compute. The decoder
runs over the whole (right-padded) sequence, and only the hidden states that predict an answer
token go through the output layer. Right padding keeps every real token at the position it had
when it was sampled, so the numbers match the engine's up to float error.
"""

from __future__ import annotations

from typing import Sequence


def _decoder_and_head(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft: LoRA sits inside
    return base.get_decoder(), base.get_output_embeddings()


def response_logprobs(model, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                      temperature: float = 1.0, *, pad_id: int = 0, with_entropy: bool = False):
    """Per-token log softmax(logits / T)[token] of each response given its prompt.

    Returns a list of 1-D tensors (one per sequence, differentiable) and, with `with_entropy`,
    the per-token entropy of the same distributions (detached).
    """
    import torch

    decoder, head = _decoder_and_head(model)
    device = head.weight.device
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    ids = torch.full((len(lengths), max(lengths)), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    rows, cols, targets = [], [], []
    for b, (p, r) in enumerate(zip(prompts, responses)):
        ids[b, :lengths[b]] = torch.tensor(list(p) + list(r), dtype=torch.long)
        mask[b, :lengths[b]] = 1
        rows += [b] * len(r)
        cols += range(len(p) - 1, len(p) + len(r) - 1)  # the position that predicts each answer token
        targets += list(r)
    hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
    picked = hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)]
    logp = torch.log_softmax(head(picked).float() / temperature, dim=-1)
    token_logp = logp.gather(-1, torch.tensor(targets, device=device).unsqueeze(-1)).squeeze(-1)
    sizes = [len(r) for r in responses]
    out = list(token_logp.split(sizes))
    if not with_entropy:
        return out
    entropy = -(logp.exp() * logp).sum(-1).detach()
    return out, list(entropy.split(sizes))
