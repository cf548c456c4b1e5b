"""A plain, step-by-step implementation of equations 1-5 of Bahdanau et al. (2015): the textbook next to the fast path.

`nmt.model.decoder.Decoder` hoists work out of its step loop (input-gate projections of all
target embeddings, keys prepared once, the output layer and the vocabulary projection over real
tokens only) and `nmt.training.loss` fuses the label-smoothed loss. This module does none of that: at
each step it scores the raw encoder states with the score table's formula, normalises (written
out per mode), forms the context, runs torch's own GRU/LSTM cell on [E y_{i-1}; c_i] and applies
the output layer; then torch's cross-entropy. It reads the weights of a built `Seq2Seq`, so the
tests can check that both give the same loss and gradients, and `scripts/bench/ablate_speed.py` can
time what the optimisations buy. It is for reading and checking, not for training.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from nmt.attention.modes import GumbelHardNormaliser, LocalNormaliser, ReinforceHardNormaliser, SoftNormaliser
from nmt.attention.scores import AdditiveScore, DotScore, GeneralScore, LocationScore, ScaledDotScore
from nmt.config.schema import CellType
from nmt.data.tokenizer import PAD
from nmt.model.seq2seq import Seq2Seq


def reference_scores(model: Seq2Seq, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """e_ij = a(s, h_j) by the score table, from the raw encoder states. s (B, d_s), h (B, S, d_h) -> (B, S)."""
    score = model.decoder.attention.score
    if isinstance(score, ScaledDotScore):  # before DotScore: it is a subclass
        return torch.einsum("bd,bsd->bs", s, h) / math.sqrt(h.size(2))
    if isinstance(score, GeneralScore):
        return torch.einsum("bd,de,bse->bs", s, score.W.weight, h)
    if isinstance(score, DotScore):
        return torch.einsum("bd,bsd->bs", s, h)
    if isinstance(score, AdditiveScore):
        return torch.stack([score.v(torch.tanh(score.W1(s) + score.W2(h[:, j]))).squeeze(1) for j in range(h.size(1))], 1)
    if isinstance(score, LocationScore):
        return score.W(s)[:, : h.size(1)]
    raise TypeError(f"no reference for {type(score).__name__}")


def reference_weights(
    model: Seq2Seq, e: torch.Tensor, mask: torch.Tensor, s: torch.Tensor, i: int, log_probs: list[torch.Tensor]
) -> torch.Tensor:
    """alpha_i. (B, S) from the scores e_i. (B, S) for the model's mode, written out per case; mask (B, S)
    True at real tokens, s the query (B, d_s), i the step; REINFORCE appends its log-probabilities."""
    normaliser = model.decoder.attention.normaliser
    e = e.masked_fill(~mask, float("-inf"))
    if isinstance(normaliser, SoftNormaliser):
        return torch.softmax(e, 1)
    if isinstance(normaliser, (GumbelHardNormaliser, ReinforceHardNormaliser)) and not normaliser.training:
        return F.one_hot(torch.softmax(e, 1).argmax(1), e.size(1)).to(e.dtype)  # inference: the argmax
    if isinstance(normaliser, GumbelHardNormaliser):  # the same draw as the model: one exponential (B, S) per step
        g = -torch.empty_like(e).exponential_().log()
        soft = torch.softmax((e + g) / normaliser.temperature, 1)
        hard = F.one_hot(soft.argmax(1), e.size(1)).to(e.dtype)
        return hard - soft.detach() + soft
    if isinstance(normaliser, ReinforceHardNormaliser):
        probs = torch.softmax(e, 1)
        j = torch.distributions.Categorical(probs=probs).sample()
        log_probs.append(probs.gather(1, j.unsqueeze(1)).squeeze(1).log())
        return F.one_hot(j, e.size(1)).to(e.dtype)
    if isinstance(normaliser, LocalNormaliser):
        lengths = mask.sum(1).to(e.dtype)
        if normaliser.predictive:  # p_i = T_x sigmoid(v_p^T tanh(W_p s))
            p = lengths * torch.sigmoid(normaliser.v_p(torch.tanh(normaliser.W_p(s)))).squeeze(1)
        else:  # p_i = i, clipped to the source
            p = torch.minimum(torch.full_like(lengths, float(i)), lengths - 1)
        half = normaliser.window
        alpha = torch.zeros_like(e)
        for b in range(e.size(0)):
            window = [j for j in range(e.size(1)) if mask[b, j] and abs(j - p[b].item()) <= half]
            w = torch.softmax(e[b, window], 0)
            if normaliser.predictive:  # times a Gaussian, sigma = D / 2
                w = w * torch.exp(-((torch.tensor(window, dtype=e.dtype) - p[b]) ** 2) / (2 * (half / 2) ** 2))
            alpha[b, window] = w
        return alpha
    raise TypeError(f"no reference for {type(normaliser).__name__}")


def reference_cell(model: Seq2Seq, cell_type: CellType) -> Callable[[torch.Tensor, tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]]:
    """torch's own GRU/LSTM cell function on the decoder's weights, W_ih = [embed_gates | context_gates]
    (built differentiably, so the reference's gradients reach the same parameters). State: (s,) or (s, cell)."""
    dec = model.decoder
    w_ih = torch.cat([dec.embed_gates.weight, dec.context_gates.weight], 1)
    args = (w_ih, dec.cell.hidden.weight, dec.embed_gates.bias, dec.cell.hidden.bias)
    if cell_type == CellType.gru:
        return lambda x, state: (torch.gru_cell(x, state[0], *args),)
    return lambda x, state: tuple(torch.lstm_cell(x, (state[0], state[1]), *args))


def reference_loss(
    model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor,
    cell_type: CellType, eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher forcing one decoder step at a time. src (B, S), src_lens (B,), tgt_in (B, T) = BOS y..,
    tgt_out (B, T) = y.. EOS -> (summed label-smoothed cross-entropy over real tokens, alphas (B, T, S))."""
    dec = model.decoder
    h, final = model.encoder(model.src_embedding(src), src_lens)  # (B, S, d_h)
    mask = src != PAD
    state: tuple[torch.Tensor, ...] = tuple(torch.tanh(dec.bridge(final)).chunk(dec.cell.state_parts, 1))  # s_0
    cell = reference_cell(model, cell_type)
    context = h.new_zeros(h.size(0), h.size(2))
    logits, alphas, log_probs = [], [], []  # type: ignore[var-annotated]
    for i in range(tgt_in.size(1)):
        emb = dec.embedding(tgt_in[:, i])
        if dec.attend_previous:  # Bahdanau: e_ij = a(s_{i-1}, h_j), then s_i = f(s_{i-1}, y_{i-1}, c_i)
            alpha = reference_weights(model, reference_scores(model, state[0], h), mask, state[0], i, log_probs)
            context = torch.einsum("bs,bsd->bd", alpha, h)
            state = cell(torch.cat([emb, context], 1), state)
        else:  # Luong: s_i = f(s_{i-1}, [E y_{i-1}; c_{i-1}]), then e_ij = a(s_i, h_j)
            state = cell(torch.cat([emb, context], 1), state)
            alpha = reference_weights(model, reference_scores(model, state[0], h), mask, state[0], i, log_probs)
            context = torch.einsum("bs,bsd->bd", alpha, h)
        t = torch.tanh(dec.readout(torch.cat([state[0], emb, context], 1)))  # g(y_{i-1}, s_i, c_i)
        logits.append(dec.generator(t))
        alphas.append(alpha)
    logits_all = torch.stack(logits, 1)
    loss = F.cross_entropy(logits_all.reshape(-1, logits_all.size(2)), tgt_out.reshape(-1), ignore_index=PAD,
                           label_smoothing=eps, reduction="sum")
    return loss, torch.stack(alphas, 1)
