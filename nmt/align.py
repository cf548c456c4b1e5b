"""`python -m nmt.align ckpt=PATH [align.split=test | align.src=F align.tgt=G] [align.gold=PATH]`.

Reads the attention of a trained model as word alignment, forced on the given target (default) or
on the model's own translation (`align.forced=false`), and writes into `align.out`:
matrices.jsonl, matrices_word.jsonl, alignments.pharaoh, heatmaps/NNNN.png, report.html, and with
gold alignments (Pharaoh, `i-j` sure, `ipj` possible), or else the statistical aligner's links
(`make aligner`), precision, recall and AER in scores.json, beside the diagonal baseline's.
`align.reverse_ckpt=PATH` adds a target->source model's links, symmetrised (`align.symmetrize`), each
direction scored beside every symmetrisation. `align.adapt.steps=N` (or `.minutes=M`) first adapts
the model(s) to the pairs being aligned (`nmt.alignment.adapt`): the way to align a corpus from
another domain. `align.merge`, `align.shift`, `align.threshold`, `align.cover_source` choose how
links are read from the attention.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from nmt.alignment.export import export_alignments
from nmt.config.commands import AlignConfig
from nmt.system import cli


@hydra.main(config_path="../configs", config_name="align", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = cli.typed_config(cfg, AlignConfig)
    cli.quiet_libraries(progress=False)
    scores = export_alignments(config)
    if "aer" in scores:
        against = "gold" if scores["reference"] == "gold" else "agreement with eflomal's grow-diag-final-and links, not gold"
        diagonal = scores["diagonal"]
        print(f"{scores['data']}: precision {scores['precision']:.4f}  recall {scores['recall']:.4f}  AER {scores['aer']:.4f}"
              f"  ({against}: {scores['reference_file']}); diagonal baseline AER {diagonal['aer']:.4f}")
        if len(scores["methods"]) > 1 or "eflomal" in scores:
            rows = {**scores["methods"], **({"eflomal (gdfa)": scores["eflomal"]} if "eflomal" in scores else {})}
            print("  " + "   ".join(f"{name} {found['aer']:.4f}" for name, found in rows.items()) + f"   (AER; best: {scores['best']})")
    print(f"wrote {scores['sentences']} alignments ({scores['attention']} attention) to {scores['out']}/")


if __name__ == "__main__":
    cli.run(main)
