"""Decoding: batched beam search, with greedy search as its K = 1 case; every hypothesis comes
with its attention matrix.

Scores. A hypothesis Y (its tokens, then EOS) scores log p(Y | x) / lp(|Y|), with the GNMT length
penalty lp(n) = ((5 + n) / 6) ** alpha, |Y| counting EOS. At the length limit (ratio * |x| + extra
tokens) EOS is forced: it is then the only continuation and adds its own log-probability, so a
score is always the teacher-forced log-probability of its hypothesis (over lp). PAD and BOS are
never generated.

The search. At every step each live hypothesis of a sentence is extended by every token. An EOS
among the K best extensions ends a hypothesis (it joins the sentence's finished pool, which keeps
the n_best best), and the K best extensions that are not EOS live on. This K-best rule is the only
place where the search prunes.

Stopping, exactly. A live hypothesis with log-probability L (<= 0, and it can only fall) and t
tokens can still end at any length n from t + 1 to limit + 1; the best score it can reach is the
largest L / lp(n) over those n, that is max(L / lp(t + 1), L / lp(limit + 1)) since lp is monotone
in n. A sentence is done when it has no live hypothesis, or its pool holds n_best hypotheses and
the n_best-th of them scores at least what any live one can reach. So the search returns what it
would return if it ran every hypothesis to the limit, and with K at least the number of possible
outputs it returns the exhaustive optimum. Done sentences leave the batch (their rows are dropped
from every tensor), so later steps compute only for sentences still being searched.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from nmt.data.tokenizer import BOS, EOS, PAD

State = tuple[torch.Tensor, ...]

NEVER_GENERATED = (PAD, BOS)


class SearchMemory(Protocol):
    """What a model keeps per sentence for its steps (an `AttentionMemory`, or an ensemble's)."""

    @property
    def per_hypothesis(self) -> bool: ...  # rows also hold per-hypothesis state: select them every step

    def repeat_rows(self, k: int) -> SearchMemory: ...

    def select_rows(self, rows: torch.Tensor) -> SearchMemory: ...


class Decodable(Protocol):
    """A model the search can run: a `Seq2Seq`, or an `Ensemble` of them."""

    def start(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[SearchMemory, State, torch.Tensor]: ...

    # memory: the SearchMemory its own `start` returned (Any: each model takes its own kind)
    def step(self, y_prev: torch.Tensor, state: State, context: torch.Tensor, memory: Any,
             step: int) -> tuple[torch.Tensor, State, torch.Tensor, torch.Tensor]: ...


@dataclass
class Hypothesis:
    """A decoded sentence: `ids` (without BOS/EOS) and `alignment` (len(ids) + 1, S_real) with
    one row per output token plus the final EOS row, over the real source tokens (EOS included);
    `score` = log p(ids + EOS) / lp(len(ids) + 1)."""

    ids: list[int]
    alignment: torch.Tensor
    score: float


def max_output_lengths(src_lens: torch.Tensor, ratio: float, extra: int) -> torch.Tensor:
    """Maximum output lengths (B,) = ratio * source length + extra (tokens before the EOS)."""
    return (src_lens.float() * ratio).long() + extra


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha; scores are log p(Y) / lp(Y)."""
    return ((5.0 + length.double()) / 6.0) ** alpha


@dataclass
class _Pool:
    """The n best finished hypotheses of one sentence, best first."""

    size: int
    hyps: list[Hypothesis] = field(default_factory=list)

    def add(self, hyp: Hypothesis) -> None:
        if len(self.hyps) == self.size and hyp.score <= self.hyps[-1].score:
            return
        keys = [-h.score for h in self.hyps]
        self.hyps.insert(bisect.bisect_right(keys, -hyp.score), hyp)
        del self.hyps[self.size :]

    def threshold(self) -> float:
        """The score a live hypothesis must beat to still enter the pool (-inf while it has room)."""
        return self.hyps[-1].score if len(self.hyps) == self.size else float("-inf")


@dataclass
class _Beams:
    """The live hypotheses of the b sentences still searched, k slots each (row s * k + r).
    `sentence` (b,): input row of each; `limits` (b,); `scores` (b, k): log p, -inf in an empty
    slot; `tokens` (b*k, t); `alphas` (b*k, t, S); `y` (b*k,) the last token of each row."""

    sentence: torch.Tensor
    limits: torch.Tensor
    scores: torch.Tensor
    tokens: torch.Tensor
    alphas: torch.Tensor
    y: torch.Tensor
    memory: SearchMemory
    state: State
    context: torch.Tensor

    @property
    def k(self) -> int:
        return self.scores.size(1)


def _start(model: Decodable, src: torch.Tensor, src_lens: torch.Tensor, k: int, ratio: float, extra: int) -> _Beams:
    """One live (empty) hypothesis per sentence, in slot 0 of its k."""
    memory, state, context = model.start(src, src_lens)
    b, device = src.size(0), src.device
    dtype = torch.promote_types(context.dtype, torch.float32)  # as the log-probabilities
    scores = torch.full((b, k), float("-inf"), device=device, dtype=dtype)
    scores[:, 0] = 0.0
    rows = torch.arange(b, device=device).repeat_interleave(k)
    return _Beams(
        sentence=torch.arange(b, device=device), limits=max_output_lengths(src_lens, ratio, extra).to(device),
        scores=scores, tokens=torch.zeros(b * k, 0, dtype=torch.long, device=device),
        alphas=context.new_zeros(b * k, 0, src.size(1)),
        y=torch.full((b * k,), BOS, dtype=torch.long, device=device), memory=memory.repeat_rows(k),
        state=tuple(part.index_select(0, rows) for part in state), context=context.index_select(0, rows),
    )


def _log_probs(logits: torch.Tensor, forced_eos: torch.Tensor) -> torch.Tensor:
    """logits (R, V), forced_eos (R,) rows at the length limit -> log-probabilities (R, V) in at
    least float32: PAD and BOS impossible; a forced row allows EOS only, at its own log-probability."""
    logp = torch.log_softmax(logits, dim=-1, dtype=torch.promote_types(logits.dtype, torch.float32))
    logp[:, NEVER_GENERATED] = float("-inf")
    if bool(forced_eos.any()):
        only_eos = torch.full_like(logp, float("-inf"))
        only_eos[:, EOS] = logp[:, EOS]
        logp = torch.where(forced_eos.unsqueeze(1), only_eos, logp)
    return logp


def _finish(beams: _Beams, step: int, top: torch.Tensor, rank: torch.Tensor, token: torch.Tensor,
            alphas: torch.Tensor, pools: list[_Pool], alpha: float) -> None:
    """Move every EOS among the K best extensions (top (b, 2K) log p, `rank` their slot of origin,
    `token`) into its sentence's pool; `alphas` (b*k, step + 1, S) are the rows' attention so far."""
    k = beams.k
    is_eos = (token[:, :k] == EOS) & (top[:, :k] > float("-inf"))
    if not bool(is_eos.any()):
        return
    lp = float(length_penalty(torch.tensor(step + 1), alpha))
    for s, r in is_eos.nonzero().tolist():
        row = s * k + int(rank[s, r])
        ids = beams.tokens[row, :step].tolist()
        pools[int(beams.sentence[s])].add(Hypothesis(ids, alphas[row], float(top[s, r]) / lp))


def _survivors(
    beams: _Beams, top: torch.Tensor, rank: torch.Tensor, token: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The K best extensions that are not EOS, per sentence -> (scores (b, k), source rows (b, k),
    tokens (b, k)); an empty slot has score -inf and points at its sentence's first row."""
    b, k = beams.scores.shape
    live = (top > float("-inf")) & (token != EOS)
    slot = live.long().cumsum(1) - 1
    take = live & (slot < k)
    s_idx, r_idx = take.nonzero(as_tuple=True)
    slots = slot[s_idx, r_idx]
    scores = torch.full_like(beams.scores, float("-inf"))
    rows = (torch.arange(b, device=top.device) * k).unsqueeze(1).expand(b, k).clone()
    tokens = torch.zeros(b, k, dtype=torch.long, device=top.device)
    scores[s_idx, slots] = top[s_idx, r_idx]
    rows[s_idx, slots] = s_idx * k + rank[s_idx, r_idx]
    tokens[s_idx, slots] = token[s_idx, r_idx]
    return scores, rows, tokens


def _done(
    scores: torch.Tensor, limits: torch.Tensor, sentence: torch.Tensor, pools: list[_Pool], n_tokens: int, alpha: float
) -> torch.Tensor:
    """Which sentences (b,) are done, by the exact rule of the module docstring. scores (b, k): log p
    of the live hypotheses, which hold n_tokens tokens each."""
    best = scores.max(1).values
    soonest = length_penalty(torch.tensor(n_tokens + 1), alpha).to(best.device)
    latest = length_penalty(limits + 1, alpha)
    reachable = torch.maximum(best / soonest, best / latest)  # best = -inf (no live one): -inf
    threshold = torch.tensor([pools[int(s)].threshold() for s in sentence], dtype=torch.float64, device=best.device)
    return (best == float("-inf")) | (threshold >= reachable)


def _advance(beams: _Beams, keep: torch.Tensor, scores: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor,
             alphas: torch.Tensor, state: State, context: torch.Tensor) -> _Beams:
    """The beams of the next step: sentences `keep` (b',) only, each slot continuing the row
    `rows[s, slot]` with token `tokens[s, slot]`."""
    picked = rows.index_select(0, keep).view(-1)
    y = tokens.index_select(0, keep).view(-1)
    memory = beams.memory
    # Every picked row lies in its own sentence, so selecting `picked` is right for per-sentence
    # fields (keys, values, mask) and per-hypothesis ones (coverage) alike; without per-hypothesis
    # state and with no sentence leaving, the memory is unchanged and its copy is skipped.
    if memory.per_hypothesis or len(keep) < beams.scores.size(0):
        memory = memory.select_rows(picked)
    return _Beams(
        sentence=beams.sentence.index_select(0, keep), limits=beams.limits.index_select(0, keep),
        scores=scores.index_select(0, keep), tokens=torch.cat([beams.tokens.index_select(0, picked), y.unsqueeze(1)], 1),
        alphas=alphas.index_select(0, picked), y=y, memory=memory,
        state=tuple(part.index_select(0, picked) for part in state), context=context.index_select(0, picked),
    )


@torch.no_grad()
def beam_search(
    model: Decodable, src: torch.Tensor, src_lens: torch.Tensor, beam_size: int = 5, alpha: float = 0.0,
    ratio: float = 1.5, extra: int = 10, n_best: int = 1,
) -> list[list[Hypothesis]]:
    """Batched beam search with the GNMT length penalty (see the module docstring for the exact
    stopping rule). src (B, S), src_lens (B,) -> for each sentence its `n_best` hypotheses, best
    first, each with its attention matrix and normalised score."""
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    pools = [_Pool(n_best) for _ in range(src.size(0))]
    beams = _start(model, src, src_lens, beam_size, ratio, extra)
    for i in range(int(beams.limits.max()) + 1):
        logits, state, context, alpha_i = model.step(beams.y, beams.state, beams.context, beams.memory, i)
        b, k = beams.scores.shape
        logp = _log_probs(logits, (i >= beams.limits).repeat_interleave(k))
        candidates = (beams.scores.unsqueeze(2) + logp.view(b, k, -1)).view(b, -1)
        top, index = candidates.topk(min(2 * k, candidates.size(1)), dim=1)  # enough for K live after K EOS
        rank, token = index // logp.size(1), index % logp.size(1)
        alphas = torch.cat([beams.alphas, alpha_i.unsqueeze(1)], 1)
        _finish(beams, i, top, rank, token, alphas, pools, alpha)
        scores, rows, tokens = _survivors(beams, top, rank, token)
        keep = (~_done(scores, beams.limits, beams.sentence, pools, i + 1, alpha)).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        beams = _advance(beams, keep, scores, rows, tokens, alphas, state, context)
    return [[Hypothesis(h.ids, h.alignment[:, : int(n)].float().cpu(), h.score) for h in pool.hyps] for pool, n in zip(pools, src_lens)]


def greedy_search(model: Decodable, src: torch.Tensor, src_lens: torch.Tensor, ratio: float = 1.5, extra: int = 10) -> list[Hypothesis]:
    """Greedy decoding of a batch: beam search with K = 1 and no length penalty (the most likely
    token at every step). src (B, S), src_lens (B,) -> one Hypothesis per sentence, score log p."""
    return [n[0] for n in beam_search(model, src, src_lens, 1, 0.0, ratio, extra, 1)]
