"""decode.precision: the search's matrix products in bf16 when asked (faster on CPUs with native
bf16), fp32 by default on CPU so that every CPU decodes alike; scores and attention stay fp32."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from nmt.config.schema import DecodeConfig, Precision
from nmt.data.prepare import prepare
from nmt.decoding.splits import translate_dataset
from nmt.model.checkpoint import config_from_checkpoint, load_checkpoint, load_model


def decode(run: Path, precision: Precision) -> tuple[list[str], list[torch.Tensor], set[torch.dtype]]:
    """Greedy translations of the validation split, their attention, and the dtypes the linear layers produced."""
    ckpt = run / "checkpoints" / "best.pt"
    model, _, _, tgt_tok = load_model(ckpt)
    data = prepare(config_from_checkpoint(load_checkpoint(ckpt)).data)
    seen: set[torch.dtype] = set()
    hooks = [m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype)) for m in model.modules() if isinstance(m, nn.Linear)]
    texts, hyps = translate_dataset(model, data.split("valid"), tgt_tok, DecodeConfig(beam_size=1, precision=precision),
                                    torch.device("cpu"))
    for hook in hooks:
        hook.remove()
    return texts, [h.alignment for h in hyps], seen


def test_bf16_decoding_runs_its_products_in_bf16_and_keeps_attention_fp32(trained_toy: Path) -> None:
    fp32, fp32_att, fp32_dtypes = decode(trained_toy, Precision.fp32)
    auto, auto_att, auto_dtypes = decode(trained_toy, Precision.auto)
    bf16, bf16_att, bf16_dtypes = decode(trained_toy, Precision.bf16)
    assert fp32_dtypes == auto_dtypes == {torch.float32} and torch.bfloat16 in bf16_dtypes
    assert auto == fp32 and all(torch.equal(a, b) for a, b in zip(auto_att, fp32_att))  # auto is fp32 on a CPU
    assert all(a.dtype == torch.float32 for a in bf16_att)
    assert all(torch.allclose(a.sum(1), torch.ones(a.size(0)), atol=1e-2) for a in bf16_att)
    same = sum(a == b for a, b in zip(bf16, fp32)) / len(fp32)
    assert same > 0.8, same  # bf16 rounds the products: a few outputs may change, most do not
