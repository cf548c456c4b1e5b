"""`python -m nmt.evaluate ckpt=PATH split=test`: BLEU and chrF of a checkpoint on a split.

Prints both scores with their sacrebleu signatures, writes the detokenized hypotheses and a JSON
report next to the checkpoint (`{ckpt stem}.{split}.hyp`, `{ckpt stem}.{split}.json`).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from nmt.config.commands import EvalConfig
from nmt.decoding.scoring import evaluate_checkpoint
from nmt.system import cli


@hydra.main(config_path="../configs", config_name="evaluate", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = cli.typed_config(cfg, EvalConfig)
    cli.quiet_libraries(progress=False)
    report = evaluate_checkpoint(config)
    r = report
    print(f"{r['split']}: BLEU = {r['bleu']:.2f}  chrF = {r['chrf']:.2f}  ({r['sentences']} sentences, {r['decoding']})")
    print(f"BLEU signature: {report['bleu_signature']}")
    print(f"chrF signature: {report['chrf_signature']}")
    print(f"hypotheses: {report['hypotheses']}")


if __name__ == "__main__":
    cli.run(main)
