"""Fuzzing the command lines with drawn but plausible bad input (hypothesis).

Four kinds of input are drawn: config overrides across every group (out-of-range, wrong-type and
boundary values of every numeric setting, unknown enum values and group options), small corpora
whose lines may be empty, blank, over-long, CRLF-terminated, hold a lone CR or a NUL, or be invalid
UTF-8, resumes of a trained run under changed settings (model, data, seed, number of models, budget;
resumed in place, from a path, or into another folder), and truncated, byte-flipped or
structurally altered checkpoints. Each runs the real command
(`nmt.train`, `nmt.evaluate`, `nmt.translate`, `nmt.align`) under a timeout. Every outcome must be
success, or exit code 2 with a single line on stderr, `error: ...`, that names the key, file or line;
never a traceback, never a hang, never a half-written file, never a run written over by a training
that did not continue it.

Examples per test: $NMT_FUZZ_EXAMPLES (default 4, derandomized, for `make test`); `make fuzz` runs
150 per test (600 in all) with fresh random draws.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import pytest
import torch
from cli_runner import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import MULTI30K, ROOT, TINY_MODEL

from nmt.config.schema import Config, Range

EXAMPLES = int(os.environ.get("NMT_FUZZ_EXAMPLES", "4"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 10, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TIMEOUT = 90


@pytest.fixture(scope="module")
def runner() -> Iterator[CliRunner]:
    runner = CliRunner(ROOT, {"MULTI30K_DIR": str(MULTI30K)})
    yield runner
    runner.close()


def toy_run(folder: Path, extra: list[str]) -> list[str]:
    """A tiny toy-copy training below `folder`: about two seconds when nothing is wrong."""
    return ["data=toy_copy", f"data.dir={folder / 'toy'}", f"data.cache_dir={folder / 'prepared'}", "data.toy.n_train=200",
            "data.toy.n_valid=20", "data.toy.n_test=20", "train.max_steps=2", "train.valid_every=2", "train.progress=false",
            "train.threads=1", "log.attention_examples=1", *TINY_MODEL, f"hydra.run.dir={folder / 'run'}", *extra]


def assert_clean(result: Result, folder: Path, names: list[str]) -> None:
    """Success, or exit 2 with one `error:` line naming one of `names`; no temporary file left, and
    every checkpoint present loads."""
    assert not result.timed_out, f"hung: {result.stderr[-2000:]}"
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr[-3000:]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
        assert any(name in lines[0] for name in names), (lines[0], names)
        assert "\x1b" not in lines[0] and "weights_only" not in lines[0] and len(lines[0]) < 600, lines[0]  # short and plain
    assert not [p for p in folder.rglob(".*.tmp")], "a temporary file was left behind"
    for ckpt in folder.rglob("checkpoints/*.pt"):
        torch.load(ckpt, weights_only=True)


# --- config overrides ---------------------------------------------------------------------------

# Budgets are drawn out of range only (an in-range 0 means "no limit"); compiling takes minutes.
BUDGETS = {"train.max_steps", "train.max_epochs", "train.max_minutes", "train.valid_every"}
SKIP = {"train.compile", "train.resume", "train.init_from", "data.cache_dir", "data.dir", "data.url", "data.hub_name", "data.name",
        "data.source", "data.src_lang", "data.tgt_lang", "data.train", "data.valid", "data.test", "train.device"}


def settings_of(obj: object, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field, object]]:
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from settings_of(value, f"{prefix}{f.name}.")
        elif f"{prefix}{f.name}" not in SKIP:
            yield f"{prefix}{f.name}", f, value


SETTINGS = list(settings_of(Config()))


def values_for(key: str, f: dataclasses.Field, default: object) -> st.SearchStrategy[str]:
    """Drawn values for one setting: mostly invalid, some on the boundary of the valid range."""
    junk = st.sampled_from(["abc", "[1,2]", "''", "null", "1e999", "-", "{}"])
    if isinstance(default, Enum):
        return st.one_of(st.sampled_from([m.value for m in type(default)]), st.sampled_from(["nope", "SOFT", "1"]))
    if isinstance(default, bool):
        return st.sampled_from(["true", "false", "maybe", "2"])
    r: Range | None = f.metadata.get("range")
    if r is None:
        return junk
    is_int = isinstance(default, int) and "float" not in str(f.type)
    step = 1 if is_int else 1e-3
    bad, edge = [], []
    for bound, below_is_bad in ((r.ge, True), (r.gt, True), (r.le, False), (r.lt, False)):
        if bound is None:
            continue
        outside = bound - step if below_is_bad else bound + step
        inside = bound if (bound is r.ge or bound is r.le) else (bound + step if below_is_bad else bound - step)
        bad += [outside, (bound - 1000 if below_is_bad else bound + 1000)]
        edge.append(inside)
    fmt = (lambda v: str(int(v))) if is_int else (lambda v: repr(float(v)))
    choices = [fmt(v) for v in bad] + ([] if key in BUDGETS else [fmt(v) for v in edge])
    return st.one_of(st.sampled_from(choices), junk) if choices else junk


@st.composite
def overrides(draw: st.DrawFn) -> list[tuple[str, str]]:
    picked = draw(st.lists(st.sampled_from(SETTINGS), min_size=1, max_size=3, unique_by=lambda s: s[0]))
    return [(key, draw(values_for(key, f, default))) for key, f, default in picked]


@FUZZ
@given(drawn=overrides(), group=st.sampled_from([None, "data=nope", "model/attention=nope", "+experiment=nope"]))
def test_drawn_config_overrides(runner: CliRunner, drawn: list[tuple[str, str]], group: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        args = toy_run(folder, [*(f"{k}={v}" for k, v in drawn), *([group] if group else [])])
        result = runner.run("nmt.train", args, timeout=TIMEOUT)
        names = [k for k, _ in drawn] + [k.rsplit(".", 1)[-1] for k, _ in drawn] + ([group.split("=")[0].lstrip("+")] if group else [])
        assert_clean(result, folder, names + ["data.max_len", str(folder)])


# --- corpora ------------------------------------------------------------------------------------

WORDS = ["a", "b", "c", "dd", "e", "ü"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(lambda w: " ".join(w).encode())
line = st.one_of(
    words, words, words,
    st.sampled_from([b"", b" ", b"\t \t"]),  # empty and blank
    st.lists(st.sampled_from(WORDS), min_size=40, max_size=80).map(lambda w: " ".join(w).encode()),  # over-long
    words.map(lambda w: w + b"\r"),  # CRLF line end
    st.tuples(words, words).map(lambda p: p[0] + b"\r" + p[1]),  # a lone CR inside
    st.tuples(words, words).map(lambda p: p[0] + b"\x00" + p[1]),  # a NUL
    st.tuples(words, st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c"])).map(lambda p: p[0] + p[1]),
)


@st.composite
def side_files(draw: st.DrawFn, max_lines: int) -> tuple[bytes, bytes]:
    n = draw(st.integers(1, max_lines))
    src, tgt = draw(st.lists(line, min_size=n, max_size=n)), draw(st.lists(line, min_size=n, max_size=n))
    if draw(st.integers(0, 9)) == 0:  # now and then, files of different lengths
        tgt = tgt[: draw(st.integers(0, n - 1))]
    newline_at_end = draw(st.booleans())
    return tuple(b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"") for lines in (src, tgt))  # type: ignore[return-value]


@FUZZ
@given(train=side_files(20), valid=side_files(5), test=side_files(5))
def test_drawn_corpora(runner: CliRunner, train: tuple[bytes, bytes], valid: tuple[bytes, bytes], test: tuple[bytes, bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = folder / "corpus"
        corpus.mkdir()
        for split, (src, tgt) in (("train", train), ("valid", valid), ("test", test)):
            (corpus / f"{split}.xx").write_bytes(src)
            (corpus / f"{split}.yy").write_bytes(tgt)
        args = ["data=custom", f"data.dir={corpus}", "data.src_lang=xx", "data.tgt_lang=yy", "data.vocab_size=30",
                f"data.cache_dir={folder / 'prepared'}", "data.max_len=30", "train.max_steps=2", "train.valid_every=2",
                "train.progress=false", "train.threads=1", "log.attention_examples=1", *TINY_MODEL, f"hydra.run.dir={folder / 'run'}"]
        assert_clean(runner.run("nmt.train", args, timeout=TIMEOUT), folder, [str(corpus), "data.max_len", "data.vocab_size"])


# --- resuming under a changed config ------------------------------------------------------------------

CHANGES = st.sampled_from([
    ("model.decoder.hidden_size", "48"), ("model.encoder.cell", "lstm"), ("model.attention.score", "general"),
    ("model.attention.mode", "local"), ("model.embedding_size", "16"), ("data.toy.n_symbols", "9"), ("data.vocab_size", "30"),
    ("data.max_len", "12"), ("seed", "3"), ("train.ensemble_size", "2"), ("train.ensemble_size", "3"),
    ("train.max_steps", "4"), ("train.lr", "0.01"), ("train.valid_every", "1"), ("data.batch_tokens", "300"),
])
RESUMES = st.sampled_from(["auto", "", "{run}", "{run}/checkpoints/last.pt", "{run}/checkpoints/best.pt"])


def run_files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name not in (".lock", "train.log")}


@pytest.fixture(scope="module")
def base_run(runner: CliRunner, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz_resume")
    result = runner.run("nmt.train", toy_run(folder, ["train.test_at_end=false"]), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return folder


@FUZZ
@given(changes=st.lists(CHANGES, min_size=0, max_size=3, unique_by=lambda c: c[0]), resume=RESUMES,
       elsewhere=st.booleans())
def test_drawn_resumes_under_a_changed_config(runner: CliRunner, base_run: Path, changes: list[tuple[str, str]], resume: str,
                                              elsewhere: bool) -> None:
    """A resume continues the run exactly or refuses in one line; a refused one, or a new run
    started elsewhere, leaves the run's files as they were."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copytree(base_run, folder, dirs_exist_ok=True)
        run = folder / "run"
        before = run_files(run)
        target = folder / "other" if elsewhere else run
        args = toy_run(folder, ["train.test_at_end=false", *(f"{k}={v}" for k, v in changes), f"train.resume={resume.format(run=run)}"])
        args = [a for a in args if not a.startswith("hydra.run.dir=")] + [f"hydra.run.dir={target}"]
        result = runner.run("nmt.train", args, timeout=TIMEOUT)
        assert_clean(result, folder, [str(run), "train.ensemble_size", "train.resume", *(k for k, _ in changes)])
        continued = result.returncode == 0 and resume != "" and target == run
        if not continued:
            assert run_files(run) == before
        elif (run / "checkpoints" / "last.pt").is_file():
            assert torch.load(run / "checkpoints" / "last.pt", weights_only=True)["step"] >= 2


