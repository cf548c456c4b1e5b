"""Normalisers (modes): scores e_i. (B, S) -> attention weights alpha_i. (B, S).

Padding positions always get weight exactly 0. A normaliser never knows which score made e.
- soft: alpha = softmax(e) (equation 4 of Bahdanau et al. 2015).
- hard: one-hot alpha. Inference: the argmax. Training: straight-through Gumbel-softmax, or a
  sampled position trained by REINFORCE (the decoder records log-probabilities and entropies in
  the attention memory; `auxiliary_loss` turns them into the score-function loss).
- local: Luong et al. 2015; alpha = 0 outside [p_i - D, p_i + D]. local-m: p_i = i (clipped to the
  source); local-p: p_i = T_x sigmoid(v_p^T tanh(W_p s)), weights times exp(-(j - p_i)^2 / (2 sigma^2)),
  sigma = D / 2 (not renormalised, as in the paper).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nmt.attention.memory import AttentionMemory

NEG_INF = float("-inf")


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the positions where mask (B, S) is True; exactly 0 elsewhere."""
    return torch.softmax(scores.masked_fill(~mask, NEG_INF), dim=-1)


class Normaliser(nn.Module):
    """Base class: turn the scores of one decoder step into weights over source positions."""

    def forward(self, scores: torch.Tensor, memory: AttentionMemory, query: torch.Tensor, step: int) -> torch.Tensor:
        """scores (B, S), memory (its mask (B, S) is True at real tokens), query (B, d_s),
        decoder step i (0-based) -> weights (B, S)."""
        raise NotImplementedError

    def auxiliary_loss(self, memory: AttentionMemory, reward: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """An extra training loss of this normaliser (None: plain backpropagation suffices)."""
        return None


class SoftNormaliser(Normaliser):
    """alpha_ij = exp(e_ij) / sum_k exp(e_ik), padding masked (Bahdanau/Luong soft attention)."""

    def forward(self, scores: torch.Tensor, memory: AttentionMemory, query: torch.Tensor, step: int) -> torch.Tensor:
        return masked_softmax(scores, memory.mask)


def one_hot_argmax(probs: torch.Tensor) -> torch.Tensor:
    """(B, S) -> one-hot (B, S) of each row's argmax."""
    return F.one_hot(probs.argmax(-1), probs.size(-1)).to(probs.dtype)


class GumbelHardNormaliser(Normaliser):
    """Hard attention trained with straight-through Gumbel-softmax (Jang et al. 2017):
    forward one-hot of argmax((e + g) / tau), backward through softmax((e + g) / tau)."""

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, scores: torch.Tensor, memory: AttentionMemory, query: torch.Tensor, step: int) -> torch.Tensor:
        if not self.training:
            return one_hot_argmax(masked_softmax(scores, memory.mask))
        gumbel = -torch.empty_like(scores).exponential_().log()
        soft = masked_softmax((scores + gumbel) / self.temperature, memory.mask)
        hard = one_hot_argmax(soft)
        return hard - soft.detach() + soft


class ReinforceHardNormaliser(Normaliser):
    """Hard attention trained with REINFORCE (Xu et al. 2015): sample j ~ softmax(e), alpha = one-hot(j).
    The weights carry no gradient; `auxiliary_loss` gives the scores theirs, with a moving-average
    reward baseline (kept in a buffer, so it is saved in checkpoints) and an entropy bonus."""

    baseline: torch.Tensor
    baseline_steps: torch.Tensor

    def __init__(self, baseline_decay: float, entropy_weight: float) -> None:
        super().__init__()
        self.baseline_decay = baseline_decay
        self.entropy_weight = entropy_weight
        self.register_buffer("baseline", torch.zeros(()))
        self.register_buffer("baseline_steps", torch.zeros((), dtype=torch.long))

    def forward(self, scores: torch.Tensor, memory: AttentionMemory, query: torch.Tensor, step: int) -> torch.Tensor:
        probs = masked_softmax(scores, memory.mask)
        if not self.training:
            return one_hot_argmax(probs)
        # fp32: bf16 autocast rounds the weights off the simplex that Categorical checks
        dist = torch.distributions.Categorical(probs=probs.float())
        sample = dist.sample()
        memory.log_probs.append(dist.log_prob(sample))
        memory.entropies.append(dist.entropy())
        return F.one_hot(sample, probs.size(-1)).to(probs.dtype)

    def auxiliary_loss(self, memory: AttentionMemory, reward: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """reward (B,) per sentence (e.g. its mean target log-likelihood), valid (B, T) real target
        steps -> summed surrogate loss whose gradient is the REINFORCE estimate (minus entropy bonus)."""
        if not memory.log_probs:
            return None
        log_probs = torch.stack(memory.log_probs, 1)  # (B, T)
        entropies = torch.stack(memory.entropies, 1)
        reward = reward.detach()
        if int(self.baseline_steps) == 0:
            self.baseline.fill_(float(reward.mean()))
        advantage = reward - self.baseline
        with torch.no_grad():
            self.baseline.mul_(self.baseline_decay).add_((1 - self.baseline_decay) * reward.mean())
            self.baseline_steps.add_(1)
        valid = valid.to(log_probs.dtype)
        return -((advantage.unsqueeze(1) * log_probs + self.entropy_weight * entropies) * valid).sum()


class LocalNormaliser(Normaliser):
    """Luong's local attention of half-width D: local-m (monotonic) or local-p (predictive)."""

    def __init__(self, window: int, predictive: bool, query_size: int, hidden_size: int) -> None:
        super().__init__()
        self.window = window
        self.predictive = predictive
        if predictive:
            self.W_p = nn.Linear(query_size, hidden_size, bias=False)
            self.v_p = nn.Linear(hidden_size, 1, bias=False)

    def position(self, memory: AttentionMemory, query: torch.Tensor, step: int) -> torch.Tensor:
        """The window centre p_i (B,), in at least float32: i clipped to the source (local-m) or
        T_x * sigmoid(v_p^T tanh(W_p s)) (local-p)."""
        dtype = torch.promote_types(query.dtype, torch.float32)
        lengths = memory.mask.sum(1).to(dtype)
        if self.predictive:
            # A position is a coordinate, not a feature: under bf16 autocast it would be rounded to
            # 8 bits of mantissa (31.243 -> 31.125), shifting the window and the Gaussian. Outside
            # autocast, in float32 (or the query's float64).
            with torch.autocast(query.device.type, enabled=False):
                hidden = torch.tanh(F.linear(query.to(dtype), self.W_p.weight.to(dtype)))
                return lengths * torch.sigmoid(F.linear(hidden, self.v_p.weight.to(dtype))).squeeze(1)
        return torch.clamp(lengths - 1, max=float(step))

    def forward(self, scores: torch.Tensor, memory: AttentionMemory, query: torch.Tensor, step: int) -> torch.Tensor:
        p = self.position(memory, query, step).unsqueeze(1)  # (B, 1)
        j = torch.arange(scores.size(1), device=scores.device, dtype=p.dtype).unsqueeze(0)  # (1, S)
        in_window = memory.mask & ((j - p).abs() <= self.window)
        weights = masked_softmax(scores, in_window)
        if self.predictive:
            sigma = self.window / 2
            weights = weights * torch.exp(-((j - p) ** 2) / (2 * sigma**2)).to(weights.dtype)
        return weights
