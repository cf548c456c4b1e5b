"""The optimised decoder against a plain, step-by-step reference of SPEC equations 1-5.

The production decoder hoists work out of its step loop (input-gate projections of all target
embeddings, keys prepared once, output layer and vocabulary projection over real tokens only,
a fused label-smoothed loss). The reference below does none of that: at each step it scores the
raw encoder states with the textbook formula, normalises, forms the context, runs torch's own
GRUCell/LSTMCell on [E y_{i-1}; c_i], and applies the output layer, then takes torch's
cross-entropy. Same weights, same random draws -> the same loss, for every score and mode.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from nmt.config import AttendFrom, CellType, HardEstimator, LocalVariant, Mode, ModelConfig, Score
from nmt.data.tokenizer import BOS, EOS, PAD
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq
from nmt.step import batch_loss

MODES = [
    (Mode.soft, {}),
    (Mode.hard, {"hard_estimator": HardEstimator.gumbel}),
    (Mode.hard, {"hard_estimator": HardEstimator.reinforce}),
    (Mode.local, {"local": LocalVariant.monotonic}),
    (Mode.local, {"local": LocalVariant.predictive}),
]


def reference_scores(model: Seq2Seq, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """e_ij = a(s, h_j) by the score table, from the raw encoder states. s (B, d_s), h (B, S, d_h) -> (B, S)."""
    score = model.decoder.attention.score
    name = type(score).__name__
    if name == "DotScore":
        return torch.einsum("bd,bsd->bs", s, h)
    if name == "ScaledDotScore":
        return torch.einsum("bd,bsd->bs", s, h) / math.sqrt(h.size(2))
    if name == "GeneralScore":
        return torch.einsum("bd,de,bse->bs", s, score.W.weight, h)
    if name == "AdditiveScore":
        return torch.stack([score.v(torch.tanh(score.W1(s) + score.W2(h[:, j]))).squeeze(1) for j in range(h.size(1))], 1)
    if name == "LocationScore":
        return score.W(s)[:, : h.size(1)]
    raise AssertionError(name)


def reference_weights(model: Seq2Seq, e: torch.Tensor, mask: torch.Tensor, s: torch.Tensor, i: int, log_probs: list) -> torch.Tensor:
    """alpha_i. from e_i. (B, S) for the model's mode, written out per case."""
    normaliser = model.decoder.attention.normaliser
    name = type(normaliser).__name__
    e = e.masked_fill(~mask, float("-inf"))
    if name == "SoftNormaliser":
        return torch.softmax(e, 1)
    if name == "GumbelHardNormaliser":  # same draw as the model: one exponential (B, S) per step
        g = -torch.empty_like(e).exponential_().log()
        soft = torch.softmax((e + g) / normaliser.temperature, 1)
        hard = F.one_hot(soft.argmax(1), e.size(1)).to(e.dtype)
        return hard - soft.detach() + soft
    if name == "ReinforceHardNormaliser":
        probs = torch.softmax(e, 1)
        j = torch.distributions.Categorical(probs=probs).sample()
        log_probs.append(probs.gather(1, j.unsqueeze(1)).squeeze(1).log())
        return F.one_hot(j, e.size(1)).to(e.dtype)
    if name == "LocalNormaliser":
        lengths = mask.sum(1).to(e.dtype)
        if normaliser.predictive:  # p_i = T_x sigmoid(v_p^T tanh(W_p s))
            p = lengths * torch.sigmoid(normaliser.v_p(torch.tanh(normaliser.W_p(s)))).squeeze(1)
        else:  # p_i = i, clipped to the source
            p = torch.minimum(torch.full_like(lengths, float(i)), lengths - 1)
        D = normaliser.window
        alpha = torch.zeros_like(e)
        for b in range(e.size(0)):
            window = [j for j in range(e.size(1)) if mask[b, j] and abs(j - p[b].item()) <= D]
            w = torch.softmax(e[b, window], 0)
            if normaliser.predictive:
                w = w * torch.exp(-((torch.tensor(window, dtype=e.dtype) - p[b]) ** 2) / (2 * (D / 2) ** 2))
            alpha[b, window] = w
        return alpha
    raise AssertionError(name)


def torch_cell(model: Seq2Seq, cell_type: CellType):  # noqa: ANN201
    """torch's own GRU/LSTM cell function on the decoder's weights, W_ih = [embed_gates | context_gates]
    (built differentiably, so the reference's gradients reach the same parameters)."""
    dec = model.decoder
    w_ih = torch.cat([dec.embed_gates.weight, dec.context_gates.weight], 1)
    args = (w_ih, dec.cell.hidden.weight, dec.embed_gates.bias, dec.cell.hidden.bias)
    if cell_type == CellType.gru:
        return lambda x, h: torch.gru_cell(x, h, *args)
    return lambda x, hc: torch.lstm_cell(x, hc, *args)


