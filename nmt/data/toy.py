"""Toy translation tasks whose true word alignment is known.

`copy`: target = source. `reverse`: target = source reversed. Sentences are random sequences of
symbols `w0 .. w{n-1}`; each split is written as `{split}.src`, `{split}.tgt` and `{split}.gold`,
the gold alignment in Pharaoh format (`i-j`: source word i, target word j, 0-based). The folder
name hashes the toy config, so a change of settings writes a new corpus and never mixes two.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict
from pathlib import Path

from nmt.config.schema import DataConfig, ToyConfig, ToyTask
from nmt.system.files import atomic_write_text, file_lock

TOY_SPLITS = {"train": "n_train", "valid": "n_valid", "test": "n_test"}


def toy_dir(cfg: DataConfig) -> Path:
    """The folder of the toy corpus described by `cfg.toy` (below `data.dir` or `data/toy`)."""
    key = json.dumps(asdict(cfg.toy), sort_keys=True, default=str)
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    return Path(cfg.dir or "data/toy") / f"{cfg.toy.task.value}-{digest}"


def toy_pair(tokens: list[str], task: ToyTask) -> tuple[list[str], list[tuple[int, int]]]:
    """Target tokens and gold links (source index, target index) of one toy source sentence."""
    n = len(tokens)
    if task == ToyTask.copy:
        return list(tokens), [(j, j) for j in range(n)]
    return tokens[::-1], [(n - 1 - i, i) for i in range(n)]


def generate(cfg: ToyConfig, n: int, rng: random.Random) -> list[tuple[list[str], list[str], list[tuple[int, int]]]]:
    """`n` random (source, target, gold links) triples."""
    symbols = [f"w{k}" for k in range(cfg.n_symbols)]
    out = []
    for _ in range(n):
        src = [rng.choice(symbols) for _ in range(rng.randint(cfg.min_len, cfg.max_len))]
        tgt, links = toy_pair(src, cfg.task)
        out.append((src, tgt, links))
    return out


def ensure_toy_corpus(cfg: DataConfig) -> Path:
    """Write the toy corpus (all splits) unless it is already there; return its folder. Processes
    that ask for the same corpus at once write it once (a lock), so its files, and the cache key
    made from their modification times, are the same for all of them."""
    folder = toy_dir(cfg)
    if (folder / "DONE").exists():
        return folder
    with file_lock(folder / ".lock", wait=True):
        if not (folder / "DONE").exists():
            _write_toy_corpus(cfg, folder)
    return folder


def _write_toy_corpus(cfg: DataConfig, folder: Path) -> None:
    rng = random.Random(cfg.toy.seed)
    for split, size_key in TOY_SPLITS.items():
        triples = generate(cfg.toy, int(getattr(cfg.toy, size_key)), rng)
        files = {
            cfg.src_lang: "\n".join(" ".join(s) for s, _, _ in triples),
            cfg.tgt_lang: "\n".join(" ".join(t) for _, t, _ in triples),
            "gold": "\n".join(" ".join(f"{i}-{j}" for i, j in links) for _, _, links in triples),
        }
        for suffix, text in files.items():
            atomic_write_text(folder / f"{split}.{suffix}", text + "\n")
    atomic_write_text(folder / "DONE", "ok\n")
