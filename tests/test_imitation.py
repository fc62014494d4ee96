"""Noisy experts, the combination lock, fits and the BC / on-policy separation (docs/theory.md §5)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from experiments import noisy_expert as ne
from shiftbounds import noisy_expert as study
from shiftbounds.imitation import (
    ConstantBetaSchedule,
    LearnerConfig,
    LinearBetaSchedule,
    combination_lock,
    fit_noised,
    fit_plain,
    lock_continue_probability,
    lock_reach_probabilities,
    noisy_expert,
    sample_complexity,
)
from shiftbounds.tabular import expected_return, occupancy


@pytest.mark.parametrize("H, A, eta", [(1, 2, 0.0), (5, 4, 0.3), (12, 3, 0.7)])
def test_lock_exact_reach_probabilities_and_return(H, A, eta):
    lock = combination_lock(H, A, rng=np.random.default_rng(H))
    assert expected_return(lock.mdp, lock.expert) == pytest.approx(1.0)
    noisy = noisy_expert(lock.expert, eta)
    d = occupancy(lock.mdp, noisy)
    np.testing.assert_allclose(d[np.arange(H), np.arange(H)], lock_reach_probabilities(H, A, eta), atol=1e-12)
    assert expected_return(lock.mdp, noisy) == pytest.approx(lock_continue_probability(eta, A) ** H, abs=1e-12)


def test_fit_noised_maximises_the_mixture_likelihood():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n_actions = int(rng.integers(2, 6))
        counts = rng.integers(0, 10, size=n_actions).astype(float)
        eta = float(rng.uniform(0.05, 0.8))
        q = fit_noised(counts, eta, smoothing=0.1)
        p = fit_plain(counts, 0.1)

        def neg_ll(z):
            w = np.exp(z - z.max())
            w /= w.sum()
            return -(p * np.log((1 - eta) * w + eta / n_actions)).sum()

        best = minimize(neg_ll, np.log(p + 1e-3), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000})
        assert neg_ll(np.log(np.maximum(q, 1e-300))) <= best.fun + 1e-7
        assert abs(q.sum() - 1) < 1e-12 and (q >= 0).all()
    np.testing.assert_allclose(fit_noised(np.array([3.0, 1.0]), 0.0), fit_plain(np.array([3.0, 1.0])))
    with pytest.raises(ValueError, match="eta must lie in"):
        fit_noised(np.ones(2), 1.0)


def test_noised_student_removes_noise_from_rollouts():
    """The plain fit of labels of (1-eta) pi* + eta nu is the noisy expert itself; the noised fit
    is (much closer to) the clean expert."""
    eta = 0.3
    counts = np.array([775.0, 75.0, 75.0, 75.0])  # labels in the noisy expert's proportions
    assert fit_plain(counts, 1e-9)[0] == pytest.approx(0.775, abs=1e-6)
    assert fit_noised(counts, eta, 1e-9)[0] == pytest.approx(1.0, abs=1e-6)


def test_beta_schedules():
    s = LinearBetaSchedule(4)
    assert [s(i) for i in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert ConstantBetaSchedule(0.3)(7) == 0.3
    with pytest.raises(ValueError, match="rampdown_rounds must be >= 1"):
        LinearBetaSchedule(0)
    with pytest.raises(ValueError, match="beta must lie in"):
        ConstantBetaSchedule(2.0)
    with pytest.raises(ValueError, match="learner must be one of"):
        LearnerConfig("ppo")


def _median_episodes(cfg: LearnerConfig, H: int, eta: float, seeds: int = 16) -> float:
    out = []
    for k in range(seeds):
        rng = np.random.default_rng([k, H, 99])
        lock = combination_lock(H, 4, rng=rng)
        out.append(sample_complexity(lock.mdp, lock.expert, eta, cfg, target=0.5, budget=4096, rng=rng).episodes)
    return float(np.median(out))


def test_separation_bc_needs_far_more_than_nail_on_the_lock():
    """GIVEN the lock with H = 20, A = 4, eta = 0.3 WHEN BC and NAIL run on 16 fixed seeds THEN BC's
    median trajectory count is at least 5x NAIL's median episode count (measured: 165.5 vs 29)."""
    bc = _median_episodes(LearnerConfig("bc"), 20, 0.3)
    nail = _median_episodes(LearnerConfig("nail"), 20, 0.3)
    assert bc >= 5 * nail, (bc, nail)


def test_bc_is_horizon_free_without_noise():
    assert _median_episodes(LearnerConfig("bc"), 4, 0.0, 8) == _median_episodes(LearnerConfig("bc"), 20, 0.0, 8) == 1.0


