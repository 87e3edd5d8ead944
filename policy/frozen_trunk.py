"""The frozen bottom of a model whose top layers train (`--train-layers N`), run once per row.

Below the trained layers nothing changes during a run, so what the bottom layers make of a row's tokens is
the same in every pass: the next epochs of `sft`, the updates of `grpo` after its πold pass. `FrozenTrunk`
keeps those hidden states (one tensor per row: its prompt and answer, as the layer above the trunk reads
them) and every later pass runs the top N layers alone. With 8 of SmolLM2's 30 layers trained, a pass after
the first costs the top's forward and backward: about half of a whole pass.

A position's hidden state depends only on the tokens up to it, so a row's is the same whichever rows it
was batched with (up to float rounding). The states stay on the model's device; rows beyond `max_bytes`
are not kept (their passes run whole).
"""

from __future__ import annotations

import contextlib


class FrozenTrunk:
    def __init__(self, decoder, first: int, max_bytes: int):
        """`decoder`: the model's decoder (its `layers`, `norm`); `first`: the first trained layer."""
        self.decoder, self.first, self.max_bytes = decoder, first, max_bytes
        self.kept: dict[tuple[int, ...], object] = {}  # a row's tokens -> its hidden states, (tokens, width)
        self.bytes = 0

    @staticmethod
    def fits(model, train_layers: int) -> bool:
        """Whether a model training its top `train_layers` layers has a trunk to keep: a decoder whose
        layers all attend alike (the top layers run alone, renumbered) and no dropout."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        config, layers = base.config, base.get_decoder().layers
        return (0 < train_layers < len(layers) and len(set(getattr(config, "layer_types", None) or [""])) == 1
                and all(hasattr(getattr(layer, "self_attn", None), "layer_idx") for layer in layers)
                and not getattr(config, "attention_dropout", 0.0) and not getattr(config, "hidden_dropout", 0.0))

    def has(self, rows: list[tuple[int, ...]]) -> bool:
        return all(row in self.kept for row in rows)

    def keep(self, rows: list[tuple[int, ...]], hidden) -> None:
        """The trunk's hidden states of `rows` (one (tokens, width) tensor each), within max_bytes."""
        for row, h in zip(rows, hidden):
            size = h.numel() * h.element_size()
            if row not in self.kept and self.bytes + size <= self.max_bytes:
                self.kept[row] = h.detach().clone()  # not a view of the batch's whole tensor
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
