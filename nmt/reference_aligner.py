"""`python -m nmt.reference_aligner [data=...]`: the statistical reference alignment of a corpus (eflomal,
both directions, grow-diag-final-and and intersection), cached beside its prepared data.

`nmt.align` scores a model's attention against these links when the corpus has no gold
alignments, and `train.guided_alignment` can train attention toward them. Needs the `align`
extra: `pip install -e '.[align]'`.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from nmt.alignment.eflomal import DIRECTIONS, SYMMETRIC, align_corpus
from nmt.alignment.pharaoh import read_pharaoh
from nmt.config.schema import Config
from nmt.data.corpus import SPLITS
from nmt.system import cli


@hydra.main(config_path="../configs", config_name="prepare", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = cli.typed_config(cfg, Config)
    cli.quiet_libraries(progress=False)
    folder = align_corpus(config.data)
    for split in SPLITS:
        counts = {m: sum(len(s) for s, _ in read_pharaoh(folder / f"{split}.{m}")) for m in (*DIRECTIONS, *SYMMETRIC)}
        print(f"{split}: " + ", ".join(f"{n} {m} links" for m, n in counts.items()))
    print(f"aligned with eflomal: {folder}/{{train,valid,test}}.{{fwd,rev,gdfa,intersection}}")


if __name__ == "__main__":
    cli.run(main)
