"""Decoding: greedy and batched beam search, each hypothesis returned with its attention matrix."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.attention.memory import AttentionMemory
from nmt.data.tokenizer import BOS, EOS
from nmt.model.cells import State
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


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha; scores are log p(Y) / lp(Y)."""
    return ((5.0 + length.float()) / 6.0) ** alpha


def _expand(memory: AttentionMemory, state: State, k: int) -> tuple[AttentionMemory, State]:
    """Repeat each sentence's memory and state k times (B -> B*k), beams of a sentence adjacent."""
    expanded = AttentionMemory(
        memory.keys.repeat_interleave(k, 0), memory.values.repeat_interleave(k, 0), memory.mask.repeat_interleave(k, 0),
        coverage=None if memory.coverage is None else memory.coverage.repeat_interleave(k, 0),
    )
    return expanded, tuple(s.repeat_interleave(k, 0) for s in state)


@torch.no_grad()
def beam_search(
    model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor, beam_size: int = 5, alpha: float = 0.0,
    ratio: float = 1.5, extra: int = 10, n_best: int = 1,
) -> list[list[Hypothesis]]:
    """Batched beam search with the GNMT length penalty. src (B, S), src_lens (B,) -> for each
    sentence its `n_best` hypotheses, best first, each with its attention matrix and normalised score.

    A sentence is done when it has `n_best` finished hypotheses and no live beam can still beat
    the best finished one: a live beam's log-probability can only fall, so its best reachable
    normalised score is log p / lp(max length) (lp grows with length when alpha > 0). Done
    sentences leave the batch (their rows are dropped from every tensor), so the remaining steps
    compute only for sentences still being searched.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    n_sentences, k, device = src.size(0), beam_size, src.device
    b = n_sentences  # sentences still searched; `sentence[s]` is the input row of the s-th of them
    sentence = list(range(n_sentences))
    memory, state = model.encode(src, src_lens)
    memory, state = _expand(memory, state, k)
    limits = max_output_lengths(src_lens, ratio, extra).to(device)  # (B,)
    y = torch.full((b * k,), BOS, dtype=torch.long, device=device)
    context = memory.values.new_zeros(b * k, memory.values.size(2))
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live beam per sentence at the start
    tokens = torch.zeros(b * k, 0, dtype=torch.long, device=device)
    alphas = memory.values.new_zeros(b * k, 0, memory.values.size(1))
    finished: list[list[tuple[float, list[int], torch.Tensor]]] = [[] for _ in range(n_sentences)]
    done = torch.zeros(b, dtype=torch.bool, device=device)
    offsets = (torch.arange(b, device=device) * k).unsqueeze(1)
    for i in range(int(limits.max()) + 1):
        logits, state, context, alpha_i = model.decoder.step(y, state, context, memory, i)
        logp = torch.log_softmax(logits.float(), dim=-1)  # (B*K, V)
        vocab = logp.size(1)
        at_limit = (i >= limits).repeat_interleave(k)  # force EOS at the length limit
        if bool(at_limit.any()):
            only_eos = torch.full_like(logp, float("-inf"))
            only_eos[:, EOS] = 0.0
            logp = torch.where(at_limit.unsqueeze(1), only_eos, logp)
        candidates = (scores.unsqueeze(2) + logp.view(b, k, vocab)).view(b, k * vocab)
        top_scores, top_ids = candidates.topk(2 * k, dim=1)  # (B, 2K): enough to keep K live after EOS
        beam_of, token_of = top_ids // vocab, top_ids % vocab
        tokens_all = torch.cat([tokens, token_of.new_zeros(b * k, 1)], 1)
        alphas_all = torch.cat([alphas, alpha_i.unsqueeze(1)], 1)
        active = ~done.unsqueeze(1)
        real = top_scores > float("-inf")
        is_eos = (token_of == EOS) & real & active
        # Only an EOS among the K best candidates ends a hypothesis (so beam 1 is greedy). They are
        # few, so they are collected in Python, in rank order, up to K per sentence.
        eos_hits = is_eos[:, :k]
        if bool(eos_hits.any()):
            lp_now = length_penalty(torch.tensor(i + 1), alpha).item()
            for s, rank in eos_hits.nonzero().tolist():
                if len(finished[sentence[s]]) < k:
                    row = s * k + int(beam_of[s, rank])
                    hypothesis = (float(top_scores[s, rank]) / lp_now, tokens_all[row, :i].tolist(), alphas_all[row, : i + 1])
                    finished[sentence[s]].append(hypothesis)
        # The K best non-EOS candidates of each sentence continue: slot = their rank among those.
        extend = real & active & (token_of != EOS)
        slot = extend.long().cumsum(1) - 1
        take = extend & (slot < k)
        s_idx, r_idx = take.nonzero(as_tuple=True)
        slots = slot[s_idx, r_idx]
        new_scores = torch.full((b, k), float("-inf"), device=device)
        new_rows = offsets.expand(b, k).clone()  # unused slots keep pointing into their own sentence
        new_tokens = torch.zeros(b, k, dtype=torch.long, device=device)
        new_scores[s_idx, slots] = top_scores[s_idx, r_idx]
        new_rows[s_idx, slots] = s_idx * k + beam_of[s_idx, r_idx]
        new_tokens[s_idx, slots] = token_of[s_idx, r_idx]
        # Done: no live beam, or n_best finished and no live beam can still beat the best of them.
        ours = [finished[n] for n in sentence]
        n_finished = torch.tensor([len(f) for f in ours], device=device)
        best_finished = torch.tensor([max((h[0] for h in f), default=float("-inf")) for f in ours], dtype=torch.float64, device=device)
        best_live = new_scores.max(1).values.double()
        reachable = best_live / length_penalty(limits, alpha).double() if alpha > 0 else best_live
        done |= (take.sum(1) == 0) | ((n_finished >= n_best) & (best_finished >= reachable))
        if bool(done.all()):
            break
        # Continue the surviving beams of the sentences not done; drop the done sentences' rows.
        keep = (~done).nonzero().squeeze(1)
        rows = new_rows.index_select(0, keep).view(-1)
        if len(keep) < b:
            sentence = [sentence[s] for s in keep.tolist()]
            kept_rows = (keep.unsqueeze(1) * k + torch.arange(k, device=device)).view(-1)
            memory = AttentionMemory(memory.keys.index_select(0, kept_rows), memory.values.index_select(0, kept_rows),
                                     memory.mask.index_select(0, kept_rows), coverage=memory.coverage)
            limits, b = limits.index_select(0, keep), len(keep)
            offsets = (torch.arange(b, device=device) * k).unsqueeze(1)
            done = torch.zeros(b, dtype=torch.bool, device=device)
        scores = new_scores.index_select(0, keep)
        state = tuple(part.index_select(0, rows) for part in state)
        context = context.index_select(0, rows)
        if memory.coverage is not None:
            memory.coverage = memory.coverage.index_select(0, rows)
        tokens = tokens_all.index_select(0, rows)
        y = new_tokens.index_select(0, keep).view(-1)
        tokens[:, i] = y
        alphas = alphas_all.index_select(0, rows)
    out = []
    for s in range(n_sentences):
        n_src = int(src_lens[s])
        ranked = sorted(finished[s], key=lambda f: -f[0])[:n_best]
        out.append([Hypothesis(ids, alignment[:, :n_src].cpu(), score) for score, ids, alignment in ranked])
    return out
