"""The data pipeline: filter counts, clear errors on bad files, caching, batching, toy gold."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from support import MULTI30K, compose_config, toy_overrides

from nmt.data.batching import BatchSampler
from nmt.data.corpus import load_parallel_files, load_split
from nmt.data.prepare import prepare
from nmt.data.toy import ensure_toy_corpus
from nmt.system.cli import one_line
from nmt.system.errors import UserError


def write_corpus(folder: Path, pairs: dict[str, list[tuple[str, str]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in pairs.items():
        (folder / f"{split}.xx").write_text("".join(s + "\n" for s, _ in rows), encoding="utf-8")
        (folder / f"{split}.yy").write_text("".join(t + "\n" for _, t in rows), encoding="utf-8")


def custom_config(workdir: Path, extra: list[str] | None = None):  # noqa: ANN201
    return compose_config([
        "data=custom", f"data.dir={workdir / 'corpus'}", "data.src_lang=xx", "data.tgt_lang=yy",
        f"data.cache_dir={workdir / 'prepared'}", "data.vocab_size=40", "data.subword_model=word", "data.max_len=6",
        *(extra or []),
    ])


def test_filter_counts_on_a_hand_made_corpus(workdir: Path) -> None:
    train = [("a b c", "c b a")] * 20 + [("", "x")] * 2 + [("a", "  ")] + [("a " * 6, "b")] * 3 + [("a", "b " * 5)] * 4
    # "a " * 6 is 6 tokens + EOS = 7 > 6: too long; "b " * 5 is 5 + EOS = 6: kept
    write_corpus(workdir / "corpus", {"train": train, "valid": [("a b", "b a"), ("", "")], "test": [("a", "a")]})
    data = prepare(custom_config(workdir).data)
    stats = data.filter_stats
    assert (stats.total, stats.empty, stats.too_long, stats.kept) == (30, 3, 3, 24)
    assert len(data.split("train")) == 24
    assert len(data.split("valid")) == 2  # evaluation splits are never filtered
    src_ids = data.split("train")[0]["src_ids"]
    assert src_ids[-1] == 3  # EOS


def test_second_prepare_reuses_the_cache_and_a_change_invalidates_it(workdir: Path) -> None:
    write_corpus(workdir / "corpus", {"train": [("a b c", "c b a")] * 10, "valid": [("a", "a")], "test": [("b", "b")]})
    first = prepare(custom_config(workdir).data)
    first.split("train")
    model_mtime = (first.folder / "src.model").stat().st_mtime_ns
    second = prepare(custom_config(workdir).data)
    assert second.folder == first.folder
    assert (second.folder / "src.model").stat().st_mtime_ns == model_mtime
    assert len(second.split("train")) == 10
    third = prepare(custom_config(workdir, ["data.max_len=5"]).data)
    assert third.folder != first.folder


def test_cache_follows_file_contents_not_times(workdir: Path) -> None:
    """A corpus copied anew (same bytes, new mtimes) reuses its prepared data; edited, it does not."""
    pairs = {"train": [("a b c", "c b a")] * 10, "valid": [("a", "a")], "test": [("b", "b")]}
    write_corpus(workdir / "corpus", pairs)
    first = prepare(custom_config(workdir).data).folder
    for path in (workdir / "corpus").iterdir():
        os.utime(path, ns=(1, 1))
    assert prepare(custom_config(workdir).data).folder == first
    pairs["train"][0] = ("a b", "b a")
    write_corpus(workdir / "corpus", pairs)
    assert prepare(custom_config(workdir).data).folder != first


def test_line_count_mismatch_names_both_files(workdir: Path) -> None:
    (workdir / "a.xx").write_text("1\n2\n3\n")
    (workdir / "a.yy").write_text("1\n2\n")
    with pytest.raises(UserError, match=r"a\.xx has 3 lines but .*a\.yy has 2"):
        load_parallel_files(workdir / "a.xx", workdir / "a.yy", cache_dir=str(workdir / "hf"))


def test_invalid_utf8_names_file_and_line(workdir: Path) -> None:
    (workdir / "b.xx").write_bytes(b"ok\nstill ok\nbad \xff byte\n")
    (workdir / "b.yy").write_text("1\n2\n3\n")
    with pytest.raises(UserError, match=r"b\.xx:3: invalid UTF-8"):
        load_parallel_files(workdir / "b.xx", workdir / "b.yy", cache_dir=str(workdir / "hf"))


def test_missing_and_empty_files_are_named(workdir: Path) -> None:
    (workdir / "c.xx").write_text("")
    (workdir / "c.yy").write_text("x\n")
    with pytest.raises(UserError, match=r"c\.xx: file is empty"):
        load_parallel_files(workdir / "c.xx", workdir / "c.yy")
    with pytest.raises(UserError, match=r"d\.xx: file not found"):
        load_parallel_files(workdir / "d.xx", workdir / "c.yy")


def test_multi30k_is_read_from_multi30k_dir() -> None:
    ds = load_split(compose_config([]).data, "valid")
    assert len(ds) == 1014
    assert ds[0]["src"] == (MULTI30K / "val.de").read_text(encoding="utf-8").splitlines()[0]


def test_multi30k_download_from_a_local_source(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With MULTI30K_DIR unset the files are fetched (gzip) from data.url: here a file:// mirror."""
    mirror = workdir / "mirror"
    mirror.mkdir()
    for lang in ("de", "en"):
        lines = (MULTI30K / f"val.{lang}").read_bytes()
        (mirror / f"val.{lang}.gz").write_bytes(gzip.compress(lines))
    monkeypatch.delenv("MULTI30K_DIR")
    cfg = compose_config([f"data.url={mirror.as_uri()}", f"data.dir={workdir / 'm30k'}", f"data.cache_dir={workdir / 'hf'}"])
    ds = load_split(cfg.data, "valid")
    assert len(ds) == 1014
    assert (workdir / "m30k" / "val.en").read_bytes() == (MULTI30K / "val.en").read_bytes()


