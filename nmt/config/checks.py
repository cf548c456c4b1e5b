"""Every setting checked in one place, before any work starts.

Ranges are declared next to each field in `nmt.config.schema` (`num(default, ge=..., ...)`); `check_ranges`
enforces them for any schema object. The rules that tie several settings together, and the paths a
command needs, are below, one function per command's schema. `check_settings` runs the right ones;
every command line calls it (through `nmt.system.cli.typed_config`), and so does loading a checkpoint.
A broken rule is a UserError that names the key, its value and what is expected.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nmt.config.commands import AlignConfig, EvalConfig, TranslateConfig
from nmt.config.schema import Config, CorpusSource, GuideDecay, Mode, ModelConfig, Range, Schedule, Score
from nmt.system.errors import UserError


def describe(r: Range) -> str:
    """'>= 0', '> 0', 'in [0, 1)', ..."""
    low = f"[{r.ge:g}" if r.ge is not None else f"({r.gt:g}" if r.gt is not None else None
    high = f"{r.le:g}]" if r.le is not None else f"{r.lt:g})" if r.lt is not None else None
    if low and high:
        return f"in {low}, {high}"
    if low:
        return f"{'>=' if r.ge is not None else '>'} {low[1:]}"
    return f"{'<=' if r.le is not None else '<'} {high[:-1] if high else ''}"


def in_range(value: float, r: Range) -> bool:
    return not (
        (r.ge is not None and value < r.ge) or (r.gt is not None and value <= r.gt)
        or (r.le is not None and value > r.le) or (r.lt is not None and value >= r.lt)
    )


def check_ranges(obj: Any, prefix: str = "") -> None:
    """Every field of a schema dataclass (recursively) within the range its declaration gives."""
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            check_ranges(value, f"{key}.")
        elif "range" in f.metadata and value is not None and not in_range(value, f.metadata["range"]):
            raise UserError(f"{key}={value}: must be {describe(f.metadata['range'])}")


def check_device(key: str, name: str) -> None:
    """`auto`, `cpu`, `cuda` or `cuda:N`, and present on this machine."""
    if name == "auto":
        return
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"{key}={name}: not a device; expected auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{key}={name}: CUDA is not available on this machine; use {key}=cpu or auto")
    if device.type not in ("cpu", "cuda"):
        raise UserError(f"{key}={name}: unsupported device type; expected auto, cpu, cuda or cuda:N")


def check_file(key: str, path: str | None, what: str = "file") -> None:
    """An input file named by a setting exists (and is a file)."""
    if path and Path(path).is_dir():
        hint = f" (such as {Path(path) / 'checkpoints' / 'best.pt'})" if what == "checkpoint" else ""
        raise UserError(f"{key}={path}: is a directory; expected a {what}{hint}")
    if path and not Path(path).is_file():
        raise UserError(f"{key}={path}: {what} not found")


def check_output(key: str, path: str | None, folder: bool = False) -> None:
    """An output a setting names can be written where it says: a file's path is not a folder, a
    folder's not a file, and no part of the path above it is a file."""
    if not path:
        return
    target = Path(path)
    if target.exists() and target.is_dir() != folder:
        raise UserError(f"{key}={path}: is a {'file' if folder else 'directory'}; expected a {'folder' if folder else 'file'} to write")
    for parent in target.parents:
        if parent.exists() and not parent.is_dir():
            raise UserError(f"{key}={path}: {parent} is a file, not a folder")


def check_model(cfg: ModelConfig, key: str = "model") -> None:
    """Sizes that must agree, given the choices (dot scores, tied embeddings)."""
    query, keys = cfg.decoder.hidden_size, 2 * cfg.encoder.hidden_size
    if cfg.attention.score in (Score.dot, Score.scaled_dot) and query != keys:
        raise UserError(
            f"{key}.attention.score={cfg.attention.score.value} needs the query size ({query}) to equal the key size "
            f"({keys}); use score=general or additive, or make {key}.decoder.hidden_size equal to "
            f"2 * {key}.encoder.hidden_size"
        )
    if cfg.tie_target_embeddings and cfg.decoder.output_size != cfg.embedding_size:
        raise UserError(
            f"{key}.tie_target_embeddings=true needs {key}.decoder.output_size ({cfg.decoder.output_size}) "
            f"== {key}.embedding_size ({cfg.embedding_size})"
        )


