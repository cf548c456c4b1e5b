"""Self-contained checkpoints: model, resolved config, subword models, step, optimiser, metrics.

Written atomically (temporary file, fsync, rename): a crash at any moment leaves the previous
checkpoint intact. Loaded with `weights_only=True`: only tensors and plain Python values inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from nmt.config import Config
from nmt.config_checks import check_model, check_ranges
from nmt.data.tokenizer import Tokenizer
from nmt.errors import UserError
from nmt.files import atomic_output
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` to `path` atomically."""
    with atomic_output(path, "wb") as f:
        torch.save(payload, f)


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint`; a missing, corrupt or incomplete file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # torch raises several types (with pages of advice) for truncated/garbled files
        raise UserError(
            f"{path}: not a readable checkpoint: truncated, corrupt, or not written by nmt.train ({type(err).__name__})"
        ) from err
    if not isinstance(payload, dict):
        raise UserError(f"{path}: not a checkpoint of nmt.train (it holds a {type(payload).__name__}, not a mapping)")
    for key, kind in (("model", dict), ("config", dict), ("src_spm", torch.Tensor), ("tgt_spm", torch.Tensor)):
        if key not in payload:
            raise UserError(f"{path}: checkpoint lacks '{key}'")
        if not isinstance(payload[key], kind) and not (kind is torch.Tensor and isinstance(payload[key], bytes)):
            raise UserError(f"{path}: checkpoint's '{key}' is a {type(payload[key]).__name__}, expected a {kind.__name__}")
    return payload


def bytes_tensor(data: bytes) -> torch.Tensor:
    """Raw bytes (a sentencepiece model) as a uint8 tensor: safe for `weights_only` loading."""
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def tensor_bytes(value: torch.Tensor | bytes) -> bytes:
    """Inverse of `bytes_tensor` (plain bytes, as older checkpoints hold, pass through)."""
    return value if isinstance(value, bytes) else value.numpy().tobytes()


def config_from_checkpoint(payload: dict[str, Any], path: str | Path = "checkpoint") -> Config:
    """The run's config, validated against the current schema."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), payload["config"])
        config = OmegaConf.to_object(merged)
    except (OmegaConfBaseException, ValueError, TypeError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: the checkpoint's config does not fit the current schema ({reason})") from None
    assert isinstance(config, Config)
    try:
        check_ranges(config)  # the other training checks concern the machine it trained on (paths, devices)
        check_model(config.model)
    except UserError as err:
        raise UserError(f"{path}: the checkpoint's config is invalid ({err})") from None
    return config


def tokenizers_from_checkpoint(payload: dict[str, Any], path: str | Path = "checkpoint") -> tuple[Tokenizer, Tokenizer]:
    """The source and target sentencepiece models stored in a checkpoint."""
    try:
        return Tokenizer(tensor_bytes(payload["src_spm"])), Tokenizer(tensor_bytes(payload["tgt_spm"]))
    except (RuntimeError, TypeError, ValueError) as err:
        raise UserError(f"{path}: the checkpoint's subword models are not valid sentencepiece models ({err})") from None


def load_model(path: str | Path, device: str | torch.device = "cpu") -> tuple[Seq2Seq, Config, Tokenizer, Tokenizer]:
    """Rebuild a trained model from a checkpoint -> (model in eval mode, config, src tokenizer, tgt tokenizer)."""
    payload = load_checkpoint(path, device)
    cfg = config_from_checkpoint(payload, path)
    src_tok, tgt_tok = tokenizers_from_checkpoint(payload, path)
    try:
        model = build_model(cfg.model, len(src_tok), len(tgt_tok))
    except UserError as err:
        raise UserError(f"{path}: {err}") from None
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, TypeError, AttributeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: weights do not fit the model its config describes ({first})") from None
    return model.to(device).eval(), cfg, src_tok, tgt_tok


def newest_checkpoint(runs_dir: str | Path, name: str = "best.pt") -> Path:
    """The `checkpoints/{name}` of the most recently modified run under `runs_dir`."""
    found = sorted(Path(runs_dir).glob(f"**/checkpoints/{name}"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UserError(f"no checkpoints/{name} under {runs_dir}/: train first or pass ckpt=PATH")
    return found[-1]


def checkpoint_path(ckpt: str | None, runs_dir: str) -> Path:
    """The checkpoint a command works on: `ckpt`, or the newest run's best.pt under `runs_dir`."""
    return Path(ckpt) if ckpt else newest_checkpoint(runs_dir)