def test_smoke_entry_point(tmp_path):
    res = ne.main(["--preset", "smoke", "--out-dir", str(tmp_path / "ne")])
    for name in ("results.md", "sample_complexity.csv", "growth.csv", "crossover.csv", "results.json",
                 "noisy_expert.png", "noisy_expert.pdf"):
        assert (tmp_path / "ne" / name).exists()
    assert {r["method"] for r in res["rows"]} == {"bc", "nail", "opd"}
    assert {(r["eta"], r["online"]) for r in res["crossover"]} == {(0.1, "nail"), (0.3, "nail")}
    assert {r["range"] for r in res["growth"]} == {"fit (H <= 6)", "all finite"}
    with pytest.raises(SystemExit):
        ne.main(["--methods", "bc,sorcery"])
    with pytest.raises(SystemExit):
        ne.main(["--horizons", "4,8", "--fit-max-h", "4"])


def test_chain_stops_after_a_censored_median_and_resumes(tmp_path):
    """GIVEN a budget of one episode, which OPD cannot meet on the noisy lock WHEN a chain runs THEN
    only its first horizon is run (all over budget), the larger ones are recorded as not run and
    count as over budget, and a second call loads the saved chain instead of recomputing it."""
    cfg = study.NoisyExpertConfig(horizons=(4, 6, 8), fit_max_h=6, etas=(0.3,), methods=("opd",), seeds=3, budget=1,
                               out_dir=str(tmp_path))
    chain = study.run_chain(cfg, "lock", 0.3, "opd")
    assert chain["4"] == [np.inf] * 3 and chain["6"] is None and chain["8"] is None
    assert np.isinf(study.per_seed(chain, 8, 3)).all()
    saved = list((tmp_path / "chains").glob("*.json"))
    assert len(saved) == 1
    saved[0].write_text(saved[0].read_text().replace("null", "[1, 1, 1]", 1))
    assert study.run_chain(cfg, "lock", 0.3, "opd")["6"] == [1, 1, 1]  # loaded, not recomputed


def test_rollout_draws_trajectories_with_their_exact_probabilities():
    """GIVEN the noisy expert on a 3-step lock WHEN 20,000 trajectories are drawn THEN the share of
    trajectories that stay on the lock at each step matches the exact reach probabilities within
    four binomial standard errors, and no action of zero probability is ever drawn."""
    from shiftbounds.imitation import Sampler, draw

    H, A, eta, n = 3, 4, 0.4, 20_000
    lock = combination_lock(H, A, rng=np.random.default_rng(1))
    sampler, noisy = Sampler.of(lock.mdp), noisy_expert(lock.expert, eta)
    rng = np.random.default_rng(2)
    on_lock = np.array([sampler.rollout(noisy, rng=rng)[0] == np.arange(H) for _ in range(n)]).mean(0)
    p = lock_reach_probabilities(H, A, eta)
    assert np.all(np.abs(on_lock - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-12), (on_lock, p)
    probs = np.array([0.0, 0.5, 0.0, 0.5])
    assert set(draw(np.cumsum(probs)[None].repeat(1000, 0), rng.random(1000)).tolist()) <= {1, 3}
    assert draw(np.cumsum(probs), np.array(0.0)) == 1 and draw(np.cumsum(probs), np.array(0.999999)) == 3


def test_bc_count_is_the_first_episode_that_reaches_the_target():
    """GIVEN one stream of noisy-expert trajectories WHEN BC's sample complexity is measured THEN it
    is the first n (not the next power of two) at which the greedy BC student of the first n
    trajectories reaches the target, recomputed here independently from the same stream."""
    from shiftbounds.imitation import fit_plain, rollout
    from shiftbounds.tabular import greedy_policy

    H, A, eta, target = 8, 4, 0.3, 0.5
    for k in range(6):
        lock = combination_lock(H, A, rng=np.random.default_rng([k, 7]))
        cfg = LearnerConfig("bc")
        got = sample_complexity(lock.mdp, lock.expert, eta, cfg, target=target, budget=512,
                                rng=np.random.default_rng([k, 8])).episodes
        rng, noisy = np.random.default_rng([k, 8]), noisy_expert(lock.expert, eta)
        counts, want = np.zeros((H, lock.mdp.n_states, A)), float("inf")
        for n in range(1, 513):
            s, a = rollout(lock.mdp, noisy, rng=rng)
            counts[np.arange(H), s, a] += 1
            if 1.0 - float(expected_return(lock.mdp, greedy_policy(fit_plain(counts, cfg.smoothing)))) <= target:
                want = n
                break
        assert got == want