def check_train(cfg: Config) -> None:
    """The training config: data source, lengths, devices and the files it starts from."""
    data, att = cfg.data, cfg.model.attention
    check_model(cfg.model)
    if cfg.model.tie_source_embeddings and not data.joint_vocab:
        raise UserError("model.tie_source_embeddings=true (the default) needs data.joint_vocab=true: with two subword "
                        "models a piece has different ids on the two sides; add model.tie_source_embeddings=false")
    if data.source == CorpusSource.files and not data.dir:
        raise UserError("data.dir is required for data.source=files")
    if data.source == CorpusSource.hub and not data.hub_name:
        raise UserError("data.hub_name is required for data.source=hub")
    if data.toy.min_len > data.toy.max_len:
        raise UserError(f"data.toy.min_len={data.toy.min_len}: must be <= data.toy.max_len={data.toy.max_len}")
    if att.score == Score.location and data.max_len > att.max_source_len:
        raise UserError(
            f"model.attention.score=location supports sources up to model.attention.max_source_len="
            f"{att.max_source_len} tokens, but data.max_len={data.max_len} lets longer ones in"
        )
    if data.sampling_alpha and data.sampling_nbest in (0, 1):
        raise UserError(f"data.sampling_nbest={data.sampling_nbest}: sampling draws from the n best segmentations; "
                        "expected -1 (all of them) or >= 2")
    if att.mode == Mode.local and att.window < 1:
        raise UserError(f"model.attention.window={att.window}: must be >= 1")
    check_guided_alignment(cfg)
    if cfg.train.schedule != Schedule.plateau and not (cfg.train.max_steps or cfg.train.max_epochs or cfg.train.max_minutes):
        raise UserError(f"train.schedule={cfg.train.schedule.value} decays over the budget: "
                        "set train.max_steps, train.max_epochs or train.max_minutes (or train.schedule=plateau)")
    check_device("train.device", cfg.train.device)
    check_file("train.init_from", cfg.train.init_from, "checkpoint")
    if cfg.train.resume not in ("", "auto") and not Path(cfg.train.resume).exists():
        raise UserError(f"train.resume={cfg.train.resume}: no checkpoint at {cfg.train.resume}")
    check_ensemble(cfg)


def check_ensemble(cfg: Config) -> None:
    """train.ensemble_size > 1 starts its own processes: not under torchrun, and it resumes from a run directory."""
    size, resume = cfg.train.ensemble_size, cfg.train.resume
    if size == 1:
        return
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UserError(f"train.ensemble_size={size} starts one process per model: run it without torchrun")
    if resume not in ("", "auto") and not Path(resume).is_dir():
        raise UserError(f"train.resume={resume}: an ensemble (train.ensemble_size={size}) resumes from its run directory, "
                        "not from a checkpoint file")


def check_guided_alignment(cfg: Config) -> None:
    guide = cfg.train.guided_alignment
    if not guide.weight:
        return
    if cfg.model.attention.mode == Mode.hard:
        raise UserError(
            "train.guided_alignment with model.attention.mode=hard: hard attention's weights are one-hot samples, whose "
            "cross-entropy with an alignment is undefined; guide soft or local attention"
        )
    if guide.decay == GuideDecay.linear and guide.decay_steps < 1:
        raise UserError(f"train.guided_alignment.decay=linear needs train.guided_alignment.decay_steps >= 1 (got {guide.decay_steps})")
    if guide.alignments != "aligner":
        check_file("train.guided_alignment.alignments", guide.alignments, "alignment file")


def check_eval(cfg: EvalConfig) -> None:
    check_device("device", cfg.device)
    check_file("ckpt", cfg.ckpt, "checkpoint")
    check_output("output", cfg.output)
    for k, path in enumerate(cfg.ensemble):
        check_file(f"ensemble[{k}]", path, "checkpoint")


def check_align(cfg: AlignConfig) -> None:
    check_device("device", cfg.device)
    check_file("ckpt", cfg.ckpt, "checkpoint")
    if cfg.ensemble:
        raise UserError("ensemble= is for evaluate and translate; to align an ensemble, give its checkpoint as ckpt= "
                        "and choose align.member=K (one model's attention) or align.member=mean")
    opts = cfg.align
    if opts.member != "mean" and not opts.member.isdigit():
        raise UserError(f"align.member={opts.member}: expected a model's number (0, 1, ...) or mean")
    if (opts.src is None) != (opts.tgt is None):
        raise UserError("align.src and align.tgt go together: give both files, or neither and align.split")
    for key in ("src", "tgt", "gold"):
        check_file(f"align.{key}", getattr(opts, key))
    check_output("align.out", opts.out, folder=True)
    check_file("align.reverse_ckpt", opts.reverse_ckpt, "checkpoint")
    if (opts.adapt.steps or opts.adapt.minutes) and not opts.forced:
        raise UserError("align.adapt needs align.forced=true: a model adapts to the pairs' own targets")
    if (opts.adapt.steps or opts.adapt.minutes) and opts.member == "mean":
        raise UserError("align.adapt with align.member=mean: an ensemble's mean has no weights of its own to adapt; "
                        "adapt one of its models (align.member=K)")


def check_translate(cfg: TranslateConfig) -> None:
    check_device("device", cfg.device)
    check_file("ckpt", cfg.ckpt, "checkpoint")
    for k, path in enumerate(cfg.ensemble):
        check_file(f"ensemble[{k}]", path, "checkpoint")
    check_file("input", cfg.input)
    check_output("output", cfg.output)
    if cfg.decode.n_best > cfg.decode.beam_size:
        raise UserError(f"decode.n_best={cfg.decode.n_best} cannot exceed decode.beam_size={cfg.decode.beam_size}")


RULES: dict[type, Callable[[Any], None]] = {
    Config: check_train, EvalConfig: check_eval, AlignConfig: check_align, TranslateConfig: check_translate,
}


def check_settings(cfg: Any) -> None:
    """All checks of a command's schema object: ranges, then the rules that tie settings together."""
    check_ranges(cfg)
    RULES[type(cfg)](cfg)
