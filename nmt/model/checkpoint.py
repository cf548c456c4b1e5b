"""Self-contained checkpoints: model, resolved config, subword models, step, optimiser, metrics.

Written atomically (temporary file, fsync, rename): a crash at any moment leaves the previous
checkpoint intact. Loaded with `weights_only=True`: only tensors and plain Python values inside.
"""

from __future__ import annotations

import pickle
import re
import warnings
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from nmt.config.checks import check_model, check_ranges
from nmt.config.schema import Config
from nmt.data.tokenizer import Tokenizer
from nmt.model.build import build_model
from nmt.model.ensemble import DecodingModel, Ensemble
from nmt.model.seq2seq import Seq2Seq
from nmt.system.errors import UserError
from nmt.system.files import atomic_output

# 1: before the version key (validation decoding under train.valid_*); 2: before `members` (ensembles)
CHECKPOINT_VERSION = 3

# Settings whose default is not what a checkpoint written before the setting existed ran with: such
# a checkpoint trained without word dropout, with source embeddings of its own and from torch's
# initialisation, whatever the defaults are now. Its config, missing the key, takes these values
# (loading, and resume's comparison).
BEFORE_IT_EXISTED: dict[str, Any] = {"model.word_dropout": 0.0, "model.tie_source_embeddings": False, "model.init_range": 0.0}


def predated_config() -> Any:
    """The schema's defaults with BEFORE_IT_EXISTED applied (an OmegaConf structured config): what a
    checkpoint's config is merged onto, so a setting it lacks takes the value it ran with."""
    base = OmegaConf.structured(Config)
    for dotted, value in BEFORE_IT_EXISTED.items():
        OmegaConf.update(base, dotted, value)
    return base


