"""Beam search is exact where it promises to be, checked against plain references on tiny random models.

For a model small enough to enumerate every output (a handful of tokens, 4-5 steps), a table of
next-token log-probabilities for every prefix is computed by teacher forcing, independently of
`nmt.decoding.search`. From it the tests derive (a) the exhaustive optimum under the length penalty and (b) a
plain beam search that applies only the K-best rule and runs every hypothesis to the length limit,
recording every prefix the K-best rule pruned. Then, for drawn models and inputs:
- with K >= the number of possible outputs, beam search returns the exhaustive optimum;
- for every K, no output it did not return scores higher than the one it returned, unless a prefix
  of it was pruned by the K-best rule; its n-best list is the plain beam's;
- greedy search and beam 1 give the same tokens and score as a plain argmax loop.
Three scripted models reproduce the faults the exact stopping rule fixed.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.attention.memory import AttentionMemory
from nmt.config.schema import (
    AttendFrom,
    AttentionConfig,
    DecoderConfig,
    EncoderConfig,
    HardEstimator,
    LocalVariant,
    Mode,
    ModelConfig,
    Score,
)
from nmt.data.tokenizer import BOS, EOS, PAD
from nmt.decoding.search import beam_search, greedy_search
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq

TOL = 1e-9
VARIANTS = [  # every mode with its sub-variants
    (Mode.soft, {}), (Mode.hard, {"hard_estimator": HardEstimator.gumbel}), (Mode.hard, {"hard_estimator": HardEstimator.reinforce}),
    (Mode.local, {"local": LocalVariant.monotonic, "window": 1}), (Mode.local, {"local": LocalVariant.predictive, "window": 1}),
]


def tiny_model(score: Score, variant: int, vocab: int, seed: int, coverage: bool, luong: bool) -> Seq2Seq:
    """A random float64 model with `vocab` target tokens (PAD, UNK, BOS, EOS and vocab - 4 words)."""
    mode, options = VARIANTS[variant]
    attention = AttentionConfig(score=score, mode=mode, hidden_size=6, max_source_len=16, coverage=coverage,
                                coverage_hidden_size=3, attend_from=AttendFrom.current if luong else AttendFrom.previous, **options)
    cfg = ModelConfig(embedding_size=5, embedding_dropout=0.0, tie_target_embeddings=False, tie_source_embeddings=False,
                      encoder=EncoderConfig(hidden_size=4, dropout=0.0), decoder=DecoderConfig(hidden_size=8, output_size=5, dropout=0.0),
                      attention=attention)
    torch.manual_seed(seed)
    model = build_model(cfg, 9, vocab).double().eval()
    with torch.no_grad():  # sharper distributions than the initialisation's, so that choices matter
        model.decoder.generator.weight.mul_(6.0)
    return model


def generable(vocab: int) -> list[int]:
    return [t for t in range(vocab) if t not in (PAD, BOS)]


@dataclass
class Table:
    """next_logp[prefix] (V,): log p(token | prefix, x) by teacher forcing, for every prefix of at most `limit` tokens."""

    next_logp: dict[tuple[int, ...], list[float]]
    limit: int

    def step_logp(self, prefix: tuple[int, ...], token: int) -> float:
        return self.next_logp[prefix][token]

    def score(self, output: tuple[int, ...], alpha: float) -> float:
        """log p(output + EOS) / lp, output of at most `limit` tokens."""
        total = sum(self.step_logp(output[:t], output[t]) for t in range(len(output))) + self.step_logp(output, EOS)
        return total / ((5 + len(output) + 1) / 6) ** alpha

    def outputs(self) -> list[tuple[int, ...]]:
        return [p for p in self.next_logp]


@torch.no_grad()
def prefix_table(model: Seq2Seq, src: torch.Tensor, limit: int, vocab: int) -> Table:
    """Teacher-forced next-token log-probabilities for every prefix over the non-EOS generable tokens."""
    words = [t for t in generable(vocab) if t != EOS]
    prefixes = [p for n in range(limit + 1) for p in itertools.product(words, repeat=n)]
    table: dict[tuple[int, ...], list[float]] = {}
    for n in range(limit + 1):
        group = [p for p in prefixes if len(p) == n]
        tgt_in = torch.tensor([[BOS, *p] for p in group])
        srcs = src.unsqueeze(0).expand(len(group), -1)
        logits = model(srcs, torch.full((len(group),), src.size(0)), tgt_in).logits[:, -1]
        logp = torch.log_softmax(logits, -1).tolist()
        table.update(zip(group, logp))
    return Table(table, limit)


def plain_beam(table: Table, k: int, alpha: float) -> tuple[list[tuple[float, tuple[int, ...]]], set[tuple[int, ...]]]:
    """The K-best rule alone, every hypothesis run to the limit -> (all finished (score, output),
    best first; every sequence (prefix + token) the K-best rule pruned)."""
    live: list[tuple[float, tuple[int, ...]]] = [(0.0, ())]
    finished, pruned = [], set()
    for step in range(table.limit + 1):
        candidates = []
        for logp, prefix in live:
            tokens = [EOS] if step >= table.limit else [t for t in range(len(table.next_logp[prefix])) if t not in (PAD, BOS)]
            candidates += [(logp + table.step_logp(prefix, t), prefix + (t,)) for t in tokens]
        candidates.sort(key=lambda c: -c[0])
        for rank, (logp, seq) in enumerate(candidates):
            if seq[-1] == EOS and rank < k:
                finished.append((logp / ((5 + len(seq)) / 6) ** alpha, seq[:-1]))
            elif seq[-1] == EOS:
                pruned.add(seq)
        words = [c for c in candidates if c[1][-1] != EOS]
        live = words[:k]
        pruned.update(seq for _, seq in words[k:])
    return sorted(finished, key=lambda f: -f[0]), pruned


def source(seed: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 9, (length,), generator=g)
    src[-1] = EOS
    return src


model_args = st.tuples(st.sampled_from(list(Score)), st.integers(0, len(VARIANTS) - 1), st.integers(6, 8),
                       st.integers(0, 10_000), st.booleans(), st.booleans())
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(model_args, st.integers(4, 5), st.integers(2, 6), st.sampled_from([0.0, 0.6, 1.0, 2.0]))
def test_a_beam_wider_than_all_outputs_is_exhaustive(args: tuple, limit: int, src_len: int, alpha: float) -> None:
    model = tiny_model(*args)
    src = source(args[3], src_len)
    table = prefix_table(model, src, limit, args[2])
    scored = sorted(((table.score(o, alpha), o) for o in table.outputs()), reverse=True)
    (hyp,) = beam_search(model, src.unsqueeze(0), torch.tensor([src_len]), beam_size=len(scored), alpha=alpha, ratio=0.0,
                         extra=limit)[0]
    assert hyp.score == pytest.approx(scored[0][0], abs=TOL)
    assert table.score(tuple(hyp.ids), alpha) == pytest.approx(scored[0][0], abs=TOL)  # the optimum, or tied with it


@SETTINGS
@given(model_args, st.integers(4, 5), st.integers(2, 6), st.integers(1, 6), st.sampled_from([0.0, 0.6, 2.0]), st.integers(1, 3))
def test_nothing_better_is_dropped_but_by_the_k_best_rule(args: tuple, limit: int, src_len: int, k: int, alpha: float, n_best: int) -> None:
    n_best = min(n_best, k)
    model = tiny_model(*args)
    src = source(args[3], src_len)
    table = prefix_table(model, src, limit, args[2])
    hyps = beam_search(model, src.unsqueeze(0), torch.tensor([src_len]), beam_size=k, alpha=alpha, ratio=0.0, extra=limit, n_best=n_best)[0]
    finished, pruned = plain_beam(table, k, alpha)
    best = hyps[0].score
    for output in table.outputs():
        if table.score(output, alpha) > best + TOL:
            seq = output + (EOS,)
            assert any(seq[:n] in pruned for n in range(1, len(seq) + 1)), (output, table.score(output, alpha), best)
    assert [h.score for h in hyps] == pytest.approx([f[0] for f in finished[:n_best]], abs=TOL)
    for h in hyps:
        assert h.score == pytest.approx(table.score(tuple(h.ids), alpha), abs=TOL)  # the teacher-forced score


@SETTINGS
@given(model_args, st.integers(2, 5), st.integers(2, 6))
def test_greedy_and_beam_one_follow_the_argmax(args: tuple, limit: int, src_len: int) -> None:
    model = tiny_model(*args)
    src = source(args[3], src_len)
    table = prefix_table(model, src, limit, args[2])
    output: tuple[int, ...] = ()
    while len(output) < limit:
        logp = table.next_logp[output]
        token = max(generable(args[2]), key=lambda t: logp[t])
        if token == EOS:
            break
        output += (token,)
    (greedy,) = greedy_search(model, src.unsqueeze(0), torch.tensor([src_len]), ratio=0.0, extra=limit)
    ((beam,),) = beam_search(model, src.unsqueeze(0), torch.tensor([src_len]), beam_size=1, alpha=0.0, ratio=0.0, extra=limit)
    assert tuple(greedy.ids) == tuple(beam.ids) == output
    assert greedy.score == beam.score == pytest.approx(table.score(output, 0.0), abs=TOL)
    assert greedy.alignment.shape == (len(output) + 1, src_len)


def test_sentences_of_one_batch_are_searched_independently() -> None:
    model = tiny_model(Score.additive, 0, 8, 3, False, False)
    srcs = [source(s, n) for s, n in ((1, 3), (2, 6), (3, 4))]
    batch = torch.zeros(3, 6, dtype=torch.long)
    for r, s in enumerate(srcs):
        batch[r, : len(s)] = s
    together = beam_search(model, batch, torch.tensor([3, 6, 4]), beam_size=3, alpha=0.6, ratio=0.0, extra=4, n_best=2)
    for r, s in enumerate(srcs):
        alone = beam_search(model, s.unsqueeze(0), torch.tensor([len(s)]), beam_size=3, alpha=0.6, ratio=0.0, extra=4, n_best=2)[0]
        assert [h.ids for h in together[r]] == [h.ids for h in alone]
        assert [h.score for h in together[r]] == pytest.approx([h.score for h in alone], abs=1e-9)
        torch.testing.assert_close(together[r][0].alignment, alone[0].alignment)


class ScriptedDecoder:
    """Next-token log-probabilities from a script {prefix: {token: log p}} (the rest of the mass on
    an unused word); the state carries each row's prefix."""

    def __init__(self, script: dict[tuple[int, ...], dict[int, float]], vocab: int = 7) -> None:
        self.script, self.vocab = script, vocab
        self.prefixes: list[tuple[int, ...]] = [()]

    def step(self, y: torch.Tensor, state: tuple[torch.Tensor, ...], context: torch.Tensor, memory: AttentionMemory, i: int):  # noqa: ANN201
        rows = [self.prefixes[int(r)] + ((int(t),) if int(t) != BOS else ()) for r, t in zip(state[0].tolist(), y.tolist())]
        logp = torch.full((len(rows), self.vocab), -30.0, dtype=torch.float64)
        for n, prefix in enumerate(rows):
            given = self.script.get(prefix, {})
            for token, value in given.items():
                logp[n, token] = value
            rest = 1.0 - sum(math.exp(v) for v in given.values())
            assert rest > 0, f"the script of {prefix} is not a distribution"
            logp[n, 6] = math.log(rest)
        self.prefixes += rows
        ids = torch.arange(len(self.prefixes) - len(rows), len(self.prefixes), dtype=torch.float64)
        alpha = torch.zeros(len(rows), memory.mask.size(1), dtype=torch.float64)
        alpha[:, 0] = 1.0
        return logp, (ids,), context, alpha


