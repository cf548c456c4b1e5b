"""Checkpoints round-trip into identical models; writes are atomic; bad files give clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_decoder import batch, tiny_model

from nmt.checkpoint import bytes_tensor, load_checkpoint, load_model, save_checkpoint, tensor_bytes
from nmt.errors import UserError


def test_atomic_write_keeps_the_old_checkpoint_when_saving_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "last.pt"
    spm = bytes_tensor(b"")
    save_checkpoint(path, {"model": {"w": torch.ones(2)}, "config": {}, "src_spm": spm, "tgt_spm": spm})

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        save_checkpoint(path, {"model": {"w": torch.zeros(2)}})
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


def test_subword_models_travel_as_tensors() -> None:
    for data in (b"", b"\x00\xffproto"):
        assert tensor_bytes(bytes_tensor(data)) == data


def test_missing_and_corrupt_checkpoints_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="bad.pt: not a readable checkpoint"):
        load_checkpoint(bad)


def test_trained_checkpoint_loads_back_into_an_identical_model(trained_toy: Path) -> None:
    model, cfg, src_tok, tgt_tok = load_model(trained_toy / "checkpoints" / "best.pt")
    payload = torch.load(trained_toy / "checkpoints" / "best.pt", weights_only=True)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, payload["model"][name]), name
    assert cfg.data.name == "toy_reverse"
    assert tgt_tok.decode(tgt_tok.encode(["w1 w2 w3"])) == ["w1 w2 w3"]
    # the same weights give the same outputs as a model rebuilt a second time
    again, *_ = load_model(trained_toy / "checkpoints" / "best.pt")
    src, lens, tgt = batch()
    with torch.no_grad():
        torch.testing.assert_close(model(src, lens, tgt)[0], again(src, lens, tgt)[0])


def test_checkpoint_with_foreign_weights_is_rejected(tmp_path: Path, trained_toy: Path) -> None:
    payload = torch.load(trained_toy / "checkpoints" / "best.pt", weights_only=True)
    payload["model"] = tiny_model(["model.decoder.hidden_size=48"]).state_dict()
    save_checkpoint(tmp_path / "odd.pt", payload)
    with pytest.raises(UserError, match="weights do not fit"):
        load_model(tmp_path / "odd.pt")
