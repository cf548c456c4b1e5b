#!/usr/bin/env python
"""How strongly a subword-sampling setting changes the training data: the share of training
sentences whose sampled segmentation differs from the usual one, and the pieces per sentence
against the usual, per side, for epoch 0 of `nmt.data.sampling.SegmentationSampler` (what a run
with `data.sampling_alpha=A data.sampling_nbest=N` trains on). Prints one JSON line per setting:

    python scripts/bench/sampling_strength.py 0.1:64 0.3:64 0.5:64 0.5:-1
    {"alpha": 0.1, "nbest": 64, "src_changed": ..., "src_pieces_ratio": ..., "tgt_changed": ..., ...}

The data are those of the default training config (Multi30k de-en, prepared as `make train` does).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from nmt.config.schema import DataConfig
from nmt.data.batching import RaggedIds
from nmt.data.prepare import prepare
from nmt.data.sampling import SegmentationSampler


def strength(usual: RaggedIds, sampled: RaggedIds) -> tuple[float, float]:
    """-> (share of rows whose ids differ, total sampled pieces / total usual pieces)."""
    changed = np.mean([not np.array_equal(usual[k], sampled[k]) for k in range(len(usual.lengths()))])
    return float(changed), float(sampled.lengths().sum() / usual.lengths().sum())


def setting(text: str) -> tuple[float, int]:
    """'ALPHA:NBEST' -> (alpha, nbest)."""
    alpha, _, nbest = text.partition(":")
    try:
        return float(alpha), int(nbest)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ALPHA:NBEST such as 0.3:64, got {text!r}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("settings", nargs="+", type=setting, help="ALPHA:NBEST, e.g. 0.3:64 (NBEST -1: all segmentations)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    cfg = DataConfig()
    data = prepare(cfg)
    train = data.split("train")
    for alpha, nbest in args.settings:
        sampler = SegmentationSampler(train, data.src_tokenizer, data.tgt_tokenizer, alpha, nbest, cfg.max_len, args.seed)
        src, tgt = sampler.draw(0)
        row: dict[str, float | int] = {"alpha": alpha, "nbest": nbest}
        for name, usual, sampled in (("src", sampler.usual[0], src), ("tgt", sampler.usual[1], tgt)):
            row[f"{name}_changed"], row[f"{name}_pieces_ratio"] = (round(v, 4) for v in strength(usual, sampled))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
