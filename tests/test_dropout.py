"""nmt.model.dropout: Dropout (the distribution of nn.Dropout, drawn differently), WordDropout (whole
tokens), their gradients, eval mode; and word dropout inside a model built from config."""

from __future__ import annotations

import pytest
import torch

from nmt.config.schema import ModelConfig
from nmt.model.build import build_model
from nmt.model.dropout import Dropout, WordDropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drops_a_fraction_p_and_scales_the_rest(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(1000, 1000) + 0.5  # no zeros of its own
    y = Dropout(p).train()(x)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p) < 0.003  # 1e6 draws: the standard error is below 0.0005
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    assert abs(y.mean().item() - x.mean().item()) < 0.003  # expectation preserved


def test_gradient_is_the_same_mask_and_scale() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 32, dtype=torch.float64, requires_grad=True)
    layer = Dropout(0.3).train()
    y = layer(x)
    upstream = torch.randn_like(y)
    (y * upstream).sum().backward()
    mask = (y != 0).double()
    torch.testing.assert_close(x.grad, upstream * mask / 0.7)
    torch.manual_seed(2)
    assert torch.autograd.gradcheck(lambda t: (torch.manual_seed(3), layer(t))[1], (x.detach().requires_grad_(),))


def test_identity_in_eval_mode_and_at_zero() -> None:
    x = torch.randn(5, 7)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_seeded_draws_repeat_and_keep_the_dtype() -> None:
    x = torch.randn(50, 40, dtype=torch.bfloat16)
    torch.manual_seed(4)
    a = Dropout(0.3).train()(x)
    torch.manual_seed(4)
    b = Dropout(0.3).train()(x)
    assert a.dtype == torch.bfloat16
    assert torch.equal(a, b)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
@pytest.mark.parametrize("layer", [Dropout, WordDropout])
def test_refuses_probabilities_outside_0_1(p: float, layer: type) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        layer(p)


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_word_dropout_drops_whole_tokens_a_fraction_p_of_the_time(p: float) -> None:
    torch.manual_seed(5)
    x = torch.rand(400, 250, 16) + 0.5  # (B, T, E), no zeros of its own
    y = WordDropout(p).train()(x)
    zero = y == 0
    token_dropped = zero.all(-1)
    assert torch.equal(zero.any(-1), token_dropped)  # a token is dropped whole or not at all
    assert abs(token_dropped.float().mean().item() - p) < 0.005  # 1e5 tokens: standard error below 0.0015
    torch.testing.assert_close(y[~token_dropped], x[~token_dropped] / (1 - p))


def test_word_dropout_gradient_and_eval_mode() -> None:
    torch.manual_seed(6)
    x = torch.randn(8, 9, 4, dtype=torch.float64, requires_grad=True)
    layer = WordDropout(0.4).train()
    y = layer(x)
    upstream = torch.randn_like(y)
    (y * upstream).sum().backward()
    kept = (y != 0).any(-1, keepdim=True).double()  # (B, T, 1)
    torch.testing.assert_close(x.grad, upstream * kept / 0.6)
    assert WordDropout(0.4).eval()(x) is x
    assert WordDropout(0.0).train()(x) is x


def test_model_word_dropout_hides_whole_source_and_target_tokens_in_training_only() -> None:
    """model.word_dropout reaches both embeddings: in training some tokens' vectors are all zero
    (on both sides), in eval mode none is."""
    torch.manual_seed(7)
    model = build_model(ModelConfig(embedding_size=8, embedding_dropout=0.0, word_dropout=0.5, tie_target_embeddings=False), 30, 30)
    src = torch.randint(4, 30, (6, 10))
    seen: dict[str, torch.Tensor] = {}
    model.encoder.register_forward_pre_hook(lambda m, args: seen.__setitem__("src", args[0]))
    model.decoder.embed_gates.register_forward_pre_hook(lambda m, args: seen.__setitem__("tgt", args[0]))
    memory, state = model.train().encode(src, torch.full((6,), 10))
    model.decoder(src, memory, state)
    for side in ("src", "tgt"):
        dropped = (seen[side] == 0).all(-1).float().mean().item()
        assert 0.3 < dropped < 0.7, side  # 60 tokens per side at p = 0.5
    model.eval()
    memory, state = model.encode(src, torch.full((6,), 10))
    model.decoder(src, memory, state)
    assert not (seen["src"] == 0).all(-1).any() and not (seen["tgt"] == 0).all(-1).any()
