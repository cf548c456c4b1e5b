"""The decoder follows equations 1-5 of Bahdanau et al. (2015): step i scores with s_{i-1}; c_i feeds cell and output."""

from __future__ import annotations

import pytest
import torch
from support import TINY_MODEL, compose_config

from nmt.config.checks import check_train
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq
from nmt.system.errors import UserError


def tiny_model(extra: list[str] | None = None) -> Seq2Seq:
    torch.manual_seed(0)
    cfg = compose_config(TINY_MODEL + (extra or []))
    return build_model(cfg.model, 30, 30).eval()


def record_queries_and_states(model: Seq2Seq, src: torch.Tensor, lens: torch.Tensor, tgt: torch.Tensor) -> tuple[list, list, torch.Tensor]:
    """Run teacher forcing; return the attention queries, the cell's output states, and s_0."""
    queries, states = [], []
    h1 = model.decoder.attention.register_forward_pre_hook(lambda m, args: queries.append(args[0].clone()))
    h2 = model.decoder.cell.register_forward_hook(lambda m, args, out: states.append(out[0].clone()))
    with torch.no_grad():
        _, s0 = model.encode(src, lens)
        model(src, lens, tgt)
    h1.remove()
    h2.remove()
    return queries, states, s0[0]


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    return src, torch.tensor([4, 3]), torch.tensor([[2, 10, 11, 12], [2, 13, 14, 0]])


def test_step_i_scores_with_the_previous_state() -> None:
    model = tiny_model()
    queries, states, s0 = record_queries_and_states(model, *batch())
    assert len(queries) == len(states) == 4
    torch.testing.assert_close(queries[0], s0)  # e_1j = a(s_0, h_j)
    for i in range(1, 4):
        torch.testing.assert_close(queries[i], states[i - 1])  # e_ij = a(s_{i-1}, h_j)
        assert not torch.allclose(queries[i], states[i])


def test_luong_ordering_is_an_explicit_option() -> None:
    model = tiny_model(["model.attention.attend_from=current"])
    queries, states, _ = record_queries_and_states(model, *batch())
    for i in range(4):
        torch.testing.assert_close(queries[i], states[i])  # e_ij = a(s_i, h_j)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_hoisted_decoder_equals_a_plain_reference_of_equations_1_to_5(cell: str) -> None:
    """The optimised loop gives the same logits as torch's own cell on [E y_{i-1}; c_i] step by step."""
    model = tiny_model([f"model.decoder.cell={cell}", f"model.encoder.cell={cell}"])
    dec = model.decoder
    src, lens, tgt = batch()
    ref_cell = (torch.nn.GRUCell if cell == "gru" else torch.nn.LSTMCell)(32 + 64, 64)
    with torch.no_grad():
        ref_cell.weight_ih.copy_(torch.cat([dec.embed_gates.weight, dec.context_gates.weight], 1))
        ref_cell.bias_ih.copy_(dec.embed_gates.bias)
        ref_cell.weight_hh.copy_(dec.cell.hidden.weight)
        ref_cell.bias_hh.copy_(dec.cell.hidden.bias)
        memory, state = model.encode(src, lens)
        h = memory.values
        ref_logits = []
        for i in range(tgt.size(1)):
            emb = dec.embedding(tgt[:, i])
            s_prev = state[0]
            e = dec.attention.score(s_prev, memory.keys).masked_fill(~memory.mask, float("-inf"))  # (5)
            alpha = torch.softmax(e, -1)  # (4)
            c = (alpha.unsqueeze(2) * h).sum(1)  # (3)
            x = torch.cat([emb, c], -1)
            state = (ref_cell(x, s_prev),) if cell == "gru" else ref_cell(x, state)  # (2)
            t = torch.tanh(dec.readout(torch.cat([state[0], emb, c], -1)))  # (1)
            ref_logits.append(dec.generator(t))
        logits = model(src, lens, tgt).logits
    torch.testing.assert_close(logits, torch.stack(ref_logits, 1), atol=1e-5, rtol=1e-5)


