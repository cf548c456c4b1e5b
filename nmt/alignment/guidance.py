"""Guided alignment (Chen et al. 2016; Garg et al. 2019): target distributions for the attention
of each training pair, made from word alignments (an aligner's links or any Pharaoh file).

For target word j linked to source words L_j, every subword piece of j should attend uniformly
over the pieces of the words in L_j: q_t(s) = 1 / |pieces(L_j)|. The loss is the cross-entropy
-sum_t sum_s q_t(s) log alpha_ts, summed over the target pieces that have links (unlinked words
and the EOS step are left free). Word j and the links' indices are whitespace words, the words
sentencepiece marks with its boundary symbol. The loss itself is `nmt.training.loss.guided_alignment_loss`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import datasets
import numpy as np
import torch

from nmt.alignment.eflomal import align_corpus
from nmt.alignment.pharaoh import Link, read_pharaoh
from nmt.alignment.words import word_groups
from nmt.config.schema import Config, GuidedAlignmentConfig, GuideDecay
from nmt.data.batching import RaggedIds
from nmt.data.prepare import PreparedData
from nmt.data.tokenizer import Tokenizer
from nmt.system.errors import UserError

log = logging.getLogger(__name__)


def piece_targets(src_pieces: list[str], tgt_pieces: list[str], links: set[Link]) -> np.ndarray | None:
    """(k, 3) rows (target piece, source piece, weight) of one pair; None when the links name a
    word the pieces do not have (the two tokenisations disagree on this sentence)."""
    src_words, tgt_words = word_groups(src_pieces), word_groups(tgt_pieces)
    if any(i >= len(src_words) or j >= len(tgt_words) for i, j in links):
        return None
    linked: dict[int, list[int]] = {}
    for i, j in sorted(links):
        linked.setdefault(j, []).extend(src_words[i])
    rows = [(t, s, 1.0 / len(pieces)) for j, pieces in linked.items() for t in tgt_words[j] for s in pieces]
    return np.asarray(rows, dtype=np.float32).reshape(-1, 3)


class Guidance:
    """The attention targets of every row of an encoded (filtered) training split, whose `line`
    column gives the line of the alignment file each row comes from."""

    def __init__(self, tokenizers: tuple[Tokenizer, Tokenizer], links: list[set[Link]], lines: np.ndarray,
                 src: RaggedIds, tgt: RaggedIds, warn: bool = True) -> None:
        """`lines[k]`: the line of `links` that row k (`src[k]`, `tgt[k]`) comes from."""
        self.tokenizers, self.links, self.lines = tokenizers, links, lines
        self.rows = self._targets(src, tgt, warn)

    @classmethod
    def of_split(cls, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer, links: list[set[Link]]) -> Guidance:
        """The targets of an encoded split's rows (its `src_ids`, `tgt_ids` and `line` columns)."""
        return cls((src_tok, tgt_tok), links, ds.data.column("line").to_numpy(),
                   RaggedIds.of_column(ds, "src_ids"), RaggedIds.of_column(ds, "tgt_ids"))

    def for_ids(self, src: RaggedIds, tgt: RaggedIds) -> Guidance:
        """The same links' targets for other segmentations of the same rows (`nmt.data.sampling`):
        the links name words, which every segmentation keeps."""
        return Guidance(self.tokenizers, self.links, self.lines, src, tgt, warn=False)

    def _targets(self, src: RaggedIds, tgt: RaggedIds, warn: bool) -> list[np.ndarray]:
        src_tok, tgt_tok = self.tokenizers
        rows: list[np.ndarray] = []
        skipped = 0
        for k, line in enumerate(self.lines):
            targets = piece_targets(src_tok.pieces(src[k][:-1]), tgt_tok.pieces(tgt[k]), self.links[int(line)])
            skipped += targets is None
            rows.append(targets if targets is not None else np.zeros((0, 3), dtype=np.float32))
        if skipped and warn:
            log.warning("guided alignment: %d of %d training pairs have links beyond their words and are left unguided",
                        skipped, len(self.lines))
        return rows

    def batch(self, index: np.ndarray, src_len: int, tgt_len: int) -> torch.Tensor:
        """The targets q (B, T, S) of the rows `index`, padded like their Batch."""
        guide = torch.zeros(len(index), tgt_len, src_len)
        for b, row in enumerate(index):
            targets = self.rows[int(row)]
            if len(targets):
                guide[b, targets[:, 0].astype(np.int64), targets[:, 1].astype(np.int64)] = torch.from_numpy(targets[:, 2])
        return guide


def build_guidance(cfg: Config, data: PreparedData) -> Guidance:
    """The attention targets of `train.guided_alignment`: from the aligner's links of the training
    split (computed and cached when missing) or from a Pharaoh file line-aligned with its files."""
    opts = cfg.train.guided_alignment
    path = align_corpus(cfg.data) / "train.gdfa" if opts.alignments == "aligner" else Path(opts.alignments)
    links = [sure | possible for sure, possible in read_pharaoh(path)]
    if len(links) != data.filter_stats.total:
        raise UserError(f"{path}: {len(links)} lines of alignments for {data.filter_stats.total} training pairs")
    log.info("guided alignment toward %s (weight %g)", path, opts.weight)
    return Guidance.of_split(data.split("train"), data.src_tokenizer, data.tgt_tokenizer, links)


def guide_weight(opts: GuidedAlignmentConfig, step: int) -> float:
    """The loss weight at a step: constant, or falling linearly to 0 over `decay_steps`."""
    if opts.decay == GuideDecay.linear and opts.weight:  # (decay_steps is checked only when the loss is on)
        return opts.weight * max(0.0, 1.0 - step / opts.decay_steps)
    return opts.weight
