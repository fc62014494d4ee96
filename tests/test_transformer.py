"""The transformer: cache equals full recomputation; validation; save/load."""

from __future__ import annotations

import pytest
import torch

from shiftbounds.nn.generate import generate, sample_tokens
from shiftbounds.nn.transformer import Transformer, TransformerConfig, empty_cache, load_model, save_model


def _model(**kw):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=11, max_len=32, **kw)).double().eval()


def test_cached_forward_equals_full_forward():
    m = _model()
    x = torch.randint(11, (3, 10))
    full, _ = m(x)
    logits, cache = m(x[:, :4])
    steps = [logits]
    for t in range(4, 10):
        out, cache = m(x[:, t:t + 1], cache)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), full)
    # a multi-token block after a cache is causal within the block
    l1, c1 = m(x[:, :3])
    l2, _ = m(x[:, 3:8], c1)
    torch.testing.assert_close(l2, full[:, 3:8])


def test_greedy_generation_equals_recomputing_without_cache():
    m = _model()
    prompt = torch.randint(11, (4, 5))
    g = generate(m, prompt, 6, temperature=0.0)
    seq = prompt
    for _ in range(6):
        nxt = m(seq)[0][:, -1].argmax(-1)
        seq = torch.cat([seq, nxt[:, None]], 1)
    torch.testing.assert_close(g.tokens, seq[:, 5:])


def test_validation_and_checkpoints(tmp_path):
    with pytest.raises(ValueError, match="n_head \\(3\\) must divide d_model \\(64\\)"):
        TransformerConfig(vocab_size=5, max_len=8, n_head=3)
    m = _model()
    with pytest.raises(ValueError, match="exceeds max_len=32"):
        m(torch.zeros(1, 33, dtype=torch.long))
    save_model(m, tmp_path / "m.pt")
    m2 = load_model(tmp_path / "m.pt").double()
    x = torch.randint(11, (2, 7))
    torch.testing.assert_close(m(x)[0], m2(x)[0])
    (tmp_path / "bad.pt").write_text("nope")
    with pytest.raises(ValueError, match="does not hold a shiftbounds Transformer"):
        load_model(tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sample_tokens(torch.zeros(1, 3), -1.0, None)
    assert empty_cache(m) == [None, None]
    with pytest.raises(ValueError, match="no classification head"):
        m.classify(x)
    c = Transformer(TransformerConfig(vocab_size=5, max_len=8, n_classes=2))
    assert c.classify(torch.zeros(3, 4, dtype=torch.long)).shape == (3, 2)
