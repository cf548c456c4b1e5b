"""Device and precision choice, and a bf16 autocast step that agrees with fp32."""

from __future__ import annotations

import pytest
import torch
from test_reference_decoder import _Batch, toy_batch

from nmt.config.schema import ModelConfig
from nmt.system import runtime
from nmt.system.runtime import autocast_dtype, resolve_device
from nmt.training.step import train_step


def test_auto_device_is_cuda_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


def test_precision_table() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for use in ("decode", "align"):
        assert autocast_dtype("auto", cuda, use=use) is torch.bfloat16
        assert autocast_dtype("bf16", cpu, use=use) is torch.bfloat16 and autocast_dtype("fp32", cuda, use=use) is None
    assert autocast_dtype("auto", cpu, use="align") is None  # the attention is the product: fp32 on a CPU
    never = lambda: pytest.fail("auto on CUDA or a forced precision asked the CPU rule")  # noqa: E731
    assert runtime.precision_dtype("auto", cuda, never) is torch.bfloat16
    assert runtime.precision_dtype("fp32", cpu, never) is None and runtime.precision_dtype("bf16", cpu, never) is torch.bfloat16
    assert runtime.precision_dtype("auto", cpu, lambda: True) is torch.bfloat16
    assert runtime.precision_dtype("auto", cpu, lambda: False) is None


@pytest.mark.parametrize(("speedup", "expected"), [(0.0, None), (0.6, None), (1.99, None), (2.0, torch.bfloat16), (3.9, torch.bfloat16)])
def test_decoding_auto_takes_bf16_where_the_cpus_bf16_products_of_a_search_are_at_least_twice_as_fast(
    monkeypatch: pytest.MonkeyPatch, speedup: float, expected: torch.dtype | None
) -> None:
    asked: list[runtime.Shapes] = []
    monkeypatch.setattr(runtime, "cpu_bf16_speedup", lambda shapes: asked.append(shapes) or speedup)
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu, use="decode") is expected
    assert asked == [runtime.DECODE_PRODUCTS]  # measured on a search's shapes
    assert autocast_dtype("auto", cpu, use="align") is None and len(asked) == 1  # alignment's auto never measures


@pytest.mark.parametrize("flags", [{"avx512_bf16": True}, {"amx_bf16": True}, {"avx512_bf16": False, "amx_bf16": False}, {}])
def test_bf16_instructions_are_read_from_torchs_capabilities(monkeypatch: pytest.MonkeyPatch, flags: dict[str, bool]) -> None:
    monkeypatch.setattr(runtime.torch.cpu, "get_capabilities", lambda: flags)
    assert runtime.cpu_multiplies_bf16() is any(flags.values())


def test_no_capability_query_means_no_bf16_and_no_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(runtime.torch.cpu, "get_capabilities")
    runtime.cpu_bf16_speedup.cache_clear()
    assert runtime.cpu_multiplies_bf16() is False and runtime.cpu_bf16_speedup() == 0.0
    runtime.cpu_bf16_speedup.cache_clear()


def test_the_speedup_is_a_measured_ratio_of_the_two_precisions(monkeypatch: pytest.MonkeyPatch) -> None:
    seconds = {torch.float32: 0.03, torch.bfloat16: 0.015}
    monkeypatch.setattr(runtime, "cpu_multiplies_bf16", lambda: True)
    monkeypatch.setattr(runtime, "_product_seconds", lambda dtype, repeats, shapes: seconds[dtype])
    runtime.cpu_bf16_speedup.cache_clear()
    assert runtime.cpu_bf16_speedup() == pytest.approx(2.0)
    runtime.cpu_bf16_speedup.cache_clear()


def test_one_pass_of_the_step_products_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """_product_seconds really multiplies (in the dtype asked) and returns a positive time."""
    seen: list[torch.dtype] = []
    real_mm = torch.mm
    monkeypatch.setattr(runtime.torch, "mm", lambda a, b: seen.append(a.dtype) or real_mm(a, b))
    assert runtime._product_seconds(torch.bfloat16, 1) > 0
    assert seen == [torch.bfloat16] * len(runtime.STEP_PRODUCTS)
    seen.clear()
    assert runtime._product_seconds(torch.float32, 2, runtime.DECODE_PRODUCTS) > 0
    assert seen == [torch.float32] * (2 * len(runtime.DECODE_PRODUCTS))


def test_bf16_autocast_step_matches_fp32_closely() -> None:
    from nmt.model.build import build_model

    cfg = ModelConfig(embedding_size=16, embedding_dropout=0.0, word_dropout=0.0)
    cfg.encoder.hidden_size, cfg.encoder.dropout = 16, 0.0
    cfg.decoder.hidden_size, cfg.decoder.output_size, cfg.decoder.dropout = 32, 16, 0.0
    losses = {}
    for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        torch.manual_seed(0)
        model = build_model(cfg, 30, 30).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        batch = _Batch(*toy_batch())
        losses[name] = [train_step(model, optimizer, batch, 0.1, 1.0, None, dtype).loss for _ in range(5)]  # type: ignore[arg-type]
    for a, b in zip(losses["bf16"], losses["fp32"]):
        assert abs(a - b) / b < 0.03
    assert losses["bf16"][-1] < losses["bf16"][0]
