"""Read alignment matrices out of a model: forced (teacher forcing on the given target) or free
(the model's own greedy translation), one `SentenceAlignment` per sentence pair."""

from __future__ import annotations

from dataclasses import replace

import datasets
import torch

from nmt.alignment.words import EOS_PIECE, SentenceAlignment
from nmt.config.schema import DecodeConfig, Precision
from nmt.data.batching import BatchSampler, RaggedIds
from nmt.data.tokenizer import PAD, Tokenizer
from nmt.decoding.splits import translate_dataset
from nmt.model.ensemble import DecodingModel
from nmt.system.runtime import autocast_dtype


def attention_statistics(alphas: torch.Tensor, rows: torch.Tensor) -> tuple[float, float, int]:
    """alphas (B, T, S), rows (B, T) True at real target steps -> (summed row entropy in nats,
    summed row maximum, number of rows), for the mean entropy / mean max diagnostics."""
    a = alphas[rows].float()
    entropy = -(a * torch.log(a.clamp_min(1e-12))).sum(-1)
    return float(entropy.sum()), float(a.max(-1).values.sum()), int(a.size(0))


@torch.no_grad()
def forced_alignments(
    model: DecodingModel, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer,
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
    model: DecodingModel, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer, opts: DecodeConfig, device: torch.device,
) -> tuple[list[SentenceAlignment], list[str]]:
    """Alignments of the model's own translations (as `opts` decodes) -> (alignments, detokenized translations).
    Here the attention is the product, so `precision=auto` is fp32 on a CPU (bf16 on CUDA), not
    decoding's faster bf16 on some CPUs; bf16 stays a request."""
    cast = autocast_dtype(opts.precision.value, device, use="align")
    texts, hyps = translate_dataset(model, ds, tgt_tok, replace(opts, precision=Precision.bf16 if cast else Precision.fp32), device)
    src_ids = RaggedIds.of_column(ds, "src_ids")
    alignments = [
        SentenceAlignment(src_tok.pieces(src_ids[k][:-1].tolist()) + [EOS_PIECE], tgt_tok.pieces(h.ids) + [EOS_PIECE],
                          h.alignment.numpy())
        for k, h in enumerate(hyps)
    ]
    return alignments, texts
