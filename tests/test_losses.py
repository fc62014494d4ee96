"""Pure losses against direct formulas, exact endpoints, masks, and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from shiftbounds.losses import (
    distillation_loss,
    entropy,
    forward_kl,
    group_advantages,
    mixed_kl,
    nll,
    noised_log_probs,
    policy_gradient_loss,
    returns_to_go,
    reverse_kl,
    selective_log_softmax,
    token_log_probs,
)

torch.manual_seed(0)


def _logp(*shape):
    return torch.log_softmax(torch.randn(*shape, dtype=torch.float64), -1)


def test_selective_log_softmax_equals_naive():
    logits = torch.randn(3, 5, 7, dtype=torch.float64)
    idx = torch.randint(7, (3, 5))
    naive = torch.log_softmax(logits, -1).gather(-1, idx[..., None])[..., 0]
    torch.testing.assert_close(selective_log_softmax(logits, idx), naive)


def test_kl_directions_match_direct_formula():
    t, s = _logp(4, 6), _logp(4, 6)
    direct_f = (t.exp() * (t - s)).sum(-1).mean()
    direct_r = (s.exp() * (s - t)).sum(-1).mean()
    torch.testing.assert_close(forward_kl(t, s), direct_f)
    torch.testing.assert_close(reverse_kl(t, s), direct_r)
    torch.testing.assert_close(mixed_kl(t, s, 0.0), direct_f)
    torch.testing.assert_close(mixed_kl(t, s, 1.0), direct_r)
    torch.testing.assert_close(mixed_kl(t, s, 0.25), 0.75 * direct_f + 0.25 * direct_r)
    assert forward_kl(t, t).abs() < 1e-15 and reverse_kl(s, s).abs() < 1e-15


def test_kl_handles_zero_teacher_mass():
    t = torch.log(torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    s = torch.log(torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    assert forward_kl(t, s).item() == pytest.approx(math.log(2))
    assert torch.isposinf(reverse_kl(t, s))  # the student puts mass where the teacher has none


def test_masks_and_reductions():
    t, s = _logp(2, 3, 5), _logp(2, 3, 5)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]], dtype=torch.float64)
    per = (t.exp() * (t - s)).sum(-1)
    torch.testing.assert_close(forward_kl(t, s, mask), (per[0, :2]).mean())
    torch.testing.assert_close(forward_kl(t, s, mask, "sum"), per[0, :2].sum())
    assert forward_kl(t, s, torch.zeros(2, 3)).item() == 0.0
    with pytest.raises(ValueError, match="reduction must be one of"):
        forward_kl(t, s, mask, "mean")


def test_noised_log_probs_endpoints_and_formula():
    logits = torch.randn(4, 6, dtype=torch.float64)
    torch.testing.assert_close(noised_log_probs(logits, 0.0), torch.log_softmax(logits, -1))
    torch.testing.assert_close(noised_log_probs(logits, 1.0), torch.full((4, 6), -math.log(6), dtype=torch.float64))
    direct = torch.log(0.7 * torch.softmax(logits, -1) + 0.3 / 6)
    torch.testing.assert_close(noised_log_probs(logits, 0.3), direct)
    with pytest.raises(ValueError, match="eta must lie in"):
        noised_log_probs(logits, 1.2)


def test_forward_and_reverse_share_the_minimiser_over_an_unrestricted_student():
    """Over a free categorical student with one target, F, R and Mixed are all minimised at the
    target: gradient descent on each reaches it (why tabular NAIL-F/R/Mixed coincide)."""
    target = torch.log(torch.tensor([0.6, 0.25, 0.1, 0.05], dtype=torch.float64))
    for div in ("forward", "reverse", "mixed"):
        logits = torch.zeros(4, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([logits], lr=0.1)
        for _ in range(1500):
            opt.zero_grad()
            distillation_loss(target, torch.log_softmax(logits, -1), div, beta=0.5).backward()
            opt.step()
        torch.testing.assert_close(torch.softmax(logits, -1), target.exp(), atol=1e-4, rtol=0)


def test_nll_equals_cross_entropy():
    logits = torch.randn(5, 3, dtype=torch.float64)
    y = torch.randint(3, (5,))
    torch.testing.assert_close(nll(logits, y), torch.nn.functional.cross_entropy(logits, y))


def test_group_advantages_and_policy_gradient():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    adv = group_advantages(r, 3)
    torch.testing.assert_close(adv, torch.tensor([2 / 3, -1 / 3, -1 / 3, -2 / 3, 1 / 3, 1 / 3]))
    with pytest.raises(ValueError, match="cannot be split into groups of 4"):
        group_advantages(r, 4)
    logp = torch.log(torch.tensor([[0.5, 0.5], [0.2, 0.9]], dtype=torch.float64)).requires_grad_()
    out = policy_gradient_loss(logp, torch.tensor([1.0, -1.0], dtype=torch.float64),
                               torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64), kl_coef=0.1,
                               ref_log_probs=logp.detach())
    assert out.kl_estimator == "sampled"
    assert out.kl.item() == pytest.approx(0.0, abs=1e-12)
    torch.testing.assert_close(out.pg, -(logp[0, 0] - logp[1, 0] - logp[1, 1]) / 3)
    out.total.backward()
    assert logp.grad[0, 1] == 0  # masked token gets no gradient
    with pytest.raises(ValueError, match="kl_coef must be >= 0"):
        policy_gradient_loss(logp, torch.zeros(2), torch.ones(2, 2), -1.0, ref_log_probs=logp)
    with pytest.raises(ValueError, match="either ref_log_probs"):
        policy_gradient_loss(logp, torch.zeros(2), torch.ones(2, 2), 0.1)
    with pytest.raises(ValueError, match="either ref_log_probs"):
        policy_gradient_loss(logp, torch.zeros(2), torch.ones(2, 2), 0.1, ref_log_probs=logp, dist=_logp(2, 2, 3))


def test_token_log_probs_shift_is_the_causal_lm_convention():
    logits = torch.randn(2, 5, 7, dtype=torch.float64)
    ids = torch.randint(7, (2, 5))
    naive = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    torch.testing.assert_close(token_log_probs(logits, ids, shift=True), naive)
    half = token_log_probs(logits.to(torch.bfloat16), ids)
    assert half.dtype == torch.float32  # normalised in float32, never in half precision


def test_exact_and_sampled_kl_agree_in_expectation():
    """The k3 estimate averaged over tokens drawn from the policy equals the exact
    KL(pi || pi_ref) (to Monte-Carlo error), and the exact term is the closed form."""
    gen = torch.Generator().manual_seed(1)
    dist = torch.log(torch.tensor([[[0.1, 0.2, 0.3, 0.4]]], dtype=torch.float64))
    ref = torch.log(torch.tensor([[[0.25, 0.25, 0.4, 0.1]]], dtype=torch.float64))
    n = 200_000
    a = torch.multinomial(dist[0, 0].exp(), n, replacement=True, generator=gen)
    lp, rlp = dist[0, 0, a][None], ref[0, 0, a][None]
    adv, mask = torch.zeros(1), torch.ones(1, n, dtype=torch.float64)
    sampled = policy_gradient_loss(lp, adv, mask, 1.0, ref_log_probs=rlp)
    exact = policy_gradient_loss(dist[..., 0], adv, torch.ones(1, 1, dtype=torch.float64), 1.0, dist=dist, ref_dist=ref)
    closed = (dist.exp() * (dist - ref)).sum()
    torch.testing.assert_close(exact.kl, closed)
    assert exact.kl_estimator == "exact" and sampled.kl.item() == pytest.approx(closed.item(), abs=5e-3)
    assert set(exact.parts()) == {"loss", "pg", "kl"}


def test_kl_gradients_stay_finite_with_masked_actions():
    """Regression: GIVEN log-probs with -inf on masked (invalid) actions in both arguments WHEN the
    KL is differentiated THEN no gradient is NaN (0 * inf in the discarded branch used to leak)."""
    logits = torch.tensor([[0.3, -0.2, float("-inf")]], dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.tensor([[0.0, 0.1, float("-inf")]], dtype=torch.float64), -1)
    for fn in (forward_kl, reverse_kl):
        logits.grad = None
        fn(ref, torch.log_softmax(logits, -1)).backward()
        assert torch.isfinite(logits.grad[0, :2]).all() and not torch.isnan(logits.grad).any()


def test_per_position_group_advantages_returns_to_go_and_entropy():
    """Per-position group baselines equal the 1-D baseline applied to each position; returns-to-go
    sum the future; the entropy is log V for a uniform policy and 0 for a deterministic one."""
    g = torch.Generator().manual_seed(0)
    r = torch.rand(6, 3, generator=g, dtype=torch.float64)
    adv = group_advantages(r, 3, normalise=True)
    for t in range(3):
        torch.testing.assert_close(adv[:, t], group_advantages(r[:, t].contiguous(), 3, normalise=True))
    torch.testing.assert_close(returns_to_go(r)[:, 0], r.sum(1))
    torch.testing.assert_close(returns_to_go(r)[:, 2], r[:, 2])
    torch.testing.assert_close(returns_to_go(r)[:, 1], r[:, 1] + r[:, 2])
    uniform = torch.full((2, 3, 5), -torch.log(torch.tensor(5.0, dtype=torch.float64)))
    assert entropy(uniform).item() == pytest.approx(float(torch.log(torch.tensor(5.0))))
    sure = torch.log(torch.tensor([1.0, 1e-300, 1e-300], dtype=torch.float64)).expand(4, 3)
    assert entropy(sure).item() == pytest.approx(0.0, abs=1e-12)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], dtype=torch.float64)  # averaged over masked positions only
    mixed = torch.stack([uniform[0], uniform[1].clone()])
    mixed[1, 1] = torch.log(torch.tensor([1.0] + [1e-300] * 4, dtype=torch.float64))
    assert entropy(mixed, mask).item() == pytest.approx(2 / 3 * float(torch.log(torch.tensor(5.0))))
