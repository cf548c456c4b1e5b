"""Config schemas: every config file composes; typos and bad values fail loudly, naming the key."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException, HydraException
from support import CONFIGS, cli, compose_config

from nmt.config.schema import Score
from nmt.model.build import build_model
from nmt.system.errors import UserError


@pytest.mark.parametrize("data", sorted(p.stem for p in (CONFIGS / "data").glob("*.yaml")))
def test_every_data_config_composes(data: str) -> None:
    cfg = compose_config([f"data={data}"] + (["data.dir=/tmp/x"] if data == "custom" else []))
    assert cfg.data.name == data


def test_default_config_is_multi30k_de_en_with_bahdanau_attention() -> None:
    cfg = compose_config([])
    assert (cfg.data.name, cfg.data.src_lang, cfg.data.tgt_lang) == ("multi30k_de_en", "de", "en")
    assert cfg.model.attention.score == Score.additive
    assert cfg.model.attention.mode.value == "soft"


def test_misspelt_key_is_rejected_naming_it() -> None:
    with pytest.raises((ConfigCompositionException, HydraException)) as err:
        compose_config(["model.attention.scor=dot"])
    assert "scor" in str(err.value) + str(err.value.__cause__)


def test_bad_enum_value_lists_the_choices() -> None:
    with pytest.raises((ConfigCompositionException, HydraException)) as err:
        compose_config(["model.attention.score=cosine"])
    text = str(err.value) + str(err.value.__cause__)
    assert "cosine" in text and "additive" in text and "scaled_dot" in text


def test_bad_value_type_is_rejected() -> None:
    with pytest.raises((ConfigCompositionException, HydraException)) as err:
        compose_config(["train.max_steps=many"])
    assert "max_steps" in str(err.value) + str(err.value.__cause__)


def test_cli_rejects_unknown_key_with_exit_code() -> None:
    proc = cli("nmt.train", ["train.max_stepz=3"])
    assert proc.returncode == 2
    assert "max_stepz" in proc.stderr


def test_dot_score_with_mismatched_sizes_says_why() -> None:
    cfg = compose_config(["model.attention.score=dot", "model.decoder.hidden_size=300"])
    with pytest.raises(UserError, match=r"dot needs the query size \(300\) to equal the key size \(512\)"):
        build_model(cfg.model, 50, 50)
