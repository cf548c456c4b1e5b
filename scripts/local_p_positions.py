"""Where does predictive local attention (Luong's local-p) put its window?

    python scripts/local_p_positions.py CHECKPOINT [--split valid] [--sentences 200]

Runs the model with teacher forcing on the split's first sentences and records the window centre
p_i = T_x sigmoid(v_p^T tanh(W_p s)) of every target step. Prints how far p_i moves within a
sentence (its spread, in source positions), how often the sigmoid is saturated (p_i within half a
position of either end of the source), how monotonic p_i is along the target (Kendall's tau of
p_i against i) and its mean distance from the diagonal i T_x / T_y. A predictor that has learned
moves its window along the source; one that has not keeps it in one place.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from nmt.alignment.aer import kendall_tau
from nmt.attention.modes import LocalNormaliser
from nmt.data.batching import BatchSampler
from nmt.data.corpus import load_split
from nmt.data.prepare import encode_pairs
from nmt.data.tokenizer import PAD
from nmt.model.checkpoint import load_model
from nmt.model.seq2seq import Seq2Seq


def positions(model: Seq2Seq, normaliser: LocalNormaliser, sampler: BatchSampler) -> list[tuple[np.ndarray, int]]:
    """Per sentence: (p_i of its real target steps (T,), its source length T_x)."""
    recorded: list[torch.Tensor] = []
    original = normaliser.position

    def record(memory, query, step):  # type: ignore[no-untyped-def]
        p = original(memory, query, step)
        recorded.append(p.detach())
        return p

    normaliser.position = record  # type: ignore[method-assign]
    out: list[tuple[np.ndarray, int]] = []
    with torch.no_grad():
        for index in sampler.batches(0):
            batch = sampler.collate(index)
            recorded.clear()
            model.attention_matrices(batch.src, batch.src_lens, batch.tgt_in)
            p = torch.stack(recorded, 1).numpy()  # (B, T)
            rows = (batch.tgt_out != PAD).sum(1).tolist()
            out += [(p[b, : rows[b]], int(batch.src_lens[b])) for b in range(len(index))]
    normaliser.position = original  # type: ignore[method-assign]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--sentences", type=int, default=200)
    args = parser.parse_args()
    model, cfg, src_tok, tgt_tok = load_model(args.checkpoint)
    assert isinstance(model, Seq2Seq)
    normaliser = model.decoder.attention.normaliser
    if not (isinstance(normaliser, LocalNormaliser) and normaliser.predictive):
        raise SystemExit(f"{args.checkpoint}: not predictive local attention")
    model.eval()
    raw = load_split(cfg.data, args.split).select(range(args.sentences))
    sampler = BatchSampler(encode_pairs(raw, src_tok, tgt_tok, f"local-p-{args.split}-{args.sentences}"), 4000, shuffle=False)
    found = positions(model, normaliser, sampler)
    spread = [float(p.std()) for p, _ in found]
    saturated = np.mean([np.mean((p < 0.5) | (p > n - 0.5)) for p, n in found])
    taus = [t for t in (kendall_tau(p.tolist()) for p, _ in found) if t is not None]
    diagonal = [float(np.abs(p - np.arange(len(p)) * n / len(p)).mean()) for p, n in found]
    relative = np.concatenate([p / n for p, n in found])
    print(f"{len(found)} sentences of {args.split}, {sum(len(p) for p, _ in found)} target steps")
    print(f"p_i / T_x: mean {relative.mean():.3f}, quantiles 5/50/95% {np.quantile(relative, [0.05, 0.5, 0.95]).round(3).tolist()}")
    print(f"spread of p_i within a sentence (std, source positions): median {np.median(spread):.2f}")
    print(f"saturated steps (p_i within 0.5 of either end): {saturated:.1%}")
    print(f"Kendall tau of p_i along the target: median {np.median(taus) if taus else float('nan'):.2f} ({len(taus)} sentences)")
    print(f"mean |p_i - diagonal|: {np.mean(diagonal):.2f} source positions")


if __name__ == "__main__":
    main()
