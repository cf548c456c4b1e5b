"""Subword regularisation (nmt.data.sampling): every epoch a new segmentation of the same text,
repeatable under its seed, within the length limit, prefetched, and resumed exactly."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import torch
from support import assert_user_error, cli, compose_config, toy_overrides

from nmt.data.batching import RaggedIds
from nmt.data.prepare import PreparedData, prepare
from nmt.data.sampling import EpochPrefetch, SegmentationSampler
from nmt.data.tokenizer import EOS
from nmt.model.checkpoint import load_checkpoint
from nmt.training.session import train


def grammar_data(workdir: Path) -> PreparedData:
    return prepare(compose_config(toy_overrides(workdir, task="grammar", n_train=300)).data)


def rows(ids: RaggedIds) -> list[list[int]]:
    return [ids[k].tolist() for k in range(len(ids.offsets) - 1)]


def test_an_epochs_segmentation_spells_the_same_text_repeats_under_its_seed_and_changes_with_the_epoch(workdir: Path) -> None:
    data = grammar_data(workdir)
    ds = data.split("train")
    sampler = SegmentationSampler(ds, data.src_tokenizer, data.tgt_tokenizer, alpha=0.5, nbest=-1, max_len=1000, seed=3)
    first, again, second = sampler.draw(0), sampler.draw(0), sampler.draw(1)
    usual = (RaggedIds.of_column(ds, "src_ids"), RaggedIds.of_column(ds, "tgt_ids"))
    for side in (0, 1):
        assert rows(first[side]) == rows(again[side])
        assert rows(first[side]) != rows(second[side])
        changed = np.mean([a != b for a, b in zip(rows(first[side]), rows(usual[side]))])
        assert changed > 0.5, changed  # most sentences of 5-20 words get another segmentation
    tokenizers = (data.src_tokenizer, data.tgt_tokenizer)
    for side in (0, 1):
        assert tokenizers[side].decode(rows(first[side])) == tokenizers[side].decode(rows(usual[side]))
    assert all(r[-1] == EOS and EOS not in r[:-1] for r in rows(first[0]))
    assert all(EOS not in r for r in rows(first[1]))


def test_a_sample_longer_than_max_len_keeps_the_usual_ids(workdir: Path) -> None:
    data = grammar_data(workdir)
    ds = data.split("train")
    usual = (RaggedIds.of_column(ds, "src_ids"), RaggedIds.of_column(ds, "tgt_ids"))
    limit = int(max(usual[0].lengths().max(), usual[1].lengths().max() + 1))
    # alpha 0.05 over every segmentation: near-uniform, so many samples run longer than the usual ids
    free = SegmentationSampler(ds, data.src_tokenizer, data.tgt_tokenizer, 0.05, -1, 10_000, seed=0).draw(0)
    src, tgt = SegmentationSampler(ds, data.src_tokenizer, data.tgt_tokenizer, 0.05, -1, limit, seed=0).draw(0)
    too_long = 0
    for k in range(len(ds)):
        over = len(free[0][k]) > limit or len(free[1][k]) + 1 > limit
        too_long += over
        expected = (usual[0][k], usual[1][k]) if over else (free[0][k], free[1][k])
        assert src[k].tolist() == expected[0].tolist() and tgt[k].tolist() == expected[1].tolist(), k
    assert 0 < too_long < len(ds)


def test_the_next_epoch_is_made_in_the_background_while_this_one_is_used() -> None:
    made: list[tuple[int, str]] = []

    def make(epoch: int) -> int:
        made.append((epoch, threading.current_thread().name))
        return epoch * 10

    prefetch = EpochPrefetch(make)
    assert prefetch.get(0) == 0
    assert prefetch.get(1) == 10  # made ahead, in the background
    assert prefetch.get(5) == 50  # not the epoch made ahead: made now
    prefetch.close()
    where = {epoch: thread for epoch, thread in made}
    assert [epoch for epoch, _ in made].count(1) == 1
    assert where[0] == where[5] == threading.current_thread().name and where[1].startswith("next-epoch")


def test_training_with_sampling_resumes_exactly_and_differs_from_training_without(workdir: Path) -> None:
    gold = workdir / "toy"  # toy_grammar writes its gold links beside its text; guide toward them
    base = toy_overrides(workdir, task="grammar", n_train=100) + [
        "data.batch_tokens=300", "train.schedule=plateau", "train.valid_every=5", "train.test_at_end=false",
        "train.early_stopping_patience=100", "data.sampling_alpha=0.5", "data.sampling_nbest=-1", "log.attention_examples=0"]
    cfg = compose_config(base + ["train.max_steps=20"])
    prepare(cfg.data)
    guide = ["train.guided_alignment.weight=0.5", f"train.guided_alignment.alignments={next(gold.rglob('train.gold'))}"]
    whole = train(compose_config(base + guide + ["train.max_steps=20"]), workdir / "whole")
    assert whole.epoch >= 1 and whole.step == 20  # the run crosses an epoch: a second segmentation is drawn
    cut = train(compose_config(base + guide + ["train.max_steps=5"]), workdir / "cut")
    assert cut.batch_in_epoch > 0  # stopped mid-epoch: the resumed run must draw this epoch's segmentation again
    resumed = train(compose_config(base + guide + ["train.max_steps=20", "train.resume=auto"]), workdir / "cut")
    assert resumed.step == 20
    plain = train(compose_config(base + guide + ["train.max_steps=20", "data.sampling_alpha=0"]), workdir / "plain")
    a, b, c = (load_checkpoint(workdir / run / "checkpoints" / "last.pt").model for run in ("whole", "cut", "plain"))
    for name, tensor in a.items():
        torch.testing.assert_close(b[name], tensor, rtol=1e-5, atol=1e-6)
    assert plain.step == 20 and any(not torch.allclose(c[name], tensor) for name, tensor in a.items())


def test_sampling_from_one_segmentation_is_refused_naming_the_key() -> None:
    assert_user_error(cli("nmt.train", ["data.sampling_alpha=0.1", "data.sampling_nbest=1"]),
                      "data.sampling_nbest=1: sampling draws from the n best segmentations; expected -1 (all of them) or >= 2")
