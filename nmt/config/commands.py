"""Structured config schemas of the commands that work on a trained checkpoint (`nmt.evaluate`,
`nmt.align`, `nmt.translate`), and the registration of every schema in Hydra's ConfigStore.

They share their settings by composition, never by repeating them: the checkpoint and device
(`CheckpointCommand`), the split (`SplitCommand`) and the decoding settings (`nmt.config.schema.DecodeConfig`,
the same schema training's validation uses).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from hydra.core.config_store import ConfigStore

from nmt.config.schema import Config, DecodeConfig, greedy, num

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@dataclass
class CheckpointCommand:
    ckpt: str | None = None  # default: best.pt of the newest run under `runs_dir`
    runs_dir: str = "outputs"
    device: str = "auto"  # auto: CUDA when present, else CPU
    # More checkpoints that decode together with `ckpt` as an ensemble (evaluate, translate): the
    # mean of their probabilities at every step, the mean of their attention as the alignment.
    ensemble: list[str] = field(default_factory=list)


@dataclass
class SplitCommand(CheckpointCommand):
    split: str = "test"  # train | valid | test, or a file prefix `{prefix}.{lang}`


@dataclass
class EvalConfig(SplitCommand):
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    output: str | None = None  # hypotheses file; default next to the checkpoint


class Reference(str, Enum):
    """What `nmt.align` scores the attention's links against."""

    auto = "auto"  # gold alignments if the data has some, else the statistical aligner's links if cached
    gold = "gold"
    aligner = "aligner"  # eflomal's grow-diag-final-and links (`make aligner`): agreement, not gold
    none = "none"


class Symmetrize(str, Enum):
    gdfa = "gdfa"  # grow-diag-final-and
    intersection = "intersection"
    union = "union"


class Merge(str, Enum):
    """How a source word's weight is made from its pieces' weights."""

    sum = "sum"
    mean = "mean"
    max = "max"


@dataclass
class AdaptOptions:
    """Continue training the model (and the reverse one) on the pairs being aligned before reading
    their attention (nmt.alignment.adapt); steps=0 and minutes=0: read the models as trained."""

    steps: int = num(0, ge=0)
    minutes: float = num(0.0, ge=0)
    lr: float = num(1e-3, gt=0)
    # Guided alignment toward eflomal's links of the same pairs (never gold; needs the `align`
    # extra, without it the translation loss alone); 0 = the translation loss alone.
    guide_weight: float = num(1.0, ge=0)
    batch_tokens: int = num(0, ge=0)  # 0 = the model's training data.batch_tokens
    seed: int = num(1, ge=0, lt=2**32)


@dataclass
class AlignOptions:
    src: str | None = None  # instead of the split, any two line-aligned files (both must be given)
    tgt: str | None = None
    forced: bool = True  # teacher forcing on the given target; false: the model's own translation (`decode`)
    out: str | None = None  # output folder; default `align-{split}` beside the checkpoint
    threshold: float | None = num(None, gt=0, le=1)  # also link every word pair with weight >= threshold
    merge: Merge = Merge.sum  # a source word's weight: its pieces' sum, mean or max
    # Read target word t from the attention of step t + shift (Shift-Att): 0 = the step that predicts it.
    shift: int = num(0, ge=0, le=2)
    cover_source: bool = False  # also link each source word no target word chose to the target word attending to it most
    gold: str | None = None  # Pharaoh gold alignments; default: `{prefix}.gold` beside the split, if any
    gold_one_based: bool = False
    heatmaps: int = num(20, ge=0)  # heatmaps/NNNN.png and report.html for the first N sentences
    reference: Reference = Reference.auto
    # A checkpoint trained in the reverse direction (target -> source): its attention links too,
    # combined with this one's by `symmetrize`, as statistical aligners combine their two directions.
    reverse_ckpt: str | None = None
    symmetrize: Symmetrize = Symmetrize.gdfa
    # Of an ensemble's checkpoint, whose attention: model K (0-based; the default, 0, is a model's own
    # attention, from which it computed its context), or "mean": the mean of its models' attention.
    member: str = "0"
    adapt: AdaptOptions = field(default_factory=AdaptOptions)


@dataclass
class AlignConfig(SplitCommand):
    decode: DecodeConfig = field(default_factory=greedy)  # batches, and the free translation (align.forced=false)
    align: AlignOptions = field(default_factory=AlignOptions)


@dataclass
class TranslateOptions(DecodeConfig):
    n_best: int = num(1, ge=1)  # > 1: lines `i ||| translation ||| score`, n per input line
    show_alignment: bool = False  # append a tab and the Pharaoh word alignment
    max_input_len: int = num(0, ge=0)  # source tokens (with EOS); longer lines are truncated with a warning; 0 = data.max_len
    lines_per_batch: int = num(64, ge=1)  # lines read, translated and written at a time (streaming)


@dataclass
class TranslateConfig(CheckpointCommand):
    input: str | None = None  # default: standard input
    output: str | None = None  # default: standard output
    decode: TranslateOptions = field(default_factory=TranslateOptions)


def register_configs() -> None:
    """Register the schemas so YAML files in `configs/` are validated against them."""
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    cs.store(name="base_eval", node=EvalConfig)
    cs.store(name="base_align", node=AlignConfig)
    cs.store(name="base_translate", node=TranslateConfig)