# --- checkpoints ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_checkpoint(runner: CliRunner, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz_base")
    result = runner.run("nmt.train", toy_run(folder, ["train.test_at_end=false"]), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return folder / "run" / "checkpoints" / "best.pt"


JUNK = st.sampled_from([None, 0, -1.5, "x", [], {}, [1, "a"], {"a": 1}])
CONFIG_EDITS = st.sampled_from([("model", "decoder", "hidden_size", 7), ("model", "attention", "score", "cosine"),
                                ("model", "encoder", "cell", 3), ("data", "max_len", None, -4), ("model", "embedding_size", None, "big"),
                                ("model", "attention", "window", 0), ("seed", None, None, "s")])


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> tuple[str, object]:
    kind = draw(st.sampled_from(["truncate", "flip", "key", "config", "spm"]))
    if kind == "truncate":
        return kind, draw(st.integers(0, len(original) - 1))
    if kind == "flip":
        return kind, draw(st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(1, 255)), min_size=1, max_size=20))
    if kind == "key":
        key = draw(st.sampled_from(["model", "config", "src_spm", "tgt_spm", "step", "metrics"]))
        return kind, (key, draw(st.one_of(JUNK, st.just("DELETE"))))
    if kind == "config":
        return kind, draw(CONFIG_EDITS)
    return kind, draw(st.binary(min_size=0, max_size=64))