def reference_loss(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor,
                   cell_type: CellType, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy of teacher forcing, one decoder step at a time -> (loss, alphas (B, T, S))."""
    dec = model.decoder
    h, final = model.encoder(model.src_embedding(src), src_lens)  # (B, S, d_h)
    mask = src != PAD
    s = torch.tanh(dec.bridge(final))
    state = s.chunk(2, 1) if cell_type == CellType.lstm else s
    cell = torch_cell(model, cell_type)
    context = h.new_zeros(h.size(0), h.size(2))
    logits, alphas, log_probs = [], [], []
    for i in range(tgt_in.size(1)):
        emb = dec.embedding(tgt_in[:, i])
        query = state[0] if cell_type == CellType.lstm else state
        if dec.attend_previous:  # Bahdanau: e_ij = a(s_{i-1}, h_j), then s_i = f(s_{i-1}, y_{i-1}, c_i)
            alpha = reference_weights(model, reference_scores(model, query, h), mask, query, i, log_probs)
            context = torch.einsum("bs,bsd->bd", alpha, h)
            state = cell(torch.cat([emb, context], 1), state)
        else:  # Luong: s_i = f(s_{i-1}, [E y_{i-1}; c_{i-1}]), then e_ij = a(s_i, h_j)
            state = cell(torch.cat([emb, context], 1), state)
            query = state[0] if cell_type == CellType.lstm else state
            alpha = reference_weights(model, reference_scores(model, query, h), mask, query, i, log_probs)
            context = torch.einsum("bs,bsd->bd", alpha, h)
        s_i = state[0] if cell_type == CellType.lstm else state
        t = torch.tanh(dec.readout(torch.cat([s_i, emb, context], 1)))  # g(y_{i-1}, s_i, c_i)
        logits.append(dec.generator(t))
        alphas.append(alpha)
    logits_all = torch.stack(logits, 1)
    loss = F.cross_entropy(logits_all.reshape(-1, logits_all.size(2)), tgt_out.reshape(-1), ignore_index=PAD,
                           label_smoothing=eps, reduction="sum")
    return loss, torch.stack(alphas, 1)


def toy_batch() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    src_lens = torch.tensor([7, 4, 5])
    tgt_lens = torch.tensor([5, 6, 2])
    src = torch.full((3, 7), PAD)
    tgt_in = torch.full((3, 7), PAD)
    tgt_out = torch.full((3, 7), PAD)
    for b in range(3):
        src[b, : src_lens[b] - 1] = torch.randint(4, 30, (int(src_lens[b]) - 1,), generator=g)
        src[b, src_lens[b] - 1] = EOS
        y = torch.randint(4, 30, (int(tgt_lens[b]),), generator=g)
        tgt_in[b, 0] = BOS
        tgt_in[b, 1 : len(y) + 1] = y
        tgt_out[b, : len(y)] = y
        tgt_out[b, len(y)] = EOS
    return src, src_lens, tgt_in, tgt_out


def tiny_model(score: Score, mode: Mode, extra: dict, cell: CellType, attend_from: AttendFrom) -> Seq2Seq:
    cfg = ModelConfig(embedding_size=8, embedding_dropout=0.0)
    cfg.encoder.hidden_size, cfg.encoder.dropout = 8, 0.0
    cfg.decoder.hidden_size, cfg.decoder.output_size, cfg.decoder.dropout, cfg.decoder.cell = 16, 8, 0.0, cell
    att = cfg.attention
    att.score, att.mode, att.hidden_size, att.window, att.attend_from = score, mode, 8, 2, attend_from
    for key, value in extra.items():
        setattr(att, key, value)
    torch.manual_seed(1)
    return build_model(cfg, 30, 30).double().train()


class _Batch:
    def __init__(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> None:
        self.src, self.src_lens, self.tgt_in, self.tgt_out = src, src_lens, tgt_in, tgt_out


@pytest.mark.parametrize("score", list(Score))
@pytest.mark.parametrize(("mode", "extra"), MODES, ids=["soft", "hard-gumbel", "hard-reinforce", "local-m", "local-p"])
def test_optimised_decoder_equals_the_step_by_step_reference(score: Score, mode: Mode, extra: dict) -> None:
    check(score, mode, extra, CellType.gru, AttendFrom.previous)


@pytest.mark.parametrize(("mode", "extra"), MODES, ids=["soft", "hard-gumbel", "hard-reinforce", "local-m", "local-p"])
@pytest.mark.parametrize(("cell", "attend_from"), [(CellType.lstm, AttendFrom.previous), (CellType.gru, AttendFrom.current),
                                                   (CellType.lstm, AttendFrom.current)])
def test_reference_agrees_for_lstm_and_luong_order(mode: Mode, extra: dict, cell: CellType, attend_from: AttendFrom) -> None:
    check(Score.general, mode, extra, cell, attend_from)


def check(score: Score, mode: Mode, extra: dict, cell: CellType, attend_from: AttendFrom) -> None:
    model = tiny_model(score, mode, extra, cell, attend_from)
    src, src_lens, tgt_in, tgt_out = toy_batch()
    torch.manual_seed(7)
    fast, _, n_tokens = batch_loss(model, _Batch(src, src_lens, tgt_in, tgt_out), 0.1)  # type: ignore[arg-type]
    torch.manual_seed(7)
    ref, ref_alphas = reference_loss(model, src, src_lens, tgt_in, tgt_out, cell, 0.1)
    assert n_tokens == int((tgt_out != PAD).sum())
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    model.eval()
    torch.manual_seed(7)
    alphas = model.attention_matrices(src, src_lens, tgt_in)
    if mode == Mode.soft or mode == Mode.local:  # deterministic: the eval matrices are the reference's
        torch.testing.assert_close(alphas, ref_alphas, rtol=1e-10, atol=1e-10)
    # and the gradient flows through the same graph
    model.train()
    torch.manual_seed(7)
    fast, _, _ = batch_loss(model, _Batch(src, src_lens, tgt_in, tgt_out), 0.1)  # type: ignore[arg-type]
    fast_grads = torch.autograd.grad(fast, [p for p in model.parameters()], allow_unused=True)
    torch.manual_seed(7)
    ref, _ = reference_loss(model, src, src_lens, tgt_in, tgt_out, cell, 0.1)
    ref_grads = torch.autograd.grad(ref, [p for p in model.parameters()], allow_unused=True)
    for (name, _), a, b in zip(model.named_parameters(), fast_grads, ref_grads):
        if a is None or b is None:
            assert (a is None or not a.any()) and (b is None or not b.any()), name
            continue
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10, msg=name)
