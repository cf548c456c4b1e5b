"""Read alignment matrices out of a model: forced (teacher forcing on the given target) or free
(the model's own greedy translation), one `SentenceAlignment` per sentence pair."""

from __future__ import annotations

from dataclasses import dataclass

import datasets
import numpy as np
import torch

from nmt.alignment.pharaoh import Link, hard_links
from nmt.alignment.words import merge_to_words, words_of
from nmt.data.batching import BatchSampler, RaggedIds
from nmt.data.tokenizer import PAD, Tokenizer
from nmt.evaluation import translate_dataset
from nmt.model.seq2seq import Seq2Seq

EOS_PIECE = "</s>"


@dataclass
class SentenceAlignment:
    """matrix (len(tgt_pieces), len(src_pieces)): rows = target pieces then EOS, columns =
    source pieces then EOS; each row is the attention of the step that predicted that token."""

    src_pieces: list[str]
    tgt_pieces: list[str]
    matrix: np.ndarray

    def words(self) -> tuple[list[str], list[str], np.ndarray]:
        """(source words, target words, word matrix (target words, source words)); EOS dropped."""
        src, tgt = self.src_pieces[:-1], self.tgt_pieces[:-1]
        return words_of(src), words_of(tgt), merge_to_words(self.matrix, src, tgt)


def word_links(alignments: list[SentenceAlignment], threshold: float | None = None) -> list[list[Link]]:
    """Hard word links (Pharaoh) of each sentence's merged word matrix."""
    return [hard_links(a.words()[2], threshold) for a in alignments]


def attention_statistics(alphas: torch.Tensor, rows: torch.Tensor) -> tuple[float, float, int]:
    """alphas (B, T, S), rows (B, T) True at real target steps -> (summed row entropy in nats,
    summed row maximum, number of rows), for the mean entropy / mean max diagnostics."""
    a = alphas[rows].float()
    entropy = -(a * torch.log(a.clamp_min(1e-12))).sum(-1)
    return float(entropy.sum()), float(a.max(-1).values.sum()), int(a.size(0))


@torch.no_grad()
def forced_alignments(
    model: Seq2Seq, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer,
    batch_tokens: int, device: torch.device, rows: list[int] | None = None,
) -> list[SentenceAlignment]:
    """Teacher-forced alignments of the rows `rows` (default: all) of an encoded split, in that order."""
    model.eval()
    sampler = BatchSampler(ds if rows is None else ds.select(rows), batch_tokens, shuffle=False)
    out: list[SentenceAlignment | None] = [None] * len(sampler.src_lens)
    for index in sampler.batches(0):
        batch = sampler.collate(index).to(device)
        alphas = model.attention_matrices(batch.src, batch.src_lens, batch.tgt_in).cpu().numpy()
        n_rows = (batch.tgt_out != PAD).sum(1).tolist()
        for k, row in enumerate(index):
            src_ids = sampler.src[int(row)].tolist()
            tgt_ids = sampler.tgt[int(row)].tolist()
            out[int(row)] = SentenceAlignment(
                src_tok.pieces(src_ids[:-1]) + [EOS_PIECE], tgt_tok.pieces(tgt_ids) + [EOS_PIECE],
                alphas[k, : n_rows[k], : len(src_ids)],
            )
    return [a for a in out if a is not None]


@torch.no_grad()
def free_alignments(
    model: Seq2Seq, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer,
    batch_tokens: int, device: torch.device, ratio: float = 1.5, extra: int = 10,
) -> tuple[list[SentenceAlignment], list[str]]:
    """Alignments of the model's own greedy translations -> (alignments, detokenized translations)."""
    texts, hyps = translate_dataset(model, ds, tgt_tok, batch_tokens, ratio, extra, device)
    src_ids = RaggedIds(ds, "src_ids")
    alignments = [
        SentenceAlignment(src_tok.pieces(src_ids[k][:-1].tolist()) + [EOS_PIECE], tgt_tok.pieces(h.ids) + [EOS_PIECE],
                          h.alignment.numpy())
        for k, h in enumerate(hyps)
    ]
    return alignments, texts
