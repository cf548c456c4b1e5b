"""The data pipeline: raw pairs -> sentencepiece -> encoded, filtered splits, cached on disk.

The cache folder `{data.cache_dir}/{data.name}-{key}` is keyed by the data config and the corpus
files' contents (their SHA-1 digests), so a second run reuses the subword model and the encoded
splits, a corpus copied or moved elsewhere too, and any change (a new vocabulary size, an edited
file) prepares anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets
import pyarrow.compute as pc

from nmt.config.schema import CorpusSource, DataConfig
from nmt.data.corpus import describe_split, extra_training_files, load_split, split_files
from nmt.data.tokenizer import EOS, Tokenizer, side_lines, train_sentencepiece
from nmt.system.errors import UserError
from nmt.system.files import atomic_write_bytes, atomic_write_text, content_digest, file_lock, remove_orphans, temporary_dir

log = logging.getLogger(__name__)

# Keys that do not change what is prepared.
_NOT_IN_KEY = ("batch_tokens", "batch_sentences", "cache_dir", "url", "sampling_alpha", "sampling_nbest")
# What a prepared folder holds; a change (2: the `line` column) prepares every corpus anew.
_FORMAT = 2


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
                with _preparing(self.folder):
                    if not (path / "dataset_info.json").exists():
                        encode_split(self, name, path)
            self._splits[name] = datasets.load_from_disk(str(path))
        return self._splits[name]

    @property
    def filter_stats(self) -> FilterStats:
        self.split("train")
        return FilterStats(**json.loads((self.folder / "train_filter.json").read_text()))

    def check_ready(self, splits: tuple[str, ...]) -> None:
        """Encode every split a run will use, now (a missing or unreadable valid or test file is
        found before training, not at the first validation), and make sure training has pairs left."""
        stats = self.filter_stats
        if stats.kept == 0:
            raise UserError(
                f"no training pair left: {stats.total} pairs read from {describe_split(self.cfg, 'train')}, "
                f"{stats.empty} dropped as empty, {stats.too_long} dropped as longer than data.max_len={self.cfg.max_len} tokens"
            )
        for name in splits:
            if len(self.split(name)) == 0:
                raise UserError(f"{describe_split(self.cfg, name)}: the {name} split is empty")


def cache_key(cfg: DataConfig) -> str:
    """Hash of everything that determines the prepared data."""
    fields = {k: v for k, v in asdict(cfg).items() if k not in _NOT_IN_KEY}
    fields["format"] = _FORMAT
    if cfg.source != CorpusSource.hub:
        # The files' contents, not their paths or times: a corpus copied or moved (new mtimes)
        # reuses its prepared data, an edited one is prepared afresh.
        digests: list[tuple[str, str]] = []
        for split in ("train", "valid", "test"):
            try:
                digests.extend((split, content_digest(path)) for path in split_files(cfg, split))
            except (OSError, UserError):  # a missing test split only matters when it is used
                if split == "train":
                    raise
        fields["files"] = digests
    if cfg.train_extra:
        fields["train_extra"] = [content_digest(path) for pair in extra_training_files(cfg) for path in pair]
    else:  # (absent, not empty: the folders of corpora prepared before the option existed keep their names)
        del fields["train_extra"]
    blob = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def prepared_folder(cfg: DataConfig) -> Path:
    """The cache folder of a corpus: everything prepared from it (subword models, encoded splits,
    a statistical aligner's links) lives here, keyed by the data config and the files' stamps."""
    return Path(cfg.cache_dir) / f"{cfg.name}-{cache_key(cfg)}"


def prepare(cfg: DataConfig) -> PreparedData:
    """Train (or load) the subword model(s) and return the prepared corpus. Safe when several
    processes prepare the same corpus at once: the first fills the cache, the others wait for it
    (a lock on the cache folder) and then reuse what it wrote."""
    folder = prepared_folder(cfg)
    models = {"src": folder / "src.model", "tgt": folder / "tgt.model"}
    if not models["tgt"].exists():
        with _preparing(folder):
            if not models["tgt"].exists():
                _train_subwords(cfg, models)
    else:
        log.info("reusing prepared data in %s", folder)
    src_tok = Tokenizer(models["src"].read_bytes())
    tgt_tok = Tokenizer(models["tgt"].read_bytes())
    return PreparedData(cfg, folder, src_tok, tgt_tok)


@contextlib.contextmanager
def _preparing(folder: Path) -> Iterator[None]:
    """Hold the cache folder's lock (waiting for another process that holds it); clear what a
    killed preparation left behind."""
    def waiting(holder: str) -> None:
        log.info("waiting for %s, which is preparing %s", holder or "another process", folder)

    with file_lock(folder / ".lock", wait=True, on_wait=waiting):
        remove_orphans(folder)
        yield


def _train_subwords(cfg: DataConfig, models: dict[str, Path]) -> None:
    train = load_split(cfg, "train")
    src_file, tgt_file = split_files(cfg, "train") if cfg.source != CorpusSource.hub else (cfg.hub_name, cfg.hub_name)
    if not _has_text_pair(train):
        raise UserError(f"{src_file}, {tgt_file}: no training pair has text on both sides ({len(train)} lines, all blank on one side)")
    log.info("training sentencepiece (%s, %d pieces) on %d pairs", cfg.subword_model.value, cfg.vocab_size, len(train))
    sides = {"src": ("src", "tgt"), "tgt": ("src", "tgt")} if cfg.joint_vocab else {"src": ("src",), "tgt": ("tgt",)}
    protos: dict[tuple[str, ...], bytes] = {}
    for columns in sides.values():
        if columns not in protos:
            try:
                protos[columns] = train_sentencepiece(side_lines(iter(train), columns), cfg)
            except RuntimeError as err:  # sentencepiece's own checks (e.g. a vocabulary it cannot fill)
                raise UserError(f"{src_file}, {tgt_file}: sentencepiece could not train on them ({err})") from None
    for side, path in models.items():  # tgt last: its presence marks completion
        atomic_write_bytes(path, protos[sides[side]])


def _has_text_pair(ds: datasets.Dataset) -> bool:
    """Whether some row has non-blank text on both sides (checked in Arrow, not row by row)."""
    if len(ds) == 0:
        return False
    filled = [pc.not_equal(pc.utf8_trim_whitespace(ds.data.column(side)), "") for side in ("src", "tgt")]
    return bool(pc.any(pc.and_(*filled)).as_py())


def encode_split(data: PreparedData, name: str, path: Path) -> None:
    """Encode one split with the tokenizers and save it to `path` (train is also filtered)."""
    cfg = data.cfg
    key = f"{data.folder.name}-{name}"
    encoded = encode_pairs(load_split(cfg, name), data.src_tokenizer, data.tgt_tokenizer, key)
    if name == "train":
        encoded, stats = filter_pairs(encoded, cfg.max_len, key)
        atomic_write_text(data.folder / "train_filter.json", json.dumps(asdict(stats)))
        log.info(
            "train: %d pairs read, %d dropped as empty, %d dropped as longer than %d tokens, %d kept",
            stats.total, stats.empty, stats.too_long, cfg.max_len, stats.kept,
        )
    tmp = temporary_dir(path)
    encoded.save_to_disk(str(tmp))
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)


def encode_pairs(raw: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer, key: str) -> datasets.Dataset:
    """Add `src_ids` (ending in EOS), `tgt_ids` and `line` (the 0-based line of the pair in its
    files, which filtering keeps) to a Dataset of `src`, `tgt` texts. `key` names the result in
    datasets' cache (the tokenizers cannot be hashed)."""

    def encode(batch: dict[str, list[str]], lines: list[int]) -> dict[str, list]:
        src = [ids + [EOS] for ids in src_tok.encode(batch["src"])]
        return {"src_ids": src, "tgt_ids": tgt_tok.encode(batch["tgt"]), "line": lines}

    return raw.map(encode, batched=True, batch_size=2000, with_indices=True, new_fingerprint=f"{key}-enc{_FORMAT}", desc="encode")


def truncate_sources(ds: datasets.Dataset, limit: int | None, key: str) -> tuple[datasets.Dataset, list[int]]:
    """Cut every `src_ids` longer than `limit` tokens to its first limit - 1 and EOS (for models
    that accept no longer source) -> (dataset, 0-based rows that were cut)."""
    if limit is None or len(ds) == 0:
        return ds, []
    lengths = pc.list_value_length(ds.data.column("src_ids")).to_numpy()
    rows = [int(r) for r in (lengths > limit).nonzero()[0]]
    if not rows:
        return ds, []

    def cut(batch: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        return {"src_ids": [ids[: limit - 1] + [EOS] if len(ids) > limit else ids for ids in batch["src_ids"]]}

    return ds.map(cut, batched=True, batch_size=2000, new_fingerprint=f"{key}-cut{limit}", desc="truncate"), rows


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


