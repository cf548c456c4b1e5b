"""Beam search: beam 1 is greedy; n-best lists are ranked; the length penalty is GNMT's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nmt.data.batching import BatchSampler
from nmt.data.corpus import load_split
from nmt.data.prepare import encode_pairs
from nmt.decoding.search import beam_search, greedy_search, length_penalty
from nmt.model.checkpoint import load_model


def toy_batches(trained_toy: Path):  # noqa: ANN201
    model, cfg, src_tok, tgt_tok = load_model(trained_toy / "checkpoints" / "best.pt")
    ds = encode_pairs(load_split(cfg.data, "test"), src_tok, tgt_tok, "search-test")
    sampler = BatchSampler(ds, 400, shuffle=False)
    return model, [sampler.collate(index) for index in sampler.batches(0)[:3]]


def test_beam_size_one_is_exactly_greedy(trained_toy: Path) -> None:
    model, batches = toy_batches(trained_toy)
    n = 0
    for batch in batches:
        greedy = greedy_search(model, batch.src, batch.src_lens)
        beam = beam_search(model, batch.src, batch.src_lens, beam_size=1, alpha=0.0)
        for g, (b,) in zip(greedy, beam, strict=True):
            assert g.ids == b.ids
            torch.testing.assert_close(g.alignment, b.alignment)
            assert g.score == pytest.approx(b.score, abs=1e-4)
            n += 1
    assert n > 20


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_n_best_lists_are_ranked_and_scored_with_the_length_penalty(trained_toy: Path, alpha: float) -> None:
    model, batches = toy_batches(trained_toy)
    batch = batches[0]
    nbest = beam_search(model, batch.src, batch.src_lens, beam_size=4, alpha=alpha, n_best=3)
    memory_check = 0
    for k, hyps in enumerate(nbest):
        assert len(hyps) == 3
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for h in hyps:
            assert h.alignment.shape == (len(h.ids) + 1, int(batch.src_lens[k]))
            # re-score the hypothesis by teacher forcing: log p(Y) / lp(|Y| + 1)
            ids = torch.tensor([[2, *h.ids]])
            out = torch.tensor([[*h.ids, 3]])
            with torch.no_grad():
                logits = model(batch.src[k : k + 1, : int(batch.src_lens[k])], batch.src_lens[k : k + 1], ids).logits
            logp = torch.log_softmax(logits, -1).gather(2, out.unsqueeze(2)).sum()
            expected = float(logp) / float(length_penalty(torch.tensor(len(h.ids) + 1), alpha))
            assert h.score == pytest.approx(expected, abs=1e-3)
            memory_check += 1
    assert memory_check > 0


def test_n_best_cannot_exceed_the_beam() -> None:
    with pytest.raises(ValueError, match="n_best=3 cannot exceed beam_size=2"):
        beam_search(None, torch.zeros(1, 1), torch.ones(1), beam_size=2, n_best=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hard_gumbel", "local_m", "local_p"])
def test_hard_and_local_modes_decode_with_beams(mode: str) -> None:
    """In beam search too, hard rows are one-hot argmaxes and local-m's window moves with the step."""
    from support import TINY_MODEL, compose_config

    from nmt.model.build import build_model

    torch.manual_seed(0)
    cfg = compose_config([*TINY_MODEL, f"model/attention={mode}", "model.attention.window=1"])
    model = build_model(cfg.model, 30, 30).eval()
    src = torch.randint(4, 30, (3, 9))
    src[:, -1] = 3
    lens = torch.full((3,), 9)
    greedy = greedy_search(model, src, lens, extra=4)
    beams = beam_search(model, src, lens, beam_size=1, extra=4)
    for g, (b,) in zip(greedy, beams, strict=True):
        assert g.ids == b.ids
    for (hyp, *_) in beam_search(model, src, lens, beam_size=3, extra=4):
        rows = hyp.alignment
        if mode == "hard_gumbel":
            assert torch.all((rows == 0) | (rows == 1)) and torch.all(rows.sum(1) == 1)
        if mode == "local_m":
            for i, row in enumerate(rows):
                outside = (torch.arange(9) - min(i, 8)).abs() > 1
                assert torch.all(row[outside] == 0)
