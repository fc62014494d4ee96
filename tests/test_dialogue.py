"""The tabular dialogue tasks: summary equivalence, user models, logs, calibration, paradigms."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from shiftbounds.dialogue.exact.agents import behaviour_cloning
from shiftbounds.dialogue.exact.calibration import fit_count_model, fit_shared_model
from shiftbounds.dialogue.exact.paradigms import logged_contexts, static_context_rl
from shiftbounds.dialogue.exact.study import logged_paradigms, prompted_paradigm, reference_results
from shiftbounds.dialogue.logs import read_jsonl, split, write_jsonl
from shiftbounds.dialogue.prepare import data_policy, make_task, prepare_task, sample_logs
from shiftbounds.dialogue.summary import DONE, build_space, next_state, posterior, success_rewards, user_mdp
from shiftbounds.dialogue.tasks import (
    ACCEPT,
    QUIT,
    UserModel,
    answer_act,
    booking,
    guess_number,
    judge_reward,
    memory_user,
    prompted_simulator,
    real_user,
)
from shiftbounds.shift import kernel_error
from shiftbounds.tabular import expected_return, occupancy, optimal_policy

TINY = {
    "guess3": lambda src: guess_number(3, horizon=3, reward_source=src),
    "book2": lambda src: booking(slots=(("day", "sat", "sun"), ("time", "am", "pm")), horizon=3, reward_source=src),
}


def generative_return(task, model: UserModel, policy: np.ndarray, space) -> float:
    """Ground truth: draw the goal first, then enumerate every act of agent and user turn by turn
    (the history process itself; the summary only indexes the policy), scoring with the task's
    reward source."""
    pen = task.wrong_penalty

    @cache
    def value(goal: int, s: int, t: int, history: tuple) -> float:
        if t == task.horizon or s == 0:
            return 0.0
        total = 0.0
        for a in range(task.n_actions):
            if policy[t, s, a] == 0:
                continue
            p_act = model.reply(task, history, a, goal)  # read off the raw history, not the summary
            if task.is_question(a):
                r = 0.0
            elif task.reward_source == "judge":
                r = judge_reward(task, a, goal)
            else:
                r = p_act[ACCEPT] * (1 + pen) - pen
            cont = 0.0
            if t + 1 < task.horizon:
                for k in np.flatnonzero(p_act):
                    s2 = next_state(task, space.states[s], a, int(k))
                    cont += p_act[k] * value(goal, space.index[s2], t + 1, history + ((a, int(k)),))
            total += policy[t, s, a] * (r + cont)
        return total

    return float(sum(task.prior[x] * value(x, 1, 0, ()) for x in range(task.n_goals)))


USERS = {
    "real": lambda task: real_user(task),
    "prompted": lambda task: prompted_simulator(0.4, 0.3, clarify=0.1, answer_error=0.1),
    "memory": lambda task: memory_user(task),
    "consistent": lambda task: real_user(task, answer_error=0.2, consistent=True),
    "impatient-leaky": lambda task: UserModel(answer_error=0.15, clarify=0.1, leak=0.2, patience=0.4, clarify_growth=1.0),
}


@pytest.mark.parametrize("name", list(TINY))
@pytest.mark.parametrize("source", ["judge", "acceptance"])
@pytest.mark.parametrize("model_name", list(USERS))
@pytest.mark.parametrize("memory", [False, True])
def test_summary_mdp_equals_history_process(name, source, model_name, memory):
    """GIVEN a tiny task and a user model, memoryless or history-dependent, WHEN a random summary
    policy is evaluated on the summary MDP and on the goal-first generative process THEN the returns
    agree to 1e-10 (the summary is sufficient); a memory user on a space without memory is refused."""
    task = TINY[name](source)
    model = USERS[model_name](task)
    space = build_space(task, memory=memory)
    if model.has_memory and not memory:
        with pytest.raises(ValueError, match="has memory"):
            user_mdp(space, model)
        return
    rng = np.random.default_rng(0)
    pi = rng.dirichlet(np.ones(task.n_actions), size=(task.horizon, space.n_states))
    assert abs(expected_return(user_mdp(space, model), pi) - generative_return(task, model, pi, space)) < 1e-10


def test_memory_user_replies():
    """A consistent user repeats its first answer (error included); an impatient one quits at repeats
    with 1 - (1 - patience)^r; clarification grows with the turn; a memoryless user ignores all three."""
    task = guess_number(4, horizon=4)
    m = memory_user(task, patience=0.5, clarify_growth=1.0)
    truth = int(task.answers[1, 0])
    p = m.response(task, 1, 0, turn=2, previous=1 - truth, repeats=1)  # second repeat, earlier answer wrong
    stay = 0.25
    assert p[QUIT] == pytest.approx(1 - stay)
    assert p[answer_act(1 - truth)] == pytest.approx(stay * (1 - m.clarify_rate(1, 2)))
    assert p[answer_act(truth)] == 0.0
    assert m.clarify_rate(1, 2) == pytest.approx(3 * m.clarify_rate(1, 0))
    plain = real_user(task)
    np.testing.assert_array_equal(plain.response(task, 1, 0, turn=2, previous=1, repeats=3), plain.response(task, 1, 0))
    with pytest.raises(ValueError, match="patience must lie in \\[0, 1\\]; got 1.5"):
        UserModel(patience=1.5)
    with pytest.raises(ValueError, match="clarify_growth must be >= 0"):
        UserModel(clarify_growth=-1.0)


def test_posterior_is_bayes_rule():
    task = guess_number(4, horizon=3)
    space = build_space(task)
    model = UserModel(answer_error=0.2, clarify=0.1)
    s = next_state(task, space.states[1], 1, 0)  # asked ">=2", answered "yes"
    b = posterior(space, model)[space.index[s]]
    lik = np.array([0.2, 0.2, 0.8, 0.8])
    np.testing.assert_allclose(b, lik / lik.sum(), atol=1e-12)


@pytest.mark.parametrize("name, H", [("guess_number", 4), ("booking", 4)])
def test_optimal_real_policy_asks_questions(name, H):
    """Asking must be worth something (PIPELINE design notes): the optimal policy asks, and beats
    the best policy that never asks."""
    prep = prepare_task(make_task(name, H))
    pi = optimal_policy(prep.real_mdp)
    Q = prep.task.n_questions
    questions = (occupancy(prep.real_mdp, pi)[..., None] * pi)[..., :Q].sum()
    assert questions > 1.0
    no_ask = prep.real_mdp.with_rewards(np.where(np.arange(prep.task.n_actions) < Q, -10.0, prep.real_mdp.rewards))
    assert expected_return(prep.real_mdp, optimal_policy(no_ask)) < expected_return(prep.real_mdp, pi) - 0.1


def test_user_model_validation_and_probabilities():
    task = booking(horizon=3)
    m = prompted_simulator(0.3, 0.2)
    for a in range(task.n_actions):
        for x in range(task.n_goals):
            p = m.response(task, a, x)
            assert abs(p.sum() - 1) < 1e-12 and (p >= 0).all()
    with pytest.raises(ValueError, match="accept_wrong must lie in \\[0, 1\\]; got 1.5"):
        UserModel(accept_wrong=1.5)
    with pytest.raises(ValueError, match="answer_error must be < 0.5"):
        UserModel(answer_error=0.5)
    with pytest.raises(ValueError, match="clarify must lie in \\[0, 1 - leak\\]"):
        UserModel(clarify=0.9, leak=0.2)
    with pytest.raises(ValueError, match="reward_source must be one of"):
        guess_number(reward_source="vibes")
    real = real_user(task)
    assert real.leak == 0 and real.accept_wrong == 0 and len(set(real.clarify)) > 1


def test_logs_match_exact_return_and_roundtrip(tmp_path):
    prep = prepare_task(make_task("guess_number", 4, reward_source="judge"))
    logs = sample_logs(prep, 3000, rng=np.random.default_rng(1))
    returns = np.array([sum(d.rewards) for d in logs])
    exact = expected_return(prep.real_mdp, prep.data_policy)
    assert abs(returns.mean() - exact) < 4 * returns.std() / np.sqrt(len(logs))
    path = write_jsonl(tmp_path / "logs.jsonl", prep.task, logs[:50])
    back = read_jsonl(path, prep.space)
    assert back == logs[:50]
    train, held = split(logs[:50], 0.2, rng=np.random.default_rng(0))
    assert len(train) == 40 and len(held) == 10


@pytest.mark.parametrize(
    "line, match",
    [
        ('{"task": "booking", "goal": "0", "turns": []}', "task 'booking' does not match"),
        ('{"task": "guess_number", "goal": "9", "turns": []}', "goal '9' is not one of"),
        ('{"task": "guess_number", "goal": "1", "turns": [{"agent": "dance", "user": "yes"}]}', "unknown acts agent='dance'"),
        ('{"task": "guess_number", "goal": "1", "turns": [{"agent": "ask:>=1", "user": "accept"}]}', "impossible after"),
        ("{oops", "not valid JSON"),
    ],
    ids=["task", "goal", "act", "impossible", "json"],
)
def test_read_jsonl_names_bad_records(tmp_path, line, match):
    space = build_space(guess_number(horizon=3))
    p = tmp_path / "bad.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(ValueError, match=match):
        read_jsonl(p, space)


def test_shared_model_recovers_rates_and_count_model_improves_with_n():
    prep = prepare_task(make_task("guess_number", 4))
    big = sample_logs(prep, 4000, rng=np.random.default_rng(2))
    fit = fit_shared_model(prep.space, big)
    assert abs(fit.answer_error - prep.real.answer_error) < 0.02
    assert fit.accept_wrong < 0.01 and fit.leak < 0.01
    d_logs = occupancy(prep.real_mdp, prep.data_policy)
    errs = []
    for n in (30, 3000):
        cm = fit_count_model(prep.space, sample_logs(prep, n, rng=np.random.default_rng(n)))
        errs.append(kernel_error(prep.real_mdp, cm, d_logs, prep.data_policy).sum())
    assert errs[1] < errs[0] / 3


def test_static_context_rl_changes_only_logged_contexts():
    prep = prepare_task(make_task("booking", 3))
    logs = sample_logs(prep, 40, rng=np.random.default_rng(3))
    sft = behaviour_cloning(prep.space, logs)
    seen = logged_contexts(prep.space, logs)
    for variant in ("myopic", "one_step"):
        pi = static_context_rl(prep.space, logs, sft, variant)
        np.testing.assert_array_equal(pi[~seen], sft[~seen])
        assert np.isin(pi[seen], (0.0, 1.0)).all()
    with pytest.raises(ValueError, match="variant must be"):
        static_context_rl(prep.space, logs, sft, "greedy")


def test_paradigm_measurements_respect_bounds_and_sycophancy_hacks():
    prep = prepare_task(make_task("guess_number", 4))
    res = logged_paradigms(prep, sample_logs(prep, 100, rng=np.random.default_rng(4)))
    res["interactive"] = prompted_paradigm(prep, 0.8, 0.0)
    for name, r in res.items():
        assert (np.array(r["Delta"]) <= np.array(r["B_eps"]) + 1e-9).all(), name
        if "D" in r:
            assert (np.array(r["D"]) <= np.array(r["B_delta"]) + 1e-9).all(), name
            assert abs(r["train_gap"]) <= r["theorem2_rhs"] + 1e-9, name
    # a sycophantic simulator overstates the return (reward hacking shows as a positive gap)
    assert res["interactive"]["J_train"] - res["interactive"]["J_real"] > 0.1
    assert abs(res["calibrated-shared"]["train_gap"]) < res["interactive"]["train_gap"]


def test_data_policy_and_success_rewards():
    space = build_space(booking(horizon=3))
    pi = data_policy(space)
    np.testing.assert_allclose(pi.sum(-1), 1.0)
    with pytest.raises(ValueError, match="noise"):
        data_policy(space, noise=2.0)
    assert success_rewards(space, real_user(space.task))[0].sum() == 0.0
    assert space.states[0] == DONE


def test_log_linear_fit_recovers_its_weights():
    """GIVEN act counts drawn in expectation from a log-linear policy over the study's act features
    WHEN the weights are fitted by maximum likelihood THEN they are recovered (the fit is exact up
    to its small L2 penalty)."""
    from shiftbounds.dialogue.exact.agents import ACT_FEATURES, act_features, fit_log_linear, log_linear_policy

    prep = prepare_task(make_task("guess_number", 3))  # with memory: "answered already" is a feature of its own
    F = act_features(prep.space)
    assert F.shape == (3, prep.space.n_states, prep.task.n_actions, len(ACT_FEATURES))
    w = np.array([0.3, 1.0, 0.5, -0.7, 2.0, 0.8, 1.5, 1.0])
    counts = 1e5 * log_linear_policy(F, w)
    np.testing.assert_allclose(fit_log_linear(F, counts, l2=1e-9), w, atol=1e-3)


def test_shared_behaviour_cloning_acts_like_the_logs_where_counts_cannot():
    """GIVEN 20 logged dialogues WHEN the shared-parameter SFT model is fitted THEN its return is
    within 0.06 of pi_data's while the count model (uniform where it saw nothing) is far below;
    both are distributions, and where the logs are plentiful the shared model follows the counts."""
    from shiftbounds.dialogue.exact.agents import shared_behaviour_cloning
    from shiftbounds.dialogue.exact.study import evaluate

    prep = prepare_task(make_task("guess_number", 4))
    logs = sample_logs(prep, 20, rng=np.random.default_rng(7))
    shared, count = shared_behaviour_cloning(prep.space, logs), behaviour_cloning(prep.space, logs)
    np.testing.assert_allclose(shared.sum(-1), 1.0)
    J = {k: evaluate(prep, p)["J_real"] for k, p in (("shared", shared), ("count", count), ("data", prep.data_policy))}
    assert abs(J["shared"] - J["data"]) < 0.06 and J["count"] < J["data"] - 0.2, J
    many = sample_logs(prep, 3000, rng=np.random.default_rng(8))
    pi = shared_behaviour_cloning(prep.space, many)
    # the start summary is visited by every dialogue: the counts dominate the prior there
    np.testing.assert_allclose(pi[0, 1], prep.data_policy[0, 1], atol=0.03)


def test_fitted_q_acts_within_the_logs_and_improves_on_them():
    """GIVEN logs WHEN fitted Q is solved THEN at every logged context it picks a logged act,
    elsewhere it keeps the SFT policy; without pessimism a single logged dialogue is replayed act by
    act. With plentiful logs it beats one-step improvement even with infinite
    logs (the whole multi-turn return, not one step of it) and stays below the optimum."""
    from shiftbounds.dialogue.exact.paradigms import fitted_q
    from shiftbounds.dialogue.exact.study import evaluate

    prep = prepare_task(make_task("booking", 3))
    logs = sample_logs(prep, 60, rng=np.random.default_rng(9))
    sft = behaviour_cloning(prep.space, logs)
    pi = fitted_q(prep.space, logs, sft)
    seen = logged_contexts(prep.space, logs)
    np.testing.assert_array_equal(pi[~seen], sft[~seen])
    taken = np.zeros_like(pi, dtype=bool)
    for d in logs:
        for t, (s, a) in enumerate(zip(d.states, d.actions)):
            taken[t, s, a] = True
    assert (pi[seen] > 0.5).sum() == seen.sum() and taken[seen][pi[seen] > 0.5].all()
    one = logs[:1]
    replay = fitted_q(prep.space, one, sft, pessimism=0.0)
    for t, (s, a) in enumerate(zip(one[0].states, one[0].actions)):
        assert replay[t, s, a] == 1.0
    gn = prepare_task(make_task("guess_number", 3))
    big = sample_logs(gn, 3000, rng=np.random.default_rng(10))
    J_q = evaluate(gn, fitted_q(gn.space, big, behaviour_cloning(gn.space, big)))["J_real"]
    refs = reference_results(gn)
    assert J_q > refs["static-infinite-data"]["J_real"] + 0.05 and J_q <= refs["optimal"]["J_real"] + 1e-12
