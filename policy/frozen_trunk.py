"""The frozen bottom of a model whose top layers train (`--train-layers N`), run once per row.

Below the trained layers nothing changes during a run, so what the bottom layers make of a row's tokens is
the same in every pass: the next epochs of `sft`, the second epoch of `grpo`. `FrozenTrunk` keeps those
hidden states (one tensor per row: its prompt and answer, as the layer above the trunk reads them) and
every later pass runs the top N layers alone. With 8 of SmolLM2's 30 layers trained, such a pass took 0.54
of a whole one here (docs/benchmarks.md).

A position's hidden state depends only on the tokens up to it, so a row's is the same whichever rows it
was batched with (up to float rounding). The states stay on the model's device. Once `max_bytes` are
kept no row is added, and a micro-batch holding a row not kept runs its bottom layers again.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Decoders whose forward feeds `inputs_embeds` to the first layer as they are and ends in `norm` (Granite,
# for one, scales them: the kept states would be scaled twice)
PLAIN_DECODERS = ("llama", "mistral", "qwen2", "qwen3")


class FrozenTrunk:
    def __init__(self, decoder, first: int, max_bytes: int):
        """`decoder`: the model's decoder (its `layers`, `norm`); `first`: the first trained layer."""
        self.decoder, self.first, self.max_bytes = decoder, first, max_bytes
        self.kept: dict[tuple[int, ...], torch.Tensor] = {}  # a row's tokens -> its states, (tokens, width)
        self.bytes = 0
        self.reused = 0  # row passes that took the kept states

    @staticmethod
    def fits(decoder, first: int) -> bool:
        """Whether `decoder` has a trunk below layer `first` to keep: a plain decoder whose layers all attend
        alike (the top ones run alone, renumbered), no dropout, and nothing below `first` training."""
        import torch

        config = decoder.config
        if config.model_type not in PLAIN_DECODERS:  # other decoders may name their parts otherwise too
            return False
        layers = decoder.layers
        bottom = [decoder.embed_tokens, *layers[:first]]
        return (0 < first < len(layers) and len(set(getattr(config, "layer_types", None) or [""])) == 1
                and not any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in decoder.modules())
                and not getattr(config, "attention_dropout", 0.0)
                and not any(p.requires_grad for part in bottom for p in part.parameters()))

    def take(self, rows: list[tuple[int, ...]]) -> list | None:
        """The kept states of every one of `rows`, or None when one is not kept."""
        if not all(row in self.kept for row in rows):
            return None
        self.reused += len(rows)
        return [self.kept[row] for row in rows]

    def keep(self, rows: list[tuple[int, ...]], hidden) -> None:
        """The trunk's hidden states of `rows` (one (tokens, width) tensor each), within max_bytes."""
        for row, h in zip(rows, hidden):
            size = h.numel() * h.element_size()
            if row not in self.kept and self.bytes + size <= self.max_bytes:
                self.kept[row] = h.detach().clone()  # not a view that would keep the whole batch's tensor
                self.bytes += size

    @contextlib.contextmanager
    def bottom(self):
        """The decoder as its frozen layers alone, without the final norm: its output is the trunk's."""
        import torch

        with self._only(slice(0, self.first)), torch.no_grad():
            norm, self.decoder.norm = self.decoder.norm, torch.nn.Identity()
            try:
                yield
            finally:
                self.decoder.norm = norm

    def top(self):
        """The decoder as its trained layers alone: fed the trunk's hidden states as `inputs_embeds`."""
        return self._only(slice(self.first, None))

    @contextlib.contextmanager
    def _only(self, part: slice):
        # The layers of `part` numbered from 0 while they run: a KV cache's first layer is theirs, as the
        # attention mask's lengths are read from a cache's first layer.
        d = self.decoder
        layers = d.layers
        chosen = layers[part]
        numbers = [layer.self_attn.layer_idx for layer in chosen]
        d.layers = chosen
        for k, layer in enumerate(chosen):
            layer.self_attn.layer_idx = k
        try:
            yield
        finally:
            for layer, n in zip(chosen, numbers):
                layer.self_attn.layer_idx = n
            d.layers = layers
