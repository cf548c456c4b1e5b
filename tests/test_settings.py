"""Every setting has one definition and one default: each command's config composes and checks;
a setting is declared in one schema class (shared pieces are reused, not repeated); no YAML file
restates a default; and attention modes are chosen one way (presets, or plain keys)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from support import CONFIGS

from nmt.config.checks import check_settings
from nmt.config.commands import AlignConfig, EvalConfig, TranslateConfig, register_configs
from nmt.config.schema import Config, DecodeConfig

COMMANDS = {"config": Config, "prepare": Config, "evaluate": EvalConfig, "align": AlignConfig, "translate": TranslateConfig}

# Field names that two schema classes declare for two different settings (not one setting twice).
HOMONYMS = {
    "batch_tokens": "training batches (data) / decoding batches (decode) / adaptation batches (align.adapt)",
    "cell": "encoder / decoder RNN", "dropout": "encoder / decoder", "hidden_size": "encoder / decoder / additive score",
    "device": "training device (train) / the device a command runs on", "max_len": "toy sentence words / subword filter",
    "output": "hypotheses file (evaluate) / translations file (translate)", "seed": "run / toy corpus / adaptation",
    "lr": "training's peak rate / adaptation's rate (align.adapt)",
    "precision": "training's matrix products (train) / a search's (decode)",
    "train": "the training section / the training split's file prefix",
}


def schema_classes(cls: type, seen: dict[str, type] | None = None) -> dict[str, type]:
    """Every dataclass reachable from a schema, by name."""
    seen = {} if seen is None else seen
    seen.update({base.__name__: base for base in cls.__mro__ if dataclasses.is_dataclass(base)})
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            if dataclasses.is_dataclass(value) and type(value).__name__ not in seen:
                schema_classes(type(value), seen)
    return seen


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_config_composes_and_checks(name: str) -> None:
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = OmegaConf.to_object(compose(config_name=name))
    assert isinstance(cfg, COMMANDS[name])
    check_settings(cfg)


def test_no_setting_is_declared_twice() -> None:
    classes: dict[str, type] = {}
    for schema in set(COMMANDS.values()):
        classes.update(schema_classes(schema))
    declared: dict[str, set[str]] = defaultdict(set)
    for cls in classes.values():
        for name in cls.__dict__.get("__annotations__", {}):  # declared here, not inherited
            declared[name].add(cls.__name__)
    # A shared schema nested under one name (`decode`) is one definition, reused.
    nested = {"decode"}
    twice = {name: sorted(owners) for name, owners in declared.items() if len(owners) > 1 and name not in nested}
    assert set(twice) == set(HOMONYMS), twice
    assert {f.name for f in dataclasses.fields(TranslateConfig().decode)} >= {f.name for f in dataclasses.fields(DecodeConfig)}


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        return {k: v for key, value in node.items() for k, v in leaves(value, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): node}


def schema_default(root: object, key: str) -> Any:
    node = root
    for part in key.split("."):
        assert dataclasses.is_dataclass(node) and part in {f.name for f in dataclasses.fields(node)}, f"no setting {key}"
        node = getattr(node, part)
    return node.value if isinstance(node, Enum) else node


def yaml_files() -> list[Path]:
    return sorted(CONFIGS.rglob("*.yaml"))


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_no_yaml_file_restates_a_default(path: Path) -> None:
    text = path.read_text()
    content = {k: v for k, v in (yaml.safe_load(text) or {}).items() if k not in ("defaults", "hydra")}
    group = path.parent.relative_to(CONFIGS)
    if "# @package _global_" in text or str(group) == ".":
        root, prefix = COMMANDS.get(path.stem, Config)(), ""
    else:
        root, prefix = Config(), ".".join(group.parts) + "."
    for key, value in leaves(content).items():
        default = schema_default(root, prefix + key)
        assert value != default, f"{path.relative_to(CONFIGS)} sets {prefix + key}: {value!r}, the schema's default"


def test_attention_modes_are_chosen_one_way() -> None:
    assert not (CONFIGS / "mode").exists()  # no second preset mechanism (+mode=...)
    presets = {p.stem for p in (CONFIGS / "model" / "attention").glob("*.yaml")}
    assert {"soft", "hard_gumbel", "hard_reinforce", "local_m", "local_p"} <= presets


def test_the_default_run_is_the_schema_defaults() -> None:
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        composed = OmegaConf.to_object(compose(config_name="config"))
    assert composed == Config()