def write_damaged(original: bytes, path: Path, kind: str, how: object) -> None:
    if kind == "truncate":
        path.write_bytes(original[: int(how)])  # type: ignore[call-overload]
        return
    if kind == "flip":
        data = bytearray(original)
        for position, mask in how:  # type: ignore[attr-defined]
            data[position] ^= mask
        path.write_bytes(bytes(data))
        return
    path.write_bytes(original)
    payload = torch.load(path, weights_only=True)
    if kind == "key":
        key, value = how  # type: ignore[misc]
        payload.pop(key) if value == "DELETE" else payload.__setitem__(key, value)
    elif kind == "config":
        *keys, value = how  # type: ignore[misc]
        node = payload["config"]
        keys = [k for k in keys if k is not None]
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    else:
        payload["src_spm"] = torch.tensor(list(how), dtype=torch.uint8)  # type: ignore[call-overload]
    torch.save(payload, path)


@FUZZ
@given(data=st.data(), command=st.sampled_from(["nmt.evaluate", "nmt.translate", "nmt.align"]))
def test_drawn_checkpoint_damage(runner: CliRunner, base_checkpoint: Path, data: st.DataObject, command: str) -> None:
    original = base_checkpoint.read_bytes()
    kind, how = data.draw(damaged(original))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ckpt = folder / "checkpoints" / "best.pt"
        ckpt.parent.mkdir()
        write_damaged(original, ckpt, kind, how)
        (folder / "in.txt").write_text("w1 w2 w3\nw4\n")
        args = {"nmt.evaluate": ["split=test", "decode.beam_size=2"],
                "nmt.translate": [f"input={folder / 'in.txt'}", f"output={folder / 'out.txt'}"],
                "nmt.align": [f"align.out={folder / 'align'}", "align.heatmaps=1"]}[command]
        result = runner.run(command, [f"ckpt={ckpt}", *args], timeout=TIMEOUT)
        ckpt.unlink()  # (not a checkpoint to load back: it was damaged on purpose)
        assert_clean(result, folder, [str(ckpt)])
        if result.returncode == 0 and command == "nmt.translate":
            assert len((folder / "out.txt").read_text().split("\n")) == 3
