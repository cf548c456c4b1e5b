"""Decoding: greedy search, returning each hypothesis with its attention matrix."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.data.tokenizer import BOS, EOS
from nmt.model.seq2seq import Seq2Seq


@dataclass
class Hypothesis:
    """A decoded sentence: `ids` (without BOS/EOS) and `alignment` (len(ids) + 1, S_real) with
    one row per output token plus the final EOS row, over the real source tokens (EOS included)."""

    ids: list[int]
    alignment: torch.Tensor
    score: float


def max_output_lengths(src_lens: torch.Tensor, ratio: float, extra: int) -> torch.Tensor:
    """Maximum output lengths (B,) = ratio * source length + extra."""
    return (src_lens.float() * ratio).long() + extra


@torch.no_grad()
def greedy_search(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, ratio: float = 1.5, extra: int = 10) -> list[Hypothesis]:
    """Greedy decoding of a batch. src (B, S), src_lens (B,) -> one Hypothesis per sentence."""
    memory, state = model.encode(src, src_lens)
    b = src.size(0)
    limits = max_output_lengths(src_lens, ratio, extra).to(src.device)
    y = torch.full((b,), BOS, dtype=torch.long, device=src.device)
    context = memory.values.new_zeros(b, memory.values.size(2))
    finished = torch.zeros(b, dtype=torch.bool, device=src.device)
    score = torch.zeros(b, device=src.device)
    tokens, alphas = [], []
    for i in range(int(limits.max()) + 1):
        logits, state, context, alpha = model.decoder.step(y, state, context, memory, i)
        logp = torch.log_softmax(logits.float(), dim=-1)
        best, y = logp.max(dim=-1)
        y = torch.where(i >= limits, torch.full_like(y, EOS), y)  # force EOS at the length limit
        score += torch.where(finished, torch.zeros_like(best), best)
        tokens.append(y)
        alphas.append(alpha)
        finished |= y == EOS
        if bool(finished.all()):
            break
    out_tokens = torch.stack(tokens, 1).tolist()
    out_alpha = torch.stack(alphas, 1)  # (B, L, S)
    hyps = []
    for k in range(b):
        ids = out_tokens[k]
        n = ids.index(EOS) if EOS in ids else len(ids)
        hyps.append(Hypothesis(ids[:n], out_alpha[k, : n + 1, : int(src_lens[k])].cpu(), float(score[k])))
    return hyps
