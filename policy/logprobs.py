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


def chat_prompt_ids(tokenizer, chat: Sequence[dict[str, str]]) -> list[int]:
    """The tokens a model reads for `chat`, up to where its answer starts (the checkpoint's own template)."""
    text = tokenizer.apply_chat_template(list(chat), add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


def answer_ids(tokenizer, text: str) -> list[int]:
    """The tokens of an answer as the engines sample it: its text, then the end-of-turn token."""
    return tokenizer(text, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]


def decoder_and_head(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft: LoRA sits inside
    return base.get_decoder(), base.get_output_embeddings()


def decoder_of(model):
    """The decoder of a causal LM (a peft model's too): its embeddings, layers and final norm."""
    return decoder_and_head(model)[0]


def shared_prefix(sequences: Sequence[Sequence[int]], limit: int) -> int:
    """Length of the longest token prefix all `sequences` share, at most `limit`."""
    first, n = sequences[0], limit
    for seq in sequences[1:]:
        k = 0
        while k < n and seq[k] == first[k]:
            k += 1
        n = k
    return n


MIN_SHARED = 32  # a shared prefix shorter than this is not worth a pass of its own


def response_logprobs(model, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                      temperature: float = 1.0, *, pad_id: int = 0, with_entropy: bool = False,
                      share_prefix: bool = True, trunk=None):
    """Per-token log softmax(logits / T)[token] of each response given its prompt.

    Returns a list of 1-D tensors (one per sequence, differentiable) and, with `with_entropy`,
    the per-token entropy of the same distributions (detached).

    With `share_prefix`, the tokens every prompt of the batch starts with (the system prompt: the
    API classes and notes are most of a prompt, and identical for every step of an app) go through
    the decoder once; each row's rest attends to their keys and values, broadcast to the batch. In
    backward the gradients of all rows flow into that one pass, so the result is the same, exactly,
    at a fraction of the compute.

    `trunk`: the model's frozen bottom layers (policy/frozen_trunk.py, when only the top ones train): their
    output for these rows is computed once and kept, and later passes over the same rows run the top alone.
    """
    inner = getattr(model, "module", None) or model  # DDP and DeepSpeed wrap the model; FSDP2 does not
    if inner is model and not _fsdp2(model):
        return _response_logprobs(model, prompts, responses, temperature, pad_id, with_entropy, share_prefix, trunk)
    # This calls the decoder and head itself, but DDP arms its gradient all-reduce, and FSDP2 gathers
    # its sharded weights, only in the model's forward: run the computation as that forward, once.
    # It returns copies, not views: FSDP2 warns of every view a forward returns.
    def forward():
        logp, entropy = _response_logprobs(inner, prompts, responses, temperature, pad_id, True, share_prefix, trunk)
        return [t.clone() for t in logp], [t.clone() for t in entropy]

    own = inner.__dict__.get("forward")  # accelerate may have set one (mixed precision)
    inner.forward = forward
    try:
        logp, entropy = model()
    finally:
        if own is None:
            del inner.forward
        else:
            inner.forward = own
    return (logp, entropy) if with_entropy else logp


def _fsdp2(model) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _response_logprobs(model, prompts, responses, temperature, pad_id, with_entropy, share_prefix, trunk):
    import torch

    from computerrl.policy.vision import ScreenPrompt, screen_logprobs

    if any(isinstance(p, ScreenPrompt) for p in prompts):  # a vision model's rows: one pass each, with its images
        out, entropy = zip(*(screen_logprobs(model, p, r, temperature) for p, r in zip(prompts, responses)))
        return (list(out), list(entropy)) if with_entropy else list(out)
    decoder, head = decoder_and_head(model)
    device = head.weight.device
    # The position predicting a row's first answer token must stay in the per-row part.
    shared = shared_prefix(prompts, min(map(len, prompts)) - 1) if share_prefix and len(prompts) > 1 else 0
    if shared < MIN_SHARED or getattr(decoder, "gradient_checkpointing", False):
        shared = 0
    lengths = [len(p) + len(r) - shared for p, r in zip(prompts, responses)]
    ids = torch.full((len(lengths), max(lengths)), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(lengths), shared + max(lengths)), dtype=torch.long, device=device)
    rows, cols, targets = [], [], []
    for b, (p, r) in enumerate(zip(prompts, responses)):
        ids[b, :lengths[b]] = torch.tensor(list(p[shared:]) + list(r), dtype=torch.long)
        mask[b, :shared + lengths[b]] = 1
        rows += [b] * len(r)
        cols += range(len(p) - 1 - shared, len(p) + len(r) - 1 - shared)  # the position that predicts each answer token
        targets += list(r)
    prefix = {"input_ids": torch.tensor([list(prompts[0][:shared])], device=device)} if shared else None
    if trunk is None:
        _, hidden = _decode(decoder, {"input_ids": ids}, mask, prefix, shared)
    else:  # the top layers, fed the frozen ones' output: kept from an earlier pass, or computed now and kept
        keys = [tuple(p) + tuple(r) for p, r in zip(prompts, responses)]
        kept = trunk.take(keys)
        if kept:
            prefix_states = kept[0][:shared].unsqueeze(0) if shared else None
            states = torch.nn.utils.rnn.pad_sequence([h[shared:] for h in kept], batch_first=True)
        else:
            with trunk.bottom():
                prefix_states, states = _decode(decoder, {"input_ids": ids}, mask, prefix, shared)
            trunk.keep(keys, [torch.cat([prefix_states[0], states[b, :n]]) if shared else states[b, :n]
                              for b, n in enumerate(lengths)])
        with trunk.top():
            _, hidden = _decode(decoder, {"inputs_embeds": states}, mask,
                                {"inputs_embeds": prefix_states} if shared else None, shared)
    picked = hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)]
    logits = head(picked)
    if logits.dtype in (torch.float16, torch.bfloat16):  # half-precision softmax loses the small log-probs
        logits = logits.float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    token_logp = logp.gather(-1, torch.tensor(targets, device=device).unsqueeze(-1)).squeeze(-1)
    sizes = [len(r) for r in responses]
    out = list(token_logp.split(sizes))
    if not with_entropy:
        return out
    entropy = -(logp.exp() * logp).sum(-1).detach()
    return out, list(entropy.split(sizes))


def _decode(decoder, rows: dict, mask, prefix: dict | None, shared: int):
    """One decoder pass: (the prefix's hidden states, or None, and the rows'). `prefix` (the tokens, or hidden
    states, every row starts with) runs once, its keys and values broadcast to the rows' rest."""
    import torch

    if prefix is None:
        return None, decoder(**rows, attention_mask=mask).last_hidden_state
    first = decoder(**prefix, use_cache=True)
    cache = first.cache
    batch, width = mask.shape[0], mask.shape[1] - shared
    cache.batch_repeat_interleave(batch)
    positions = torch.arange(shared, shared + width, device=mask.device).expand(batch, -1)
    return first.last_hidden_state, decoder(**rows, attention_mask=mask, cache=cache, position_ids=positions,
                                            use_cache=True).last_hidden_state
