"""train.precision=auto on a CPU: bf16 only where this model's own step times clearly faster, and
the measurement leaves the run exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
import torch
from support import compose_config, toy_overrides
from test_reference_decoder import _Batch, toy_batch

from nmt.config.schema import ModelConfig
from nmt.data.batching import BatchSampler
from nmt.model.build import build_model
from nmt.model.checkpoint import load_checkpoint
from nmt.model.seq2seq import Seq2Seq
from nmt.training import precision
from nmt.training.loop import Trainer
from nmt.training.precision import TRAIN_BF16_MIN_SPEEDUP, cpu_trains_faster_in_bf16, faster_in_bf16, first_batches
from nmt.training.session import train


def small_model() -> Seq2Seq:
    cfg = ModelConfig(embedding_size=16)  # dropout on: the measurement must not move the random stream
    cfg.encoder.hidden_size, cfg.decoder.hidden_size, cfg.decoder.output_size = 16, 32, 16
    torch.manual_seed(0)
    return build_model(cfg, 30, 30).train()


@pytest.mark.parametrize(
    ("fp32_s", "bf16_s", "expected"),
    [(1.0, 1.0, False), (1.0, 0.95, False), (1.0, 1 / TRAIN_BF16_MIN_SPEEDUP, True), (1.0, 0.6, True), (0.6, 1.0, False)],
)
def test_bf16_is_taken_only_where_its_passes_are_clearly_faster(fp32_s: float, bf16_s: float, expected: bool) -> None:
    asked: list[tuple[torch.dtype | None, int]] = []

    def timer(dtype: torch.dtype | None, k: int) -> float:
        asked.append((dtype, k))
        return bf16_s if dtype is torch.bfloat16 else fp32_s

    assert faster_in_bf16(timer, batches=3) is expected
    # batch 0 warms both up; then each batch in both precisions, one after the other
    assert asked == [(d, k) for k in range(4) for d in (None, torch.bfloat16)]


def test_every_timed_batch_counts_not_only_the_fastest() -> None:
    """Kernels are made for each new shape, so a precision that is slow on the batches it meets
    first is slow in training: the sums decide (here bf16 is faster on two batches of three, and
    slower overall)."""
    seconds = {(None, 1): 1.0, (torch.bfloat16, 1): 3.0, (None, 2): 1.0, (torch.bfloat16, 2): 0.5,
               (None, 3): 1.0, (torch.bfloat16, 3): 0.5}
    assert faster_in_bf16(lambda dtype, k: seconds.get((dtype, k), 0.0), batches=3) is False


def test_without_bf16_instructions_nothing_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "cpu_multiplies_bf16", lambda: False)
    monkeypatch.setattr(precision, "faster_in_bf16", lambda timer, batches: pytest.fail("timed without bf16 instructions"))
    assert cpu_trains_faster_in_bf16(small_model(), [_Batch(*toy_batch())] * 3, 0.1) is False  # type: ignore[arg-type]


def test_the_measurement_leaves_weights_gradients_and_random_stream_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "cpu_multiplies_bf16", lambda: True)  # time for real, on any CPU
    model, batch = small_model(), _Batch(*toy_batch())
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(7)
    expected_draw = torch.rand(5)
    torch.manual_seed(7)
    passes: list[torch.dtype | None] = []
    real_pass = precision.pass_seconds
    monkeypatch.setattr(precision, "pass_seconds", lambda m, b, ls, dtype: passes.append(dtype) or real_pass(m, b, ls, dtype))

    answer = cpu_trains_faster_in_bf16(model, [batch] * 4, 0.1)  # type: ignore[list-item]

    assert isinstance(answer, bool) and passes == [None, torch.bfloat16] * 4
    assert torch.equal(torch.rand(5), expected_draw)  # dropout draws of the run: untouched
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())


def test_one_pass_computes_the_training_loss_and_its_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    """pass_seconds runs what a training step runs (forward, loss, backward) in the dtype asked."""
    model, batch = small_model(), _Batch(*toy_batch())
    seen: list[bool] = []
    real_backward = torch.Tensor.backward
    monkeypatch.setattr(torch.Tensor, "backward", lambda t, *a, **k: seen.append(True) or real_backward(t, *a, **k))
    assert precision.pass_seconds(model, batch, 0.1, torch.bfloat16) > 0  # type: ignore[arg-type]
    assert precision.pass_seconds(model, batch, 0.1, None) > 0  # type: ignore[arg-type]
    assert seen == [True, True]


def test_the_timed_batches_are_the_first_of_the_first_epoch() -> None:
    lengths = [3, 9, 4, 12, 6, 5, 8, 2, 7, 10, 11]
    ds = datasets.Dataset.from_dict({"src_ids": [[5, 3]] * len(lengths), "tgt_ids": [[5] * n for n in lengths]})
    sampler = BatchSampler(ds, batch_tokens=1, shuffle=True, seed=0)  # one sentence per batch
    batches = first_batches(sampler, 4)
    expected = [sampler.collate(index) for index in sampler.batches(0)[:4]]
    assert len(batches) == 4 and all(torch.equal(a.tgt_out, b.tgt_out) for a, b in zip(batches, expected))


def test_an_epoch_of_fewer_batches_is_timed_from_its_start_again() -> None:
    ds = datasets.Dataset.from_dict({"src_ids": [[5, 3]] * 2, "tgt_ids": [[5] * 3, [5] * 6]})
    sampler = BatchSampler(ds, batch_tokens=1, shuffle=True, seed=0)  # two batches of one sentence
    batches = first_batches(sampler)
    assert len(batches) == precision.PROBE_BATCHES + 1
    assert [b.tgt_out.size(1) for b in batches] == [b.tgt_out.size(1) for b in batches[:2]] * 3 + [batches[0].tgt_out.size(1)]
    with pytest.raises(ValueError, match="at least one timed batch"):
        faster_in_bf16(lambda dtype, k: 1.0, batches=0)



def test_a_resumed_run_keeps_the_precision_auto_chose_when_it_started(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing may come out otherwise on another host or minute; a run that started in bf16
    goes on in bf16 (no new timing), and an explicit setting on resuming still wins."""
    base = toy_overrides(workdir, n_train=100) + ["train.precision=auto", "train.valid_every=3", "train.test_at_end=false"]
    timings: list[bool] = []
    monkeypatch.setattr(Trainer, "_trains_faster_in_bf16", lambda self: timings.append(True) or True)
    assert train(compose_config(base + ["train.max_steps=3"]), workdir / "run").precision == "bf16"
    assert timings == [True]  # cpu_multiplies_bf16 aside: the rule asked once, at the start

    monkeypatch.setattr(Trainer, "_trains_faster_in_bf16", lambda self: pytest.fail("a resumed run timed the step again"))
    resumed = train(compose_config(base + ["train.max_steps=6", "train.resume=auto"]), workdir / "run")
    assert resumed.step == 6 and resumed.precision == "bf16"
    assert json.loads((workdir / "run" / "metrics.json").read_text())["precision"] == "bf16"
    assert load_checkpoint(workdir / "run" / "checkpoints" / "last.pt").train_state["precision"] == "bf16"

    forced = train(compose_config(base + ["train.max_steps=9", "train.resume=auto", "train.precision=fp32"]), workdir / "run")
    assert forced.step == 9 and forced.precision == "fp32"
