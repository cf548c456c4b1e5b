"""The README is a user's guide that stays true: short, the two commands first, the toy quick start
and a heatmap early, no provenance, and every command's settings compose against the schemas."""

from __future__ import annotations

import itertools
import re
import shlex

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from support import CONFIGS, ROOT

from nmt.config.checks import check_ranges
from nmt.config.commands import register_configs

README = (ROOT / "README.md").read_text()
LINES = README.splitlines()
# The command that takes Hydra overrides -> its config; make targets -> (config, how their variables map to overrides).
CONFIG_OF = {"nmt.train": "config", "nmt.evaluate": "evaluate", "nmt.align": "align", "nmt.translate": "translate",
             "nmt.data": "prepare", "nmt.reference_aligner": "prepare"}
MAKE_VARIABLES = {"CKPT": "ckpt", "SPLIT": "split", "BEAM": "decode.beam_size"}
MAKE_CONFIG = {"train": "config", "eval": "evaluate", "align": "align", "data": "prepare", "aligner": "prepare"}


def commands() -> list[list[str]]:
    """Every command line of the README: the lines of its bash blocks (continuations joined,
    comments dropped) and the inline code that starts with `python -m`, `torchrun` or `make`."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        lines += [line.split("  #")[0].split("| ")[-1].strip() for line in block.replace("\\\n", " ").splitlines()]
    lines += [code for code in re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", README, flags=re.S))
              if code.startswith(("python -m nmt", "torchrun", "make "))]
    return [shlex.split(line) for line in lines if line]


def overrides_of(words: list[str]) -> tuple[str, list[str]] | None:
    """(config name, Hydra overrides) of a command line that takes them, or None."""
    for k, word in enumerate(words):
        if word in CONFIG_OF and k > 0 and words[k - 1] == "-m":
            return CONFIG_OF[word], [w for w in words[k + 1:] if "=" in w]
    if words[:1] == ["make"] and len(words) > 1 and words[1] in MAKE_CONFIG:
        args = [w.split("=", 1) for w in words[2:] if "=" in w]
        overrides = [f"{MAKE_VARIABLES[k]}={v}" for k, v in args if k in MAKE_VARIABLES]
        overrides += [o for k, v in args if k == "ARGS" for o in shlex.split(v)]
        return MAKE_CONFIG[words[1]], overrides
    return None


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    assert len(LINES) <= 220, len(LINES)
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None and README.index(first_block.group(0)) < 120
    first = [line.split("#")[0].strip() for line in first_block.group(1).strip().splitlines()]
    assert first == ["make install && make train", "make test-all"]


def test_a_heatmap_and_the_toy_quick_start_come_early() -> None:
    early = "\n".join(LINES[:80])
    assert re.search(r"!\[[^\]]*\]\(docs/images/heatmap[^)]*\.png\)", early)
    assert "python -m nmt.train +experiment=toy data=toy_reverse" in early and "make tensorboard" in early


def test_the_readme_holds_no_provenance() -> None:
    assert not re.search(r"\b(commit )?[0-9a-f]{7,40}\b", re.sub(r"https?://\S+", "", README).replace("0-based", "")), \
        re.findall(r"\b[0-9a-f]{7,40}\b", README)
    assert "GFLOP" not in README and "passed in" not in README


def test_every_file_the_readme_links_exists() -> None:
    for target in re.findall(r"\]\(((?:docs|scripts|nmt|configs)/[^)#]+)\)", README):
        assert (ROOT / target).exists(), target


@pytest.mark.parametrize("words", [w for w in commands() if overrides_of(w)], ids=lambda w: " ".join(w)[:60])
def test_every_commands_settings_compose_against_the_schema(words: list[str]) -> None:
    found = overrides_of(words)
    assert found is not None
    config, overrides = found
    overrides = [o for o in overrides if not o.startswith("hydra.")]
    choices = [[f"{o.split('=')[0]}={v}" for v in o.split("=", 1)[1].split(",")] if "," in o and "[" not in o else [o]
               for o in overrides]  # a multirun sweep: each of its values
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        for combination in itertools.islice(itertools.product(*choices), 30):
            cfg = compose(config_name=config, overrides=list(combination))
            check_ranges(OmegaConf.to_object(cfg))


def test_the_commands_found_cover_every_kind() -> None:
    kinds = {overrides_of(w)[0] for w in commands() if overrides_of(w)}  # type: ignore[index]
    assert {"config", "evaluate", "align", "translate"} <= kinds
