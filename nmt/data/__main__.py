"""`python -m nmt.data [data=...]`: fetch/generate the corpus, train sentencepiece, encode and cache."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from nmt.config.schema import Config
from nmt.data.corpus import SPLITS
from nmt.data.prepare import prepare
from nmt.system import cli


@hydra.main(config_path="../../configs", config_name="prepare", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = cli.typed_config(cfg, Config)
    cli.quiet_libraries(config.train.progress)
    data = prepare(config.data)
    for split in SPLITS:
        print(f"{split}: {len(data.split(split))} pairs")
    stats = data.filter_stats
    print(f"train filter: {stats.total} read, {stats.empty} empty, {stats.too_long} too long, {stats.kept} kept")
    print(f"vocabulary: {len(data.src_tokenizer)} source / {len(data.tgt_tokenizer)} target pieces")
    print(f"prepared in {data.folder}")


if __name__ == "__main__":
    cli.run(main)
