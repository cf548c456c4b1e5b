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
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("auto", cuda) is torch.bfloat16
    assert autocast_dtype("bf16", cpu) is torch.bfloat16 and autocast_dtype("fp32", cuda) is None


@pytest.mark.parametrize("native", [True, False])
def test_training_auto_takes_bf16_on_a_cpu_that_multiplies_it(monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    """train.precision=auto: bf16 where the CPU has bf16 matrix instructions, fp32 elsewhere;
    decoding's auto stays fp32 on every CPU, and an explicit choice is never overridden."""
    monkeypatch.setattr(runtime.torch.cpu, "get_capabilities", lambda: {"avx512_bf16": native, "amx_bf16": False})
    cpu = torch.device("cpu")
    assert runtime.cpu_multiplies_bf16() is native
    assert autocast_dtype("auto", cpu, native_cpu_bf16=True) is (torch.bfloat16 if native else None)
    assert autocast_dtype("auto", cpu) is None
    assert autocast_dtype("fp32", cpu, native_cpu_bf16=True) is None


def test_no_capability_query_means_no_native_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(runtime.torch.cpu, "get_capabilities")
    assert runtime.cpu_multiplies_bf16() is False


def test_bf16_autocast_step_matches_fp32_closely() -> None:
    from nmt.model.build import build_model

    cfg = ModelConfig(embedding_size=16, embedding_dropout=0.0)
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
