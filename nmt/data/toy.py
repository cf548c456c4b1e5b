"""Toy translation tasks whose true word alignment is known.

`copy`: target = source. `reverse`: target = source reversed. Sentences are random sequences of
symbols `w{first} .. w{first + n - 1}`. `grammar`: a small language pair whose alignment is not a
line: the source is `subject verb object (preposition noun-phrase)*`, noun phrases `article
(adjective) noun`; the target translates word for word through a lexicon (noun `nK` -> `xK`,
adjective `aK` -> `bK`, verb `vK` -> `uK`, preposition `pK` -> `rK`, article `d0`/`d1` -> `e0`/`e1`),
puts adjectives after their noun and the verb at the end, writes every third noun as two words
(`xK q`, both linked to the noun) and leaves the article `d2` untranslated (linked to nothing).
Words of a vocabulary range the training split never saw are still translatable piece by piece
(`n47` -> `x47`), as names and cognates are in real text.

Each split is written as `{split}.src`, `{split}.tgt` and `{split}.gold`, the gold alignment in
Pharaoh format (`i-j`: source word i, target word j, 0-based). The folder name hashes the toy
config, so a change of settings writes a new corpus and never mixes two.
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


Triple = tuple[list[str], list[str], list[tuple[int, int]]]  # source words, target words, gold links


def toy_pair(tokens: list[str], task: ToyTask) -> tuple[list[str], list[tuple[int, int]]]:
    """Target tokens and gold links (source index, target index) of one copy/reverse source sentence."""
    n = len(tokens)
    if task == ToyTask.copy:
        return list(tokens), [(j, j) for j in range(n)]
    return tokens[::-1], [(n - 1 - i, i) for i in range(n)]


LEXICON = {"n": "x", "a": "b", "v": "u", "p": "r", "d": "e"}  # source word class -> target prefix
UNTRANSLATED = "d2"


def noun_phrase(cfg: ToyConfig, rng: random.Random) -> list[str]:
    """`article (adjective) noun`, with word numbers drawn from the config's range."""
    def word(kind: str) -> str:
        return f"{kind}{cfg.first_symbol + rng.randrange(cfg.n_symbols)}"
    return [f"d{rng.randrange(3)}"] + ([word("a")] if rng.random() < 0.5 else []) + [word("n")]


def translate_phrase(words: list[tuple[int, str]]) -> list[tuple[str, int]]:
    """The (target word, source index) of a phrase's (source index, word)s: the adjective after its
    noun; the untranslated article dropped; every third noun as two words."""
    out: list[tuple[str, int]] = []
    adjective: list[tuple[str, int]] = []
    for i, w in words:
        kind, number = w[0], w[1:]
        if w == UNTRANSLATED:
            continue
        if kind == "a":
            adjective = [(f"b{number}", i)]
            continue
        out.append((LEXICON[kind] + number, i))
        if kind == "n":
            out += [("q", i)] if int(number) % 3 == 0 else []
            out += adjective
    return out


def grammar_pair(cfg: ToyConfig, rng: random.Random) -> Triple:
    """One `grammar` sentence pair of min_len..max_len source words (drawn again until it fits)."""
    while True:
        phrases = [noun_phrase(cfg, rng), [f"v{cfg.first_symbol + rng.randrange(cfg.n_symbols)}"], noun_phrase(cfg, rng)]
        while sum(map(len, phrases)) < cfg.min_len or (rng.random() < 0.5 and sum(map(len, phrases)) < cfg.max_len):
            phrases.append([f"p{rng.randrange(4)}"] + noun_phrase(cfg, rng))
        src = [w for phrase in phrases for w in phrase]
        if cfg.min_len <= len(src) <= cfg.max_len:
            break
    indexed, start = [], 0
    for phrase in phrases:
        indexed.append(list(enumerate(phrase, start)))
        start += len(phrase)
    verb = indexed.pop(1)  # the verb goes to the end
    pairs = [pair for phrase in indexed + [verb] for pair in translate_phrase(phrase)]
    return src, [w for w, _ in pairs], [(i, j) for j, (_, i) in enumerate(pairs)]


def generate(cfg: ToyConfig, n: int, rng: random.Random) -> list[Triple]:
    """`n` random (source, target, gold links) triples."""
    if cfg.task == ToyTask.grammar:
        return [grammar_pair(cfg, rng) for _ in range(n)]
    symbols = [f"w{k}" for k in range(cfg.first_symbol, cfg.first_symbol + cfg.n_symbols)]
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
