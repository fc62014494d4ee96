"""The exact KL-regularised optimum on the history tree: the unregularised limit against the summary
MDP, optimality of the soft policy against other policies, the pi_SFT limit, and agreement of the
tree's policy values with the independent forward enumeration."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shiftbounds.dialogue.exact.references import exact_references
from shiftbounds.dialogue.neural.history import exact_tree
from shiftbounds.dialogue.neural.rollout import ExplicitUser
from shiftbounds.dialogue.neural.soft_optimum import (
    history_tree,
    interaction,
    policy_log_probs,
    soft_optimum,
    soft_static_optimum,
    static_contexts,
)
from shiftbounds.dialogue.neural.tokens import Vocab
from shiftbounds.dialogue.neural.training import ModelConfig
from shiftbounds.dialogue.prepare import make_task, prepare_task
from shiftbounds.dialogue.tasks import prompted_simulator

ACCEPT_WRONG, LEAK = 0.3, 0.2


@pytest.fixture(scope="module")
def setting():
    """guess_number at H = 3 (the main job's users), its tree, the exact references and a random
    transformer as pi_SFT (full support, far from optimal)."""
    task = make_task("guess_number", 3, "acceptance")
    prep = prepare_task(task, "memory")
    vocab = Vocab(task)
    real, prompted = ExplicitUser(task, prep.real), ExplicitUser(task, prompted_simulator(ACCEPT_WRONG, LEAK))
    tree = history_tree(vocab, prep.space, [real, prompted])
    torch.manual_seed(0)
    agent = ModelConfig(32, 1).build(vocab).eval()
    refs = exact_references("guess_number", 3, "acceptance", "memory", ACCEPT_WRONG, LEAK)
    return prep, vocab, tree, real, prompted, agent, policy_log_probs(tree, agent), refs


def test_tree_holds_every_reachable_history(setting):
    prep, vocab, tree, *_ = setting
    assert tree.sizes[0] == 1 and tree.sizes[1] > 1 and tree.sizes[2] > tree.sizes[1]
    assert [t.shape[1] for t in tree.tokens] == [1, 3, 5]
    assert len(set(map(tuple, tree.tokens[2].tolist()))) == tree.sizes[2]  # each history once


def test_unregularised_limit_is_the_summary_mdp_optimum(setting):
    """GIVEN beta = 0 WHEN the backup runs on the history tree THEN each arm's optimum equals the
    summary MDP's exact optimum of that objective (an independent computation)."""
    prep, vocab, tree, real, prompted, _, ref_logp, refs = setting
    opt = refs["objective_optimum"]
    assert soft_optimum(interaction(tree, prompted), ref_logp, 0.0).objective == pytest.approx(opt["interactive"], abs=1e-12)
    assert soft_optimum(interaction(tree, real), ref_logp, 0.0).objective == pytest.approx(opt["oracle"], abs=1e-12)
    assert soft_optimum(interaction(tree, real, "judge"), ref_logp, 0.0).objective == pytest.approx(refs["optimal"], abs=1e-12)
    static = static_contexts(tree, real, prep.data_policy)
    assert soft_static_optimum(static, ref_logp, 0.0).objective == pytest.approx(opt["static_myopic"], abs=1e-12)


@settings(max_examples=12, deadline=None)
@given(beta=st.floats(0.01, 2.0), other=st.floats(0.0, 3.0), user=st.sampled_from(["real", "prompted"]))
@example(beta=0.05, other=0.0, user="prompted")
@example(beta=0.0625, other=1e-38, user="prompted")  # Q / beta would overflow unshifted
def test_soft_policy_maximises_the_regularised_objective(setting, beta, other, user):
    """GIVEN a KL weight beta WHEN the soft-optimal policy and other policies (pi_SFT itself, the
    greedy optimum, the soft optimum of another beta) are scored by J - beta KL THEN none beats the
    soft optimum, its regularised value lies between J(pi_SFT) and the unregularised optimum, and
    the KL cost is non-negative."""
    prep, vocab, tree, real, prompted, _, ref_logp, _ = setting
    view = interaction(tree, real if user == "real" else prompted)
    best = soft_optimum(view, ref_logp, beta)
    score = lambda lp: view.value(lp) - beta * view.kl(lp, ref_logp)  # noqa: E731
    for lp in (ref_logp, soft_optimum(view, ref_logp, 0.0).log_policy, soft_optimum(view, ref_logp, other).log_policy):
        assert score(lp) <= best.regularised + 1e-10
    greedy = soft_optimum(view, ref_logp, 0.0).objective
    assert view.value(ref_logp) - 1e-10 <= best.regularised <= best.objective <= greedy + 1e-10
    assert best.kl >= 0 and view.kl(ref_logp, ref_logp) == pytest.approx(0.0, abs=1e-12)


def test_large_beta_stays_at_the_reference(setting):
    prep, vocab, tree, real, prompted, _, ref_logp, _ = setting
    view = interaction(tree, prompted)
    far = soft_optimum(view, ref_logp, 1e6)
    assert far.objective == pytest.approx(view.value(ref_logp), abs=1e-5) and far.kl < 1e-9
    static = static_contexts(tree, real, prep.data_policy)
    assert soft_static_optimum(static, ref_logp, 1e6).objective == pytest.approx(static.value(ref_logp), abs=1e-5)


def test_policy_value_agrees_with_the_forward_enumeration(setting):
    """The backward value of the agent's own policy under the judge equals ``exact_tree``'s forward J."""
    prep, vocab, tree, real, prompted, agent, ref_logp, _ = setting
    for user in (real, prompted):
        assert interaction(tree, user, "judge").value(ref_logp) == pytest.approx(exact_tree(vocab, prep.space, agent, user)["J"], abs=1e-9)


def test_static_soft_optimum_is_per_context(setting):
    """The myopic soft optimum beats pi_SFT and the greedy policy on J_static - beta KL at pi_data's contexts."""
    prep, vocab, tree, real, _, _, ref_logp, _ = setting
    static = static_contexts(tree, real, prep.data_policy)
    best = soft_static_optimum(static, ref_logp, 0.05)
    for lp in (ref_logp, soft_static_optimum(static, ref_logp, 0.0).log_policy):
        assert static.value(lp) - 0.05 * static.kl(lp, ref_logp) <= best.regularised + 1e-12
    assert sum(m.sum() for m in static.mass) > 1.0  # more than one alive turn per dialogue on average


def test_bad_input_is_named(setting):
    prep, vocab, tree, real, _, _, ref_logp, _ = setting
    with pytest.raises(ValueError, match="beta must be >= 0; got -1"):
        soft_optimum(interaction(tree, real), ref_logp, -1.0)
    with pytest.raises(ValueError, match="objective must be one of"):
        interaction(tree, real, "bleu")
    assert np.isfinite(soft_optimum(interaction(tree, real), ref_logp, 1e-8).objective)
