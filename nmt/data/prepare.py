"""The data pipeline: raw pairs -> sentencepiece -> encoded, filtered splits, cached on disk.

The cache folder `{data.cache_dir}/{data.name}-{key}` is keyed by the data config and the corpus
files' size and modification time, so a second run reuses the subword model and the encoded
splits, and any change (a new vocabulary size, an edited file) prepares anew.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets

from nmt.config import CorpusSource, DataConfig
from nmt.data.corpus import load_split, split_files
from nmt.data.tokenizer import EOS, Tokenizer, side_lines, train_sentencepiece

log = logging.getLogger(__name__)

# Keys that do not change what is prepared.
_NOT_IN_KEY = ("batch_tokens", "batch_sentences", "cache_dir", "url")


@dataclass
class FilterStats:
    """How many training pairs were read, dropped (and why) and kept."""

    total: int
    empty: int
    too_long: int

    @property
    def kept(self) -> int:
        return self.total - self.empty - self.too_long


class PreparedData:
    """Tokenizers and encoded splits (columns `src`, `tgt`, `src_ids`, `tgt_ids`) of a corpus.

    `src_ids` end with EOS; `tgt_ids` carry neither BOS nor EOS (the model adds them).
    """

    def __init__(self, cfg: DataConfig, folder: Path, src_tok: Tokenizer, tgt_tok: Tokenizer) -> None:
        self.cfg = cfg
        self.folder = folder
        self.src_tokenizer = src_tok
        self.tgt_tokenizer = tgt_tok
        self._splits: dict[str, datasets.Dataset] = {}

    def split(self, name: str) -> datasets.Dataset:
        """The encoded split `name` (train/valid/test), encoding and caching it on first use."""
        if name not in self._splits:
            path = self.folder / name
            if not (path / "dataset_info.json").exists():
                encode_split(self, name, path)
            self._splits[name] = datasets.load_from_disk(str(path))
        return self._splits[name]

    @property
    def filter_stats(self) -> FilterStats:
        self.split("train")
        return FilterStats(**json.loads((self.folder / "train_filter.json").read_text()))


def cache_key(cfg: DataConfig) -> str:
    """Hash of everything that determines the prepared data."""
    fields = {k: v for k, v in asdict(cfg).items() if k not in _NOT_IN_KEY}
    if cfg.source != CorpusSource.hub:
        stamps = []
        for split in ("train", "valid", "test"):
            try:
                for path in split_files(cfg, split):
                    st = path.stat()
                    stamps.append((str(path.resolve()), st.st_size, st.st_mtime_ns))
            except Exception:  # a missing test split only matters when it is used
                if split == "train":
                    raise
        fields["files"] = stamps
    blob = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def prepare(cfg: DataConfig) -> PreparedData:
    """Train (or load) the subword model(s) and return the prepared corpus."""
    folder = Path(cfg.cache_dir) / f"{cfg.name}-{cache_key(cfg)}"
    folder.mkdir(parents=True, exist_ok=True)
    models = {"src": folder / "src.model", "tgt": folder / "tgt.model"}
    if not models["tgt"].exists():
        train = load_split(cfg, "train")
        log.info("training sentencepiece (%s, %d pieces) on %d pairs", cfg.subword_model.value, cfg.vocab_size, len(train))
        if cfg.joint_vocab:
            proto = train_sentencepiece(side_lines(iter(train), ("src", "tgt")), cfg)
            protos = {"src": proto, "tgt": proto}
        else:
            protos = {side: train_sentencepiece(side_lines(iter(train), (side,)), cfg) for side in models}
        for side, path in models.items():  # tgt last: its presence marks completion
            _atomic_write(path, protos[side])
    else:
        log.info("reusing prepared data in %s", folder)
    src_tok = Tokenizer(models["src"].read_bytes())
    tgt_tok = Tokenizer(models["tgt"].read_bytes())
    return PreparedData(cfg, folder, src_tok, tgt_tok)


def encode_split(data: PreparedData, name: str, path: Path) -> None:
    """Encode one split with the tokenizers and save it to `path` (train is also filtered)."""
    cfg = data.cfg
    key = f"{data.folder.name}-{name}"
    encoded = encode_pairs(load_split(cfg, name), data.src_tokenizer, data.tgt_tokenizer, key)
    if name == "train":
        encoded, stats = filter_pairs(encoded, cfg.max_len, key)
        _atomic_write(data.folder / "train_filter.json", json.dumps(asdict(stats)).encode())
        log.info(
            "train: %d pairs read, %d dropped as empty, %d dropped as longer than %d tokens, %d kept",
            stats.total, stats.empty, stats.too_long, cfg.max_len, stats.kept,
        )
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    encoded.save_to_disk(str(tmp))
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)


def encode_pairs(raw: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer, key: str) -> datasets.Dataset:
    """Add `src_ids` (ending in EOS) and `tgt_ids` to a Dataset of `src`, `tgt` texts.
    `key` names the result in datasets' cache (the tokenizers cannot be hashed)."""

    def encode(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        src = [ids + [EOS] for ids in src_tok.encode(batch["src"])]
        return {"src_ids": src, "tgt_ids": tgt_tok.encode(batch["tgt"])}

    return raw.map(encode, batched=True, batch_size=2000, new_fingerprint=f"{key}-enc", desc="encode")


def filter_pairs(ds: datasets.Dataset, max_len: int, key: str) -> tuple[datasets.Dataset, FilterStats]:
    """Drop pairs with an empty side or a side over `max_len` tokens (target counted with EOS)."""

    def flags(batch: dict[str, list]) -> dict[str, list[int]]:
        out = []
        for s, t, s_ids, t_ids in zip(batch["src"], batch["tgt"], batch["src_ids"], batch["tgt_ids"]):
            empty = not s.strip() or not t.strip()
            out.append(1 if empty else 2 if max(len(s_ids), len(t_ids) + 1) > max_len else 0)
        return {"drop": out}

    flagged = ds.map(flags, batched=True, batch_size=5000, new_fingerprint=f"{key}-flag", desc="filter")
    reasons = flagged.data.column("drop").to_numpy()
    stats = FilterStats(total=len(ds), empty=int((reasons == 1).sum()), too_long=int((reasons == 2).sum()))
    kept = flagged.filter(lambda d: [x == 0 for x in d], input_columns="drop", batched=True, new_fingerprint=f"{key}-kept")
    return kept.remove_columns("drop"), stats


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
