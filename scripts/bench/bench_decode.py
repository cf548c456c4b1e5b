#!/usr/bin/env python
"""Decoding speed: sentences/s of greedy and beam-5 search on a split (default: the 1,000
test_2016_flickr sentences), median of several runs, for a checkpoint (default: the newest run's
best.pt), with the BLEU of what it decoded. Prints one JSON line.

    python scripts/bench/bench_decode.py [--ckpt PATH] [--runs 3] [--beam 5] [--threads 0] [--precision fp32|bf16] [--profile]

It also counts the decoder rows each search computed (one per live hypothesis per step: the
work the search's stopping rule leaves), and with --profile prints, after the timed runs, a
cProfile of one more pass of each search (the functions with the most own time) to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from typing import Any

import sacrebleu
import torch

from nmt.config.schema import DecodeConfig, Precision
from nmt.data.corpus import load_split
from nmt.data.prepare import encode_pairs
from nmt.decoding.splits import translate_dataset
from nmt.model.checkpoint import load_model, newest_checkpoint
from nmt.system.runtime import DECODE_PRODUCTS, autocast_dtype, configure_allocator, cpu_bf16_speedup, machine_description, set_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", help="checkpoint (default: best.pt of the newest run under outputs/)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--batch-tokens", type=int, default=6000)
    parser.add_argument("--batch-sentences", type=int, default=0, help="at most this many sentences per batch (0: no cap)")
    parser.add_argument("--max-len-ratio", type=float, default=1.5)
    parser.add_argument("--max-len-extra", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--precision", choices=[p.value for p in Precision], default="auto",
                        help="decode.precision: the search's matrix products (auto: bf16 where this CPU's bf16 products are 2x faster)")
    parser.add_argument("--profile", action="store_true", help="cProfile one more pass of each search (to stderr)")
    args = parser.parse_args()
    configure_allocator()
    set_threads(args.threads)
    ckpt = args.ckpt or str(newest_checkpoint("outputs"))
    model, cfg, src_tok, tgt_tok = load_model(ckpt)
    raw = load_split(cfg.data, args.split)
    ds = encode_pairs(raw, src_tok, tgt_tok, f"bench-{args.split}-{len(raw)}")
    result: dict[str, object] = {
        "checkpoint": ckpt, "sentences": len(ds), "runs": args.runs, "threads": torch.get_num_threads(),
        "machine": machine_description(), "precision": args.precision,
        "decodes_in": "bf16" if autocast_dtype(args.precision, torch.device("cpu"), use="decode") else "fp32",
        "cpu_bf16_decode_product_speedup": round(cpu_bf16_speedup(shapes=DECODE_PRODUCTS), 2),
    }
    rows = [0]
    step = model.step

    def counted_step(y_prev: torch.Tensor, *rest: Any) -> Any:
        rows[0] += y_prev.size(0)
        return step(y_prev, *rest)

    model.step = counted_step  # type: ignore[method-assign]
    for name, beam in (("greedy", 1), (f"beam{args.beam}", args.beam)):
        opts = DecodeConfig(beam_size=beam, alpha=args.alpha, max_len_ratio=args.max_len_ratio, max_len_extra=args.max_len_extra,
                            batch_tokens=args.batch_tokens, precision=Precision(args.precision))
        times = []
        for _ in range(args.runs):
            rows[0] = 0
            start = time.perf_counter()
            texts, hyps = translate_dataset(model, ds, tgt_tok, opts, torch.device("cpu"), args.batch_sentences)
            times.append(time.perf_counter() - start)
        result[f"{name}_decoder_rows"] = rows[0]
        if args.profile:
            with cProfile.Profile() as profile:
                translate_dataset(model, ds, tgt_tok, opts, torch.device("cpu"), args.batch_sentences)
            print(f"--- {name} ---", file=sys.stderr)
            pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(12)
        result[f"{name}_sentences_per_s"] = round(len(ds) / statistics.median(times), 1)
        result[f"{name}_seconds"] = [round(t, 2) for t in times]
        result[f"{name}_mean_output_tokens"] = round(sum(len(h.ids) for h in hyps) / len(hyps), 1)
        result[f"{name}_bleu"] = round(sacrebleu.corpus_bleu(texts, [list(raw["tgt"])]).score, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