def test_a_failed_download_is_one_line_that_names_the_url_and_its_cause_once(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MULTI30K_DIR")
    missing = (workdir / "no-mirror").as_uri()
    cfg = compose_config([f"data.url={missing}", f"data.dir={workdir / 'm30k'}", f"data.cache_dir={workdir / 'hf'}"])
    with pytest.raises(UserError) as caught:
        load_split(cfg.data, "valid")
    line = one_line(caught.value)
    assert line.startswith(f"{missing}/val.de.gz: download failed (") and line.endswith("); set MULTI30K_DIR to a local copy"), line
    assert line.count("No such file") == 1, line
    assert not (workdir / "m30k").exists() or not any((workdir / "m30k").iterdir())  # nothing half-written


def test_hub_source_reads_a_dataset_by_name(workdir: Path) -> None:
    """The hub path, pointed at a local dataset folder (the same `load_dataset` call a hub name takes)."""
    folder = workdir / "hubdata"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"de": "Hallo Welt", "en": "Hello world"}\n{"de": "Ja", "en": "Yes"}\n')
    cfg = compose_config(["data.source=hub", f"data.hub_name={folder}", "data.train=train", f"data.cache_dir={workdir / 'p'}"])
    ds = load_split(cfg.data, "train")
    assert ds["src"] == ["Hallo Welt", "Ja"] and ds["tgt"] == ["Hello world", "Yes"]


def test_batches_respect_the_token_budget_and_cover_every_row_once(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, n_train=500) + ["data.batch_tokens=100"])
    ds = prepare(cfg.data).split("train")
    sampler = BatchSampler(ds, batch_tokens=100, shuffle=True, seed=3)
    rows = []
    for index in sampler.batches(epoch=0):
        batch = sampler.collate(index)
        assert batch.src.numel() <= 100 and batch.tgt_in.numel() <= 100
        assert (batch.tgt_in[:, 0] == 2).all()
        rows.extend(index.tolist())
    assert sorted(rows) == list(range(len(ds)))
    first, again, other = (np.concatenate(sampler.batches(e)) for e in (0, 0, 1))
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_sentence_cap_limits_batches_as_well(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, n_train=500))
    ds = prepare(cfg.data).split("train")
    batches = BatchSampler(ds, batch_tokens=100_000, shuffle=True, seed=3, max_sentences=64).batches(epoch=0)
    assert max(len(b) for b in batches) == 64 and sum(len(b) for b in batches) == len(ds)
    assert sum(len(b) < 64 for b in batches) == 1  # only the remainder


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_toy_gold_alignments_are_true(workdir: Path, task: str) -> None:
    cfg = compose_config(toy_overrides(workdir, task=task, n_train=50))
    folder = ensure_toy_corpus(cfg.data)
    src = (folder / "train.src").read_text().splitlines()
    tgt = (folder / "train.tgt").read_text().splitlines()
    gold = (folder / "train.gold").read_text().splitlines()
    assert len(src) == len(tgt) == len(gold) == 50
    for s, t, g in zip(src, tgt, gold):
        s_words, t_words = s.split(), t.split()
        links = [tuple(map(int, link.split("-"))) for link in g.split()]
        assert len(links) == len(t_words)
        assert all(s_words[i] == t_words[j] for i, j in links)
    assert (tgt == src) == (task == "copy")