@dataclass
class Checkpoint:
    """What a checkpoint file holds: stored as a plain dict of these fields (tensors and Python
    values only, so `torch.load(weights_only=True)` reads it). `best.pt` and `last.pt` are both
    complete: the model, the resolved run config and the subword models make a checkpoint
    self-contained; the optimiser, scheduler, training state and every process's random
    generators let a run continue exactly (`train.resume`)."""

    model: dict[str, torch.Tensor]
    config: dict[str, Any]
    src_spm: torch.Tensor  # sentencepiece model bytes as uint8 (`bytes_tensor`)
    tgt_spm: torch.Tensor
    step: int = 0
    epoch: int = 0
    metrics: dict[str, float] = field(default_factory=dict)  # of the validation it was written at
    best_bleu: float = -1.0
    n_params: int = 0
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    train_state: dict[str, Any] | None = None  # nmt.training.loop.TrainingState as a dict
    rng: list[Any] | None = None  # nmt.training.resume.rng_state() of each training process
    ema: dict[str, torch.Tensor] | None = None  # the moving average of the parameters (train.ema_decay), evaluated instead
    # An ensemble checkpoint (`ensemble_checkpoint`): the weights of its other models, each built
    # from the same `config`, which decode together with `model`; None for a single model.
    members: list[dict[str, torch.Tensor]] | None = None
    version: int = CHECKPOINT_VERSION

    def evaluated_weights(self) -> dict[str, torch.Tensor]:
        """The weights this checkpoint is evaluated with: its state dict, with the moving average's
        parameters in place of the training ones when it kept one. A tied weight (one tensor under
        several names, as the target embeddings and the output layer) gets its average under every name."""
        weights = dict(self.model)
        if not self.ema:
            return weights
        names_of: dict[int, list[str]] = {}
        for name, tensor in self.model.items():
            names_of.setdefault(tensor.data_ptr(), []).append(name)
        for name, average in self.ema.items():
            if name in self.model:
                for alias in names_of[self.model[name].data_ptr()]:
                    weights[alias] = average
        return weights

    def payload(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Write a checkpoint to `path` atomically."""
    with atomic_output(path, "wb") as f:
        torch.save(checkpoint.payload(), f)


def _migrate(payload: dict[str, Any], version: int) -> None:
    """Bring an older payload to the current version, in place."""
    if version < 2 and isinstance(payload.get("config"), dict) and isinstance(payload["config"].get("train"), dict):
        train, data = payload["config"]["train"], payload["config"].get("data") or {}
        decode = {new: train.pop(old) for old, new in (("valid_beam_size", "beam_size"), ("valid_alpha", "alpha"),
                  ("valid_max_len_ratio", "max_len_ratio"), ("valid_max_len_extra", "max_len_extra")) if old in train}
        if isinstance(data.get("batch_tokens"), int):
            decode["batch_tokens"] = 2 * data["batch_tokens"]  # what version 1 validated with
        train["decode"] = decode


_TYPES: dict[str, tuple[type, ...]] = {
    "model": (dict,), "config": (dict,), "src_spm": (torch.Tensor, bytes), "tgt_spm": (torch.Tensor, bytes),
}


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Read a checkpoint written by `save_checkpoint` (of this version or an older one); a missing,
    corrupt, incomplete or newer checkpoint is a UserError naming it."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a directory; expected a checkpoint file (such as {path / 'checkpoints' / 'best.pt'})")
    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    try:
        with warnings.catch_warnings():  # a damaged file can make torch warn about what it meets: the error says enough
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # torch raises several types (with pages of advice) for truncated/garbled files
        raise UserError(f"{path}: {unreadable(path, err)}") from None
    if not isinstance(payload, dict):
        raise UserError(f"{path}: not a checkpoint of nmt.train (it holds a {type(payload).__name__}, not a mapping)")
    version = payload.get("version", 1)
    if not isinstance(version, int) or not 1 <= version <= CHECKPOINT_VERSION:
        raise UserError(
            f"{path}: checkpoint version {version!r}; this nmt reads versions 1 to {CHECKPOINT_VERSION} (a newer nmt wrote it?)"
        )
    _migrate(payload, version)
    for key, kinds in _TYPES.items():
        if key not in payload:
            raise UserError(f"{path}: checkpoint lacks '{key}'")
        if not isinstance(payload[key], kinds):
            raise UserError(f"{path}: checkpoint's '{key}' is a {type(payload[key]).__name__}, expected a {kinds[0].__name__}")
    members = payload.get("members")
    if members is not None and not (isinstance(members, list) and all(isinstance(m, dict) for m in members)):
        raise UserError(f"{path}: checkpoint's 'members' is a {type(members).__name__}, expected a list of state dicts")
    known = {f.name for f in fields(Checkpoint)}
    return Checkpoint(**{k: v for k, v in payload.items() if k in known and k != "version"})


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# torch's advice around the reason (to load without weights_only, where to file an issue, ...): never repeated
_TORCH_ADVICE = re.compile(r"weights_only|torch\.load|safe_globals|trust|PyTorch 2\.6|file an issue|documentation|two options", re.I)


def unreadable(path: Path, err: Exception) -> str:
    """Why torch could not load `path`, in a few words (torch's own messages run to paragraphs of
    advice, one of which, to load without `weights_only`, must never be followed for a file one did
    not write)."""
    if path.stat().st_size == 0:
        return "not a checkpoint: the file is empty"
    if not zipfile.is_zipfile(path):
        return "not a checkpoint: not the zip archive that nmt.train writes (a truncated checkpoint, or another kind of file)"
    text = _ANSI.sub("", str(err))
    inline = re.search(r"WeightsUnpickler error:[ \t]*(\S[^\n]*)", text)
    lines = [inline.group(1).strip()] if inline else []
    lines += [line.strip() for line in text.splitlines() if line.strip() and not _TORCH_ADVICE.search(line)]
    found = re.search(r"GLOBAL ([^\s]+)", lines[0]) if isinstance(err, pickle.UnpicklingError) and lines else None
    if found and re.fullmatch(r"[A-Za-z_][\w.]*", found.group(1)):  # a real name, not damaged bytes
        return (f"refused: the checkpoint holds a Python object ({found.group(1)}) that only running code could rebuild; "
                "nmt reads checkpoints of tensors and plain values, as nmt.train writes them")
    reason = lines[0].split(". ")[0].rstrip(".") if lines else type(err).__name__
    return f"a corrupt checkpoint ({reason[:120]})"


def bytes_tensor(data: bytes) -> torch.Tensor:
    """Raw bytes (a sentencepiece model) as a uint8 tensor: safe for `weights_only` loading."""
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def tensor_bytes(value: torch.Tensor | bytes) -> bytes:
    """Inverse of `bytes_tensor` (plain bytes, as older checkpoints hold, pass through)."""
    return value if isinstance(value, bytes) else value.numpy().tobytes()


def config_from_checkpoint(checkpoint: Checkpoint, path: str | Path = "checkpoint") -> Config:
    """The run's config, validated against the current schema."""
    try:
        merged = OmegaConf.merge(predated_config(), checkpoint.config)
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


def tokenizers_from_checkpoint(checkpoint: Checkpoint, path: str | Path = "checkpoint") -> tuple[Tokenizer, Tokenizer]:
    """The source and target sentencepiece models stored in a checkpoint."""
    try:
        return Tokenizer(tensor_bytes(checkpoint.src_spm)), Tokenizer(tensor_bytes(checkpoint.tgt_spm))
    except (RuntimeError, TypeError, ValueError) as err:
        raise UserError(f"{path}: the checkpoint's subword models are not valid sentencepiece models ({err})") from None


def _built(cfg: Config, weights: dict[str, torch.Tensor], vocab: tuple[int, int], path: str | Path) -> Seq2Seq:
    try:
        model = build_model(cfg.model, *vocab)
    except UserError as err:
        raise UserError(f"{path}: {err}") from None
    try:
        model.load_state_dict(weights)
    except (RuntimeError, TypeError, AttributeError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: weights do not fit the model its config describes ({first})") from None
    return model


def load_model(path: str | Path, device: str | torch.device = "cpu") -> tuple[DecodingModel, Config, Tokenizer, Tokenizer]:
    """Rebuild a trained model from a checkpoint -> (model in eval mode, config, src tokenizer, tgt
    tokenizer); an ensemble checkpoint gives an `Ensemble` of its models."""
    checkpoint = load_checkpoint(path, device)
    cfg = config_from_checkpoint(checkpoint, path)
    src_tok, tgt_tok = tokenizers_from_checkpoint(checkpoint, path)
    vocab = (len(src_tok), len(tgt_tok))
    # the moving average, if kept, is what validation measured
    models = [_built(cfg, w, vocab, path) for w in [checkpoint.evaluated_weights(), *(checkpoint.members or [])]]
    model: DecodingModel = models[0] if len(models) == 1 else Ensemble(models)
    return model.to(device).eval(), cfg, src_tok, tgt_tok


def ensemble_checkpoint(paths: list[Path]) -> Checkpoint:
    """One checkpoint holding the evaluated weights of the models of `paths` (all of one model
    config and one pair of subword models), which every command decodes as an ensemble; weights only."""
    loaded = [load_checkpoint(path) for path in paths]
    first = loaded[0]
    for path, checkpoint in zip(paths[1:], loaded[1:]):
        if checkpoint.config.get("model") != first.config.get("model"):
            raise UserError(f"{path}: its model config differs from that of {paths[0]}; an ensemble checkpoint holds one config")
        spm = (tensor_bytes(checkpoint.src_spm), tensor_bytes(checkpoint.tgt_spm))
        if spm != (tensor_bytes(first.src_spm), tensor_bytes(first.tgt_spm)):
            raise UserError(f"{path}: its subword vocabularies differ from those of {paths[0]}; an ensemble's models must share them")
    weights = [w for checkpoint in loaded for w in [checkpoint.evaluated_weights(), *(checkpoint.members or [])]]
    return Checkpoint(model=weights[0], members=weights[1:], config=first.config, src_spm=first.src_spm, tgt_spm=first.tgt_spm,
                      step=max(c.step for c in loaded), epoch=max(c.epoch for c in loaded), n_params=sum(c.n_params for c in loaded))


def newest_checkpoint(runs_dir: str | Path, name: str = "best.pt") -> Path:
    """The `checkpoints/{name}` of the most recently modified run under `runs_dir`."""
    found = sorted(Path(runs_dir).glob(f"**/checkpoints/{name}"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UserError(f"no checkpoints/{name} under {runs_dir}/: train first or pass ckpt=PATH")
    return found[-1]


def checkpoint_path(ckpt: str | None, runs_dir: str) -> Path:
    """The checkpoint a command works on: `ckpt`, or the newest run's best.pt under `runs_dir`."""
    return Path(ckpt) if ckpt else newest_checkpoint(runs_dir)


def load_models(paths: list[str | Path], device: str | torch.device = "cpu") -> tuple[DecodingModel, Config, Tokenizer, Tokenizer]:
    """One checkpoint as `load_model`, or several as an `Ensemble` of all their models (their
    subword models must be the same) -> (model in eval mode, the first one's config, src tokenizer, tgt tokenizer)."""
    first, cfg, src_tok, tgt_tok = load_model(paths[0], device)
    if len(paths) == 1:
        return first, cfg, src_tok, tgt_tok
    models = [first]
    for path in paths[1:]:
        model, _, src, tgt = load_model(path, device)
        if src.model_proto != src_tok.model_proto or tgt.model_proto != tgt_tok.model_proto:
            raise UserError(f"{path}: its subword vocabularies differ from those of {paths[0]}; an ensemble's models must share them")
        models.append(model)
    members = [m for model in models for m in (model.members if isinstance(model, Ensemble) else [model])]
    return Ensemble(members).eval(), cfg, src_tok, tgt_tok
