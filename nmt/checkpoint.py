"""Self-contained checkpoints: model, resolved config, subword models, step, optimiser, metrics.

Written atomically (temporary file, fsync, rename): a crash at any moment leaves the previous
checkpoint intact. Loaded with `weights_only=True`: only tensors and plain Python values inside.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from nmt.config import Config
from nmt.data.tokenizer import Tokenizer
from nmt.errors import UserError
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` to `path` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint`; a missing or corrupt file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # torch raises several types (with pages of advice) for truncated/garbled files
        raise UserError(
            f"{path}: not a readable checkpoint: truncated, corrupt, or not written by nmt.train ({type(err).__name__})"
        ) from err
    for key in ("model", "config", "src_spm", "tgt_spm"):
        if key not in payload:
            raise UserError(f"{path}: checkpoint lacks '{key}'")
    return payload


def bytes_tensor(data: bytes) -> torch.Tensor:
    """Raw bytes (a sentencepiece model) as a uint8 tensor: safe for `weights_only` loading."""
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def tensor_bytes(value: torch.Tensor | bytes) -> bytes:
    """Inverse of `bytes_tensor` (plain bytes, as older checkpoints hold, pass through)."""
    return value if isinstance(value, bytes) else value.numpy().tobytes()


def config_from_checkpoint(payload: dict[str, Any]) -> Config:
    """The run's config, validated against the current schema."""
    merged = OmegaConf.merge(OmegaConf.structured(Config), payload["config"])
    config = OmegaConf.to_object(merged)
    assert isinstance(config, Config)
    return config


def load_model(path: str | Path, device: str | torch.device = "cpu") -> tuple[Seq2Seq, Config, Tokenizer, Tokenizer]:
    """Rebuild a trained model from a checkpoint -> (model in eval mode, config, src tokenizer, tgt tokenizer)."""
    payload = load_checkpoint(path, device)
    cfg = config_from_checkpoint(payload)
    src_tok, tgt_tok = Tokenizer(tensor_bytes(payload["src_spm"])), Tokenizer(tensor_bytes(payload["tgt_spm"]))
    model = build_model(cfg.model, len(src_tok), len(tgt_tok))
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as err:
        raise UserError(f"{path}: weights do not fit the model its config describes ({err})") from None
    return model.to(device).eval(), cfg, src_tok, tgt_tok
