"""Score functions e_j = a(s, h_j) (SPEC equation 5 and its score table).

Each score splits its work in two: `prepare(keys)` runs once per sentence on the encoder states
(e.g. additive's W2 h_j), `forward(query, prepared)` runs once per decoder step with one query per
sentence (B, d_s), or at once for many queries (B, Q, d_s), as self-attention does. A score never
knows which normaliser turns its output into weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nmt.deferred import DeferredWeightGrads


class AttentionScore(nn.Module):
    """Base class: `prepare` keys once per sentence, then score queries against them."""

    max_keys: int | None = None  # the most keys (source tokens) the score supports; None: any number

    @property
    def query_projection(self) -> nn.Linear | None:
        """The linear map the score applies to each query first (additive's W1, location's W), if any."""
        return None

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        """keys (B, S, d_h) -> prepared keys (B, S, *), computed once per sentence."""
        return keys

    def forward(self, query: torch.Tensor, prepared: torch.Tensor, deferred: DeferredWeightGrads | None = None) -> torch.Tensor:
        """query (B, d_s) or (B, Q, d_s), prepared keys (B, S, *) -> scores (B, S) or (B, Q, S).
        `deferred` (a decoder step's): form the query projection's weight gradient once per batch."""
        projection = self.query_projection
        if projection is not None:
            query = deferred.linear(projection, query) if deferred is not None and query.dim() == 2 else projection(query)
        if query.dim() == 2:
            return self.score(query.unsqueeze(1), prepared).squeeze(1)
        return self.score(query, prepared)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """query (B, Q, *) after the query projection, prepared keys (B, S, *) -> scores (B, Q, S)."""
        raise NotImplementedError


class DotScore(AttentionScore):
    """e_j = s^T h_j (needs d_s == d_h)."""

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return torch.bmm(query, prepared.transpose(1, 2))


class ScaledDotScore(DotScore):
    """e_j = s^T h_j / sqrt(n), n = d_h (Vaswani et al.)."""

    def __init__(self, key_size: int) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(key_size)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return super().score(query, prepared) * self.scale


class GeneralScore(DotScore):
    """e_j = s^T W h_j (Luong "general"); W h_j is computed once per sentence."""

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        self.W = nn.Linear(key_size, query_size, bias=False)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W(keys)  # (B, S, d_s)


class AdditiveScore(AttentionScore):
    """e_j = v^T tanh(W1 s + W2 h_j) (Bahdanau); W2 h_j is computed once per sentence."""

    def __init__(self, query_size: int, key_size: int, hidden_size: int) -> None:
        super().__init__()
        self.W1 = nn.Linear(query_size, hidden_size, bias=False)
        self.W2 = nn.Linear(key_size, hidden_size, bias=True)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    @property
    def query_projection(self) -> nn.Linear:
        return self.W1

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W2(keys)  # (B, S, d3)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(prepared.unsqueeze(1) + query.unsqueeze(2))  # (B, Q, S, d3); query = W1 s
        return self.v(hidden).squeeze(3)


class LocationScore(AttentionScore):
    """e_j = (W s)_j (Luong "location"): depends on the query and the position j only."""

    def __init__(self, query_size: int, max_source_len: int) -> None:
        super().__init__()
        self.max_keys: int = max_source_len
        self.W = nn.Linear(query_size, max_source_len)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        if keys.size(1) > self.max_keys:
            raise ValueError(
                f"source of {keys.size(1)} tokens is longer than model.attention.max_source_len="
                f"{self.max_keys} that the location score supports (truncate it first)"
            )
        return keys

    @property
    def query_projection(self) -> nn.Linear:
        return self.W

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return query[..., : prepared.size(1)]  # query = W s: one score per position
