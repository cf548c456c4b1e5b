"""The optimised decoder against the plain, step-by-step reference of equations 1-5 of Bahdanau et al. (2015)
(`tests/reference_model.py`): same weights, same random draws -> the same loss and gradients, for
every score and mode, both decoder orders and both cells."""

from __future__ import annotations

import pytest
import torch
from reference_model import reference_loss

from nmt.config.schema import AttendFrom, CellType, HardEstimator, LocalVariant, Mode, ModelConfig, Score
from nmt.data.tokenizer import BOS, EOS, PAD
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq
from nmt.training.step import batch_loss

MODES = [
    (Mode.soft, {}),
    (Mode.hard, {"hard_estimator": HardEstimator.gumbel}),
    (Mode.hard, {"hard_estimator": HardEstimator.reinforce}),
    (Mode.local, {"local": LocalVariant.monotonic}),
    (Mode.local, {"local": LocalVariant.predictive}),
]


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
    cfg = ModelConfig(embedding_size=8, embedding_dropout=0.0, word_dropout=0.0)
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
        self.src, self.src_lens, self.tgt_in, self.tgt_out, self.guide = src, src_lens, tgt_in, tgt_out, None


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
    fast, _, _, n_tokens = batch_loss(model, _Batch(src, src_lens, tgt_in, tgt_out), 0.1)  # type: ignore[arg-type]
    torch.manual_seed(7)
    ref, ref_alphas = reference_loss(model, src, src_lens, tgt_in, tgt_out, cell, 0.1)
    assert n_tokens == int((tgt_out != PAD).sum())
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    model.eval()
    alphas = model.attention_matrices(src, src_lens, tgt_in)
    with torch.no_grad():  # in eval mode every mode is deterministic (hard: the argmax): no shared draws needed
        eval_loss, eval_alphas = reference_loss(model, src, src_lens, tgt_in, tgt_out, cell, 0.1)
        fast_eval, *_ = batch_loss(model, _Batch(src, src_lens, tgt_in, tgt_out), 0.1)  # type: ignore[arg-type]
    torch.testing.assert_close(alphas, eval_alphas, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(fast_eval, eval_loss, rtol=1e-10, atol=1e-10)
    # and the gradient flows through the same graph
    model.train()
    torch.manual_seed(7)
    fast, *_ = batch_loss(model, _Batch(src, src_lens, tgt_in, tgt_out), 0.1)  # type: ignore[arg-type]
    fast_grads = torch.autograd.grad(fast, [p for p in model.parameters()], allow_unused=True)
    torch.manual_seed(7)
    ref, _ = reference_loss(model, src, src_lens, tgt_in, tgt_out, cell, 0.1)
    ref_grads = torch.autograd.grad(ref, [p for p in model.parameters()], allow_unused=True)
    for (name, _), a, b in zip(model.named_parameters(), fast_grads, ref_grads):
        if a is None or b is None:
            assert (a is None or not a.any()) and (b is None or not b.any()), name
            continue
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10, msg=name)