class ScriptedModel:
    def __init__(self, script: dict[tuple[int, ...], dict[int, float]]) -> None:
        self.decoder = ScriptedDecoder(script)

    def start(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[AttentionMemory, tuple[torch.Tensor, ...], torch.Tensor]:
        values = torch.zeros(src.size(0), src.size(1), 1, dtype=torch.float64)
        return AttentionMemory(values, values, src != PAD), (torch.zeros(src.size(0), dtype=torch.float64),), values[:, 0]

    def step(self, *args: object):  # noqa: ANN201
        return self.decoder.step(*args)  # type: ignore[arg-type]


A, B = 4, 5  # two words


def scripted_search(script: dict, k: int, alpha: float, limit: int) -> list:
    model = ScriptedModel(script)
    return beam_search(model, torch.tensor([[A, EOS]]), torch.tensor([2]), beam_size=k, alpha=alpha, ratio=0.0, extra=limit)[0]  # type: ignore[arg-type]


def test_scripted_a_better_hypothesis_finishing_after_k_others_is_kept() -> None:
    # Two poor hypotheses end first (EOS at steps 0 and 1, within the K = 2 best), then "A A" ends far better.
    script = {(): {A: -0.2, EOS: -2.0, B: -3.5}, (A,): {A: -0.2, EOS: -2.0}, (A, A): {EOS: -0.02}}
    (best,) = scripted_search(script, k=2, alpha=0.0, limit=5)
    assert best.ids == [A, A] and best.score == pytest.approx(-0.42)


def test_scripted_the_bound_covers_a_forced_end_at_the_limit() -> None:
    # alpha = 2: "A A" + forced EOS at length limit + 1 = 3 scores -0.87 / (8/6)^2 = -0.489, better than
    # the EOS of step 0 (-0.6); a bound over lengths up to `limit` only (-0.85 / (7/6)^2 = -0.62) stops too early.
    script = {(): {EOS: -0.6, A: -0.85}, (A,): {A: -0.01, EOS: -6.0}, (A, A): {EOS: -0.01}}
    (best,) = scripted_search(script, k=1, alpha=2.0, limit=2)
    assert best.ids == [A, A] and best.score == pytest.approx(-0.87 / (8 / 6) ** 2)


def test_scripted_a_forced_eos_adds_its_own_log_probability() -> None:
    # The limit (1 token) forces EOS after "A", although B is likelier there: the score counts log p(EOS | A).
    script = {(): {A: -0.1}, (A,): {B: -0.2, EOS: -2.5}}
    model = ScriptedModel(script)
    (greedy,) = greedy_search(model, torch.tensor([[A, EOS]]), torch.tensor([2]), ratio=0.0, extra=1)  # type: ignore[arg-type]
    model = ScriptedModel(script)
    ((beam,),) = beam_search(model, torch.tensor([[A, EOS]]), torch.tensor([2]), beam_size=1, ratio=0.0, extra=1)  # type: ignore[arg-type]
    assert greedy.ids == beam.ids == [A]
    assert greedy.score == beam.score == pytest.approx(-2.6)
