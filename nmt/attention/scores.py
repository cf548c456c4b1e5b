"""Score functions e_j = a(s, h_j): equation 5 of Bahdanau et al. (2015), with the scores of Luong
et al. (2015) and Vaswani et al. (2017).

Each score splits its work in two: `prepare(keys)` runs once per sentence on the encoder states
(e.g. additive's W2 h_j + b), `score(query, prepared)` once per decoder step, with one query per
sentence, s (B, d_s) -> e (B, S), as the decoder asks, or many, s (B, Q, d_s) -> e (B, Q, S), as
self-attention asks. A score never knows which normaliser turns its output into weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class AttentionScore(nn.Module):
    """Base class: `prepare` keys once per sentence, then score queries against them."""

    max_keys: int | None = None  # the most keys (source tokens) the score supports; None: any number

    @property
    def query_projection(self) -> nn.Linear | None:
        """The linear map the score applies to each query (additive's W1, location's W), if any: a
        layer the decoder runs at every step (`nmt.model.deferred_grads` forms its weight gradient)."""
        return None

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        """keys h (B, S, d_h) -> prepared keys (B, S, *), computed once per sentence."""
        return keys

    def forward(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """query s (B, d_s) or (B, Q, d_s), prepared keys (B, S, *) -> scores e (B, S) or (B, Q, S)."""
        return self.score(query, prepared)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def dot(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """s^T k_j for every key: query (B, d) or (B, Q, d), keys (B, S, d) -> (B, S) or (B, Q, S)."""
    if query.dim() == 2:
        return torch.bmm(query.unsqueeze(1), keys.transpose(1, 2)).squeeze(1)
    return torch.bmm(query, keys.transpose(1, 2))


def per_query(query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
    """Prepared keys (B, S, d) shaped to broadcast against queries (B, 1, d) or (B, Q, 1, d)."""
    return prepared if query.dim() == 2 else prepared.unsqueeze(1)


class DotScore(AttentionScore):
    """e_j = s^T h_j (needs d_s == d_h)."""

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return dot(query, prepared)  # s^T h_j


class ScaledDotScore(AttentionScore):
    """e_j = s^T h_j / sqrt(n), n = d_h (Vaswani et al.)."""

    def __init__(self, key_size: int) -> None:
        super().__init__()
        self.n = key_size

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return dot(query, prepared) / math.sqrt(self.n)  # s^T h_j / sqrt(n)


class GeneralScore(AttentionScore):
    """e_j = s^T W h_j (Luong "general"); W h_j is computed once per sentence."""

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        self.W = nn.Linear(key_size, query_size, bias=False)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W(keys)  # W h_j (B, S, d_s)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return dot(query, prepared)  # s^T (W h_j)


class AdditiveScore(AttentionScore):
    """e_j = v^T tanh(W1 s + W2 h_j + b) (Bahdanau "concat"); W2 h_j + b is computed once per sentence."""

    def __init__(self, query_size: int, key_size: int, hidden_size: int) -> None:
        super().__init__()
        self.W1 = nn.Linear(query_size, hidden_size, bias=False)
        self.W2 = nn.Linear(key_size, hidden_size, bias=True)  # its bias is the b of the equation
        self.v = nn.Linear(hidden_size, 1, bias=False)

    @property
    def query_projection(self) -> nn.Linear:
        return self.W1

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W2(keys)  # W2 h_j + b (B, S, d3)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(self.W1(query).unsqueeze(-2) + per_query(query, prepared))  # tanh(W1 s + W2 h_j + b): (B, [Q,] S, d3)
        return self.v(hidden).squeeze(-1)  # v^T tanh(...)


class LocationScore(AttentionScore):
    """e_j = (W s + b)_j (Luong "location"): depends on the query and the position j only, so it
    supports sources up to the `max_source_len` positions W has rows for."""

    def __init__(self, query_size: int, max_source_len: int) -> None:
        super().__init__()
        self.max_keys: int = max_source_len
        self.W = nn.Linear(query_size, max_source_len)

    @property
    def query_projection(self) -> nn.Linear:
        return self.W

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        if keys.size(1) > self.max_keys:
            raise ValueError(
                f"source of {keys.size(1)} tokens is longer than model.attention.max_source_len="
                f"{self.max_keys} that the location score supports (truncate it first)"
            )
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return self.W(query)[..., : prepared.size(1)]  # (W s + b)_j for j = 1..S
