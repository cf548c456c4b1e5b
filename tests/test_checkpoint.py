"""Checkpoints: a typed, versioned payload; they round-trip into identical models; writes are
atomic; bad files give clear errors; a checkpoint written before the version key (version 1, by
the code of 2026-11-30, `tests/data/checkpoint_v1.pt`) still loads, translates and resumes."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support import ROOT, compose_config
from test_decoder import batch, tiny_model

from nmt.model.checkpoint import CHECKPOINT_VERSION, Checkpoint, bytes_tensor, load_checkpoint, load_model, save_checkpoint, tensor_bytes
from nmt.system.errors import UserError
from nmt.training.session import train

V1 = ROOT / "tests" / "data" / "checkpoint_v1.pt"


def small(weight: float) -> Checkpoint:
    return Checkpoint(model={"w": torch.full((2,), weight)}, config={}, src_spm=bytes_tensor(b""), tgt_spm=bytes_tensor(b""))


def test_atomic_write_keeps_the_old_checkpoint_when_saving_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "last.pt"
    save_checkpoint(path, small(1.0))

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        save_checkpoint(path, small(0.0))
    monkeypatch.undo()
    loaded = load_checkpoint(path)
    assert torch.equal(loaded.model["w"], torch.ones(2)) and loaded.version == CHECKPOINT_VERSION
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


def test_the_payload_is_plain_and_typed(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "c.pt", small(2.0))
    raw = torch.load(tmp_path / "c.pt", weights_only=True)  # only tensors and plain values
    assert raw["version"] == CHECKPOINT_VERSION and set(raw) == set(Checkpoint.__dataclass_fields__)


def test_a_newer_version_is_one_line_naming_it(tmp_path: Path) -> None:
    payload = small(1.0).payload()
    payload["version"] = CHECKPOINT_VERSION + 1
    torch.save(payload, tmp_path / "new.pt")
    expected = rf"new.pt: checkpoint version {CHECKPOINT_VERSION + 1}; this nmt reads versions 1 to {CHECKPOINT_VERSION}"
    with pytest.raises(UserError, match=expected):
        load_checkpoint(tmp_path / "new.pt")


def test_subword_models_travel_as_tensors() -> None:
    for data in (b"", b"\x00\xffproto"):
        assert tensor_bytes(bytes_tensor(data)) == data


def test_missing_and_corrupt_checkpoints_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="bad.pt: not a checkpoint: not the zip archive"):
        load_checkpoint(bad)


def test_trained_checkpoint_loads_back_into_an_identical_model(trained_toy: Path) -> None:
    model, cfg, src_tok, tgt_tok = load_model(trained_toy / "checkpoints" / "best.pt")
    saved = load_checkpoint(trained_toy / "checkpoints" / "best.pt")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, saved.model[name]), name
    assert cfg.data.name == "toy_reverse"
    assert tgt_tok.decode(tgt_tok.encode(["w1 w2 w3"])) == ["w1 w2 w3"]
    # the same weights give the same outputs as a model rebuilt a second time
    again, *_ = load_model(trained_toy / "checkpoints" / "best.pt")
    src, lens, tgt = batch()
    with torch.no_grad():
        torch.testing.assert_close(model(src, lens, tgt)[0], again(src, lens, tgt)[0])


def test_checkpoint_with_foreign_weights_is_rejected(tmp_path: Path, trained_toy: Path) -> None:
    saved = load_checkpoint(trained_toy / "checkpoints" / "best.pt")
    saved.model = tiny_model(["model.decoder.hidden_size=48"]).state_dict()
    save_checkpoint(tmp_path / "odd.pt", saved)
    with pytest.raises(UserError, match="weights do not fit"):
        load_model(tmp_path / "odd.pt")

def test_a_checkpoint_takes_the_values_of_settings_it_predates() -> None:
    """checkpoint_v1.pt predates word dropout, tied source embeddings and model.init_range: its config
    says none of them, and it loads as what it trained as (torch's initialisation), with its own source
    embedding matrix and weights unchanged."""
    saved = load_checkpoint(V1)
    assert "tie_source_embeddings" not in saved.config["model"] and "word_dropout" not in saved.config["model"]
    model, cfg, *_ = load_model(V1)
    assert cfg.model.tie_source_embeddings is False and cfg.model.word_dropout == 0.0 and cfg.model.init_range == 0.0
    assert model.src_embedding.weight is not model.decoder.embedding.weight
    torch.testing.assert_close(model.src_embedding.weight, saved.model["src_embedding.weight"])
    torch.testing.assert_close(model.decoder.embedding.weight, saved.model["decoder.embedding.weight"])


@pytest.mark.slow

def test_a_version_1_checkpoint_loads_translates_and_resumes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    saved = load_checkpoint(V1)
    assert "version" not in torch.load(V1, weights_only=True)  # written before the version key
    decode = saved.config["train"]["decode"]  # train.valid_* moved to train.decode.*
    assert decode == {"beam_size": 2, "alpha": 0.5, "max_len_ratio": 1.5, "max_len_extra": 10, "batch_tokens": 3000}
    model, cfg, *_ = load_model(V1)
    assert cfg.train.decode.beam_size == 2 and cfg.data.toy.n_symbols == 8
    proc = subprocess.run([sys.executable, "-m", "nmt.translate", f"ckpt={V1}", "decode.beam_size=1"], cwd=ROOT, input="w1 w2\n",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and len(proc.stdout.split("\n")) == 2, proc.stderr[-2000:]
    # Its run continues: the same toy corpus regenerated here gives the same subword model.
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    shutil.copy(V1, run_dir / "checkpoints" / "last.pt")
    overrides = ["data=toy_copy", f"data.dir={tmp_path / 'toy'}", f"data.cache_dir={tmp_path / 'prepared'}", "data.toy.n_train=300",
                 "data.toy.n_valid=20", "data.toy.n_test=20", "data.toy.n_symbols=8", "model.embedding_size=16",
                 "model.encoder.hidden_size=8", "model.decoder.hidden_size=16", "model.decoder.output_size=16",
                 "model.attention.hidden_size=8",
                 # it predates word dropout and tied source embeddings, so it trained without either (both on by
                 # default since): a resume must state the run's config
                 "model.word_dropout=0", "model.tie_source_embeddings=false",
                 "train.max_steps=5", "train.valid_every=3", "train.progress=false", "train.threads=1", "train.test_at_end=false",
                 "train.resume=auto"]
    without = [o for o in overrides if o not in ("model.word_dropout=0", "model.tie_source_embeddings=false")]
    predated = r"model\.tie_source_embeddings: checkpoint False, now True; model\.word_dropout: checkpoint 0\.0, now 0\.1"
    with pytest.raises(UserError, match=predated):
        train(compose_config(without), run_dir)
    with caplog.at_level(logging.INFO, logger="nmt.training.loop"):
        state = train(compose_config(overrides), run_dir)
    assert f"resumed {run_dir / 'checkpoints' / 'last.pt'} at step 3 (epoch 0, batch 3)" in caplog.text
    assert state.step == 5 and load_checkpoint(run_dir / "checkpoints" / "last.pt").version == CHECKPOINT_VERSION