def test_padding_gets_zero_weight_and_rows_sum_to_one_in_the_model() -> None:
    model = tiny_model()
    src, lens, tgt = batch()
    with torch.no_grad():
        alphas = model(src, lens, tgt).alphas
    assert alphas.shape == (2, 4, 4)
    torch.testing.assert_close(alphas.sum(-1), torch.ones(2, 4))
    assert torch.all(alphas[1, :, 3] == 0)


def test_additive_keys_are_projected_once_per_sentence() -> None:
    model = tiny_model()
    calls = []
    model.decoder.attention.score.W2.register_forward_hook(lambda *a: calls.append(1))
    src, lens, tgt = batch()
    with torch.no_grad():
        model(src, lens, tgt)
    assert len(calls) == 1


def test_tied_source_embeddings_are_one_matrix_for_encoder_decoder_and_output() -> None:
    """model.tie_source_embeddings: the encoder reads the very matrix the decoder reads and the output
    layer projects with; a gradient through either side reaches it, and it is counted once."""
    tied, untied = tiny_model(), tiny_model(["model.tie_source_embeddings=false"])  # tied: the default
    assert tied.src_embedding.weight is tied.decoder.embedding.weight is tied.decoder.generator.weight
    assert untied.src_embedding.weight is not untied.decoder.embedding.weight
    vocab, size = 30, 32
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters()) == vocab * size
    src, lens, _ = batch()
    states, _ = tied.encoder(tied.src_embedding(src), lens)
    states.sum().backward()
    grad = tied.decoder.embedding.weight.grad
    assert grad is not None and grad[5:10].abs().sum() > 0 and grad[10:].abs().sum() == 0  # the source ids' rows only


@pytest.mark.parametrize("tie", ["true", "false"])
def test_init_range_draws_every_weight_but_the_embeddings_uniformly(tie: str) -> None:
    """model.init_range=r: each non-embedding parameter lies in [-r, r] and fills it (a uniform's
    max |x| over thousands of draws is near r); the embeddings keep make_embedding's scale; 0 leaves
    torch's per-layer initialisation, which the same seed reproduces."""
    ties = [f"model.tie_target_embeddings={tie}"]
    torch_init = [*ties, "model.init_range=0"]
    drawn, torch_default, again = tiny_model([*ties, "model.init_range=0.3"]), tiny_model(torch_init), tiny_model(torch_init)
    embeddings = {id(drawn.src_embedding.weight), id(drawn.decoder.embedding.weight)}
    for (name, param), (_, before) in zip(drawn.named_parameters(), torch_default.named_parameters(), strict=True):
        if id(param) in embeddings:
            assert torch.equal(param, before), name  # same seed, same draws: untouched
        else:
            assert param.abs().max() <= 0.3, name
            if param.numel() >= 256:
                assert param.abs().max() > 0.29 and abs(param.mean()) < 0.03, name
    pairs = zip(drawn.named_parameters(), torch_default.named_parameters(), strict=True)
    changed = [name for (name, p), (_, q) in pairs if not torch.equal(p, q)]
    assert "decoder.cell.hidden.weight" in changed and "encoder.rnn.weight_hh_l0" in changed
    assert (tie == "false") == ("decoder.generator.weight" in changed)  # tied: the generator is the embedding
    assert all(torch.equal(p, q) for p, q in zip(torch_default.parameters(), again.parameters(), strict=True))


def test_tied_source_embeddings_need_one_vocabulary() -> None:
    refusal = r"tie_source_embeddings=true \(the default\) needs data.joint_vocab=true: .*; add model.tie_source_embeddings=false"
    with pytest.raises(UserError, match=refusal):
        check_train(compose_config(["data.joint_vocab=false"]))
    check_train(compose_config(["data.joint_vocab=false", "model.tie_source_embeddings=false"]))
    with pytest.raises(UserError, match=r"one vocabulary for both sides \(source 30 pieces, target 31\)"):
        build_model(compose_config(TINY_MODEL).model, 30, 31)
