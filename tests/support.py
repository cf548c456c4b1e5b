"""Helpers shared by the tests (plain functions and constants; the fixtures are in conftest.py)."""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import time
from pathlib import Path

from cli_runner import CliRunner, Result
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from nmt.config.commands import register_configs
from nmt.config.schema import Config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
MULTI30K = Path(os.environ.get("MULTI30K_DIR", ROOT.parent / "shared" / "data" / "multi30k")).resolve()

TINY_MODEL = [
    "model.embedding_size=32",
    "model.encoder.hidden_size=32",
    "model.decoder.hidden_size=64",
    "model.decoder.output_size=32",
    "model.attention.hidden_size=32",
    "model.init_range=0",  # torch's init, as the toy preset keeps (configs/experiment/toy.yaml): the toy tests were set on it
]

TOY_TRAIN = [  # the documented toy set-up (configs/experiment/toy.yaml), as the attention grid uses it
    "+experiment=toy",
    "data.toy.n_train=20000",
    "train.max_minutes=1.7",
]


def compose_config(overrides: list[str], config_name: str = "config") -> Config:
    """Compose `configs/{config_name}.yaml` with overrides into a validated Config object."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=overrides)
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, Config)
    return obj


def toy_overrides(workdir: Path, task: str = "reverse", n_train: int = 2000, tiny: bool = True) -> list[str]:
    """Overrides for a small toy corpus (and a tiny model unless `tiny=False`: then the model comes
    from elsewhere, e.g. +experiment=toy), with everything written below `workdir`."""
    return [
        f"data=toy_{task}",
        f"data.dir={workdir / 'toy'}",
        f"data.cache_dir={workdir / 'prepared'}",
        f"data.toy.n_train={n_train}",
        "data.toy.n_valid=200",
        "data.toy.n_test=200",
        "train.progress=false",
        "train.threads=1",  # small models: one thread is as fast, and runs stay independent of the machine
        "train.precision=fp32",  # auto times the step: on some hosts bf16 would win, on others not (or not every time)
        *(TINY_MODEL if tiny else []),
    ]


def train_toy(workdir: Path, task: str, extra: list[str]) -> Path:
    """Train the toy model of TOY_TRAIN on a toy task below `workdir`; returns the run folder."""
    from nmt.training.session import train

    cfg = compose_config(toy_overrides(workdir, task=task, tiny=False) + TOY_TRAIN + extra)
    start = time.monotonic()
    state = train(cfg, workdir / "run")
    (workdir / "run" / "train_seconds.txt").write_text(f"{time.monotonic() - start:.1f}\n{state.best}\n")
    return workdir / "run"


@functools.cache
def _runner() -> CliRunner:
    runner = CliRunner(ROOT)
    atexit.register(runner.close)
    return runner


def cli(module: str, args: list[str], timeout: float = 300, input: str = "") -> Result:
    """Run `python -m module args` from the repository root, as a user does (through the forking
    runner of `cli_runner.py`: a fresh process per command, without the import time)."""
    result = _runner().run(module, args, timeout=timeout, stdin=input.encode())
    assert not result.timed_out, f"python -m {module} did not finish in {timeout} s: {result.stderr[-2000:]}"
    return result


def assert_user_error(proc: Result | subprocess.CompletedProcess[str], message: str) -> None:
    """Exit code 2 and one line on stderr, `error: ...` containing `message`; no traceback."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]


def write_split(folder: Path, split: str, src: bytes, tgt: bytes, langs: tuple[str, str] = ("xx", "yy")) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.{langs[0]}").write_bytes(src)
    (folder / f"{split}.{langs[1]}").write_bytes(tgt)


GOOD = [("a b c", "c b a"), ("b c", "c b"), ("a", "a")] * 10


def good_corpus(folder: Path) -> None:
    """A tiny reversal corpus `{train,valid,test}.{xx,yy}` of words a, b, c."""
    for split in ("train", "valid", "test"):
        write_split(folder, split, "".join(s + "\n" for s, _ in GOOD).encode(), "".join(t + "\n" for _, t in GOOD).encode())


CUSTOM = ["data=custom", "data.src_lang=xx", "data.tgt_lang=yy", "data.vocab_size=40", "data.subword_model=word",
          "data.max_len=8", "train.max_steps=2", "train.valid_every=2", "train.progress=false", "train.threads=1",
          *TINY_MODEL]


def train_cli(workdir: Path, extra: list[str] | None = None, timeout: float = 300) -> Result:
    """`python -m nmt.train` on the custom corpus in `workdir/corpus`, run folder `workdir/run`."""
    return cli("nmt.train", [*CUSTOM, f"data.dir={workdir / 'corpus'}", f"data.cache_dir={workdir / 'prepared'}",
                             f"hydra.run.dir={workdir / 'run'}", *(extra or [])], timeout=timeout)
