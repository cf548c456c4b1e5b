"""Data-preparation scale benchmark: peak resident memory and time to prepare a large corpus.

Generates a synthetic parallel corpus (Zipf-distributed words, 3-40 words per sentence; the
target side is a word-by-word transliteration in reverse order) streamed to disk, then runs the
real pipeline on it (`nmt.data.prepare`: Arrow loading through `datasets`, sentencepiece
training, batched encoding and length filtering) and prints one JSON line:

    python scripts/bench/bench_data.py --pairs 1000000
    {"pairs": 1000000, "kept": ..., "generate_s": ..., "prepare_s": ..., "peak_rss_mib": ..., ...}

Peak RSS is the process's high-water mark (`getrusage`), measured after generation too, so it
covers the whole preparation.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from nmt.config.schema import CorpusSource, DataConfig
from nmt.data.prepare import prepare
from nmt.system.runtime import machine_description

SYLLABLES = np.array(["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "an", "el", "or", "ub", "sch", "ei", "au", "ng"])


def vocabulary(size: int, rng: np.random.Generator) -> np.ndarray:
    """`size` distinct pseudo-words of 1-4 syllables."""
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 5))
        words.add("".join(rng.choice(SYLLABLES, n)))
    return np.array(sorted(words))


def generate(folder: Path, pairs: int, seed: int = 0, chunk: int = 50_000) -> None:
    """Write train/valid/test `.xx`/`.yy` files with `pairs` training pairs, chunk by chunk."""
    rng = np.random.default_rng(seed)
    src_words = vocabulary(30_000, rng)
    tgt_words = np.array([w[::-1] + "e" for w in src_words])  # a fixed word translation
    probs = 1.0 / np.arange(1, len(src_words) + 1)
    probs /= probs.sum()
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", pairs), ("valid", 1000), ("test", 1000)):
        with open(folder / f"{split}.xx", "w", encoding="utf-8") as fs, open(folder / f"{split}.yy", "w", encoding="utf-8") as ft:
            for start in range(0, n, chunk):
                m = min(chunk, n - start)
                lengths = rng.integers(3, 41, m)
                ids = rng.choice(len(src_words), int(lengths.sum()), p=probs)
                for sent in np.split(ids, np.cumsum(lengths)[:-1]):
                    fs.write(" ".join(src_words[sent]) + "\n")
                    ft.write(" ".join(tgt_words[sent[::-1]]) + "\n")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--workdir", type=Path, default=None, help="where corpus and cache go (default: a temporary folder, removed)")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="nmt-bench-data-"))
    try:
        t0 = time.perf_counter()
        generate(workdir / "corpus", args.pairs)
        generate_s = time.perf_counter() - t0
        rss_after_generation = peak_rss_mib()
        cfg = DataConfig(
            name="bench", source=CorpusSource.files, dir=str(workdir / "corpus"), src_lang="xx", tgt_lang="yy",
            vocab_size=args.vocab_size, cache_dir=str(workdir / "prepared"),
        )
        t0 = time.perf_counter()
        data = prepare(cfg)
        train = data.split("train")
        prepare_s = time.perf_counter() - t0
        stats = data.filter_stats
        corpus_mib = sum(f.stat().st_size for f in (workdir / "corpus").iterdir()) / 2**20
        print(json.dumps({
            "pairs": args.pairs, "kept": len(train), "dropped_too_long": stats.too_long, "corpus_mib": round(corpus_mib, 1),
            "generate_s": round(generate_s, 1), "prepare_s": round(prepare_s, 1),
            "peak_rss_mib": round(peak_rss_mib(), 1), "peak_rss_after_generation_mib": round(rss_after_generation, 1),
            "cpus": len(os.sched_getaffinity(0)), "machine": machine_description(),
        }))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
