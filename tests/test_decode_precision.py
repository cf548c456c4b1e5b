"""decode.precision: the search's matrix products in bf16 when asked, and by default (auto) on a CPU
whose bf16 products are measured much faster, fp32 otherwise; scores and attention stay fp32."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from nmt.config.schema import DecodeConfig, Precision
from nmt.data.prepare import prepare
from nmt.decoding.scoring import describe_decoding
from nmt.decoding.splits import translate_dataset
from nmt.model.checkpoint import config_from_checkpoint, load_checkpoint, load_model
from nmt.system.runtime import cpu_decodes_faster_in_bf16


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
    assert fp32_dtypes == {torch.float32} and torch.bfloat16 in bf16_dtypes
    # auto is one of the two, as this CPU's measured bf16 speed says
    same_as = (bf16, bf16_att, bf16_dtypes) if cpu_decodes_faster_in_bf16() else (fp32, fp32_att, fp32_dtypes)
    assert auto == same_as[0] and all(torch.equal(a, b) for a, b in zip(auto_att, same_as[1])) and auto_dtypes == same_as[2]
    assert all(a.dtype == torch.float32 for a in bf16_att)
    assert all(torch.allclose(a.sum(1), torch.ones(a.size(0)), atol=1e-2) for a in bf16_att)
    same = sum(a == b for a, b in zip(bf16, fp32)) / len(fp32)
    assert same > 0.8, same  # bf16 rounds the products: a few outputs may change, most do not


def test_reports_name_the_precision_the_search_ran_in() -> None:
    cpu = torch.device("cpu")
    assert describe_decoding(DecodeConfig(beam_size=1, precision=Precision.fp32), cpu) == "greedy, fp32"
    assert describe_decoding(DecodeConfig(beam_size=5, alpha=0.6, precision=Precision.bf16), cpu) == "beam 5, alpha 0.6, bf16"
    auto = "bf16" if cpu_decodes_faster_in_bf16() else "fp32"
    assert describe_decoding(DecodeConfig(beam_size=4, alpha=1.0), cpu) == f"beam 4, alpha 1.0, {auto}"
