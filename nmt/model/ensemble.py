"""Ensemble decoding: several models (same subword vocabularies) translate as one. At every step the
ensemble's distribution is the mean of the members' probabilities, p(y) = 1/M sum_m p_m(y), and
its attention row the mean of theirs, so its hypotheses come with an alignment like a single
model's (`nmt.align` reads one model's attention by default: align.member). An ensemble of a model
with itself gives the model's own outputs; its scores may differ from the model's in the last bits
(the mean of M equal probabilities, rounded).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nmt.attention.memory import AttentionMemory
from nmt.model.cells import State
from nmt.model.seq2seq import Seq2Seq


class EnsembleMemory:
    """The members' attention memories, repeated and selected together."""

    def __init__(self, members: list[AttentionMemory]) -> None:
        self.members = members

    @property
    def per_hypothesis(self) -> bool:
        return any(m.per_hypothesis for m in self.members)

    def repeat_rows(self, k: int) -> EnsembleMemory:
        return EnsembleMemory([m.repeat_rows(k) for m in self.members])

    def select_rows(self, rows: torch.Tensor) -> EnsembleMemory:
        return EnsembleMemory([m.select_rows(rows) for m in self.members])


class Ensemble(nn.Module):
    """Models decoding together (`nmt.decoding.search.Decodable`). The state the search carries is the
    members' states one after another, the context their contexts side by side."""

    def __init__(self, models: list[Seq2Seq]) -> None:
        super().__init__()
        self.models = nn.ModuleList(models)  # registered: parameters, device moves, train()/eval()
        self.members: list[Seq2Seq] = list(models)  # the same models, typed
        self.state_parts = [m.decoder.cell.state_parts for m in models]
        self.context_sizes = [m.decoder.context_size for m in models]

    @property
    def max_source_len(self) -> int | None:
        limits = [m.max_source_len for m in self.members if m.max_source_len is not None]
        return min(limits) if limits else None

    def start(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[EnsembleMemory, State, torch.Tensor]:
        """src (B, S), src_lens (B,) -> the members' memories, states and contexts, joined."""
        starts = [m.start(src, src_lens) for m in self.members]
        return EnsembleMemory([s[0] for s in starts]), tuple(t for s in starts for t in s[1]), torch.cat([s[2] for s in starts], 1)

    def step(
        self, y_prev: torch.Tensor, state: State, context: torch.Tensor, memory: EnsembleMemory, step: int
    ) -> tuple[torch.Tensor, State, torch.Tensor, torch.Tensor]:
        """y_prev (R,) -> log of the mean probability (R, V), state, context, mean attention (R, S)."""
        states, contexts = self._split(state), context.split(self.context_sizes, dim=1)
        outputs = [m.step(y_prev, s, c, mem, step) for m, s, c, mem in zip(self.members, states, contexts, memory.members)]
        logp = torch.stack([torch.log_softmax(o[0], dim=-1, dtype=torch.promote_types(o[0].dtype, torch.float32)) for o in outputs])
        mean = torch.logsumexp(logp, dim=0) - math.log(len(self.members))
        alpha = torch.stack([o[3] for o in outputs]).mean(0)
        return mean, tuple(t for o in outputs for t in o[1]), torch.cat([o[2] for o in outputs], 1), alpha

    def attention_matrices(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Forced alignment (as `Seq2Seq.attention_matrices`): the mean of the members' attention,
        the same mean their joint decoding reports. src (B, S), tgt_in (B, T) -> alphas (B, T, S)."""
        return torch.stack([m.attention_matrices(src, src_lens, tgt_in) for m in self.members]).mean(0)

    def _split(self, state: State) -> list[State]:
        parts, start = [], 0
        for n in self.state_parts:
            parts.append(state[start : start + n])
            start += n
        return parts


DecodingModel = Seq2Seq | Ensemble  # what translates: one model, or several together
