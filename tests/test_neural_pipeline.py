"""The neural view: tokens, rollouts, stages, the exact-vs-neural agreement, and the entry point."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from experiments import full_pipeline as fp
from shiftbounds.dialogue.neural import measures as M
from shiftbounds.dialogue.neural.analysis import verdict_flips
from shiftbounds.dialogue.neural.history import exact_tree
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, seed_setup
from shiftbounds.dialogue.neural.rollout import ExplicitUser, NeuralUser, agent_turn_logits, draw_noise, inverse_cdf, rollout
from shiftbounds.dialogue.neural.tokens import BOS, PAD, Vocab, encode
from shiftbounds.dialogue.neural.training import ModelConfig, RLConfig, SFTConfig, sft, train_agent
from shiftbounds.dialogue.prepare import data_policy, prepare_task, sample_logs
from shiftbounds.dialogue.summary import build_space
from shiftbounds.dialogue.tasks import guess_number, prompted_simulator
from shiftbounds.nn.transformer import perturb_weights
from shiftbounds.utils.cli import parse_config


@pytest.fixture(scope="module")
def tiny():
    """guess_number with 3 numbers and 3 turns, the history-dependent real user; an agent SFT-ed
    briefly on 300 logs."""
    task = guess_number(3, horizon=3, reward_source="acceptance")
    from shiftbounds.dialogue.prepare import PreparedTask
    from shiftbounds.dialogue.summary import success_rewards, user_mdp
    from shiftbounds.dialogue.tasks import memory_user

    space = build_space(task)
    real = memory_user(task)
    prep = PreparedTask(task, space, real, user_mdp(space, real), data_policy(space), success_rewards(space, real))
    vocab = Vocab(task)
    logs = sample_logs(prep, 300, rng=np.random.default_rng(0))
    torch.manual_seed(0)
    agent = sft(vocab, ModelConfig(32, 1).build(vocab), encode(vocab, logs), "agent", SFTConfig(60), torch.Generator().manual_seed(0))
    return prep, vocab, agent


def test_encoding_layout():
    task = guess_number(3, horizon=3)
    prep = prepare_task(task)
    vocab = Vocab(task)
    logs = sample_logs(prep, 20, rng=np.random.default_rng(1))
    d = encode(vocab, logs)
    assert d["agent_view"].shape == (20, 7) and d["user_view"].shape == (20, 8)
    assert (d["agent_view"][:, 0] == BOS).all() and (d["user_view"][:, 1] == BOS).all()
    assert (d["user_view"][:, 0] == d["goals"] + vocab.goal_offset).all()
    ended = d["turn_mask"] == 0
    assert (d["agent_view"][:, 1::2][ended] == PAD).all()
    assert len(vocab.names()) == vocab.size
    valid = vocab.valid_user_acts()
    assert valid.sum(1).min() >= 2


def test_rollout_records_exact_distributions(tiny):
    prep, vocab, agent = tiny
    real = ExplicitUser(prep.task, prep.real)
    sim = ExplicitUser(prep.task, prompted_simulator(0.3, 0.2))
    g = torch.Generator().manual_seed(0)
    ro = rollout(vocab, agent, real, torch.randint(3, (64,), generator=g), generator=g)
    torch.testing.assert_close(torch.softmax(agent_turn_logits(vocab, agent, ro.agent_view), -1), ro.agent_probs, atol=1e-5, rtol=0)
    assert ((ro.actions < 0) == (ro.turn_mask == 0)).all()
    # along a simulator's rollout, both recorded reply laws equal the models' replies read off each
    # raw history (the real user is history-dependent: consistency, patience, clarify growth)
    ro_s = rollout(vocab, agent, sim, torch.randint(3, (64,), generator=g), generator=g, real=real)
    for i in range(64):
        history = ()
        for t in range(prep.task.horizon):
            a, k = int(ro_s.actions[i, t]), int(ro_s.acts[i, t])
            if a < 0:
                break
            x = int(ro_s.goals[i])
            np.testing.assert_allclose(ro_s.real_probs[i, t].numpy(), prep.real.reply(prep.task, history, a, x), atol=1e-6)
            np.testing.assert_allclose(ro_s.user_probs[i, t].numpy(), sim.model.reply(prep.task, history, a, x), atol=1e-6)
            history += ((a, k),)
    # real users never accept a wrong proposal: acceptance equals the judge
    torch.testing.assert_close(ro.accept_rewards, ro.judge_rewards)


def _within(estimate: float, exact: float, low: float, high: float, slack: float = 1e-6) -> bool:
    half = max(high - estimate, estimate - low)  # slack: float32 network vs float64 tree
    return abs(estimate - exact) <= 1.5 * half + slack  # ~99.7 % for a normal 95 % interval


def test_neural_estimates_agree_with_exact_tree(tiny):
    """GIVEN a trained transformer agent on a task small enough to enumerate every (goal, history)
    WHEN J_real, eps_t and delta_t are estimated from sampled dialogues THEN each 95 % CI (widened
    to ~99.7 %) contains the exact value from the tree."""
    prep, vocab, agent = tiny
    real = ExplicitUser(prep.task, prep.real)
    sim = ExplicitUser(prep.task, prompted_simulator(0.3, 0.2))
    g = torch.Generator().manual_seed(1)
    est = M.evaluate_agent(vocab, agent, real, draw_noise(prep.task, 6000, g))
    exact_J = exact_tree(vocab, prep.space, agent, real)["J"]
    assert _within(est["J_real"], exact_J, est["J_real_low"], est["J_real_high"]), (est, exact_J)
    logs = encode(vocab, sample_logs(prep, 4000, rng=np.random.default_rng(5)))
    states = M.summaries(prep.space, logs["actions"], logs["acts"])
    eps = M.eps_on_logs(vocab, agent, prep.space, prep.data_policy, logs, states)
    exact_eps = exact_tree(vocab, prep.space, agent, real, data_policy=prep.data_policy, follow="data")["eps"]
    for t in range(3):
        assert _within(eps["mean"][t], exact_eps[t], eps["low"][t], eps["high"][t]), (t, eps, exact_eps)
    n = 20000
    ro = rollout(vocab, agent, sim, torch.randint(3, (n,), generator=g), generator=g, real=real)
    errs = M.simulator_errors(ro, prep.task)
    tree_sim = exact_tree(vocab, prep.space, agent, sim, compare_user=real)
    for key in ("delta", "rho"):
        for t in range(3):
            e = errs[key]
            assert _within(e["mean"][t], tree_sim[key][t], e["low"][t], e["high"][t]), (key, t, e, tree_sim[key])
    # Delta_t (agent vs pi_data contexts, real user) and D_t (real vs simulated contexts, same agent):
    # plug-in TVs of sampled summaries against the TV of the exact context laws; the plug-in is
    # biased upwards by at most about sqrt(contexts / n), which the tolerance allows
    ro_real = rollout(vocab, agent, real, torch.randint(3, (n,), generator=g), generator=g)
    s_real = M.summaries(prep.space, ro_real.actions, ro_real.acts)
    s_sim = M.summaries(prep.space, ro.actions, ro.acts)
    tree_real = exact_tree(vocab, prep.space, agent, real)
    rng = np.random.default_rng(0)
    bias = np.sqrt(prep.space.n_states / n)
    for key, est, law_a, law_b in (
        ("Delta", M.plugin_tv(s_real, states, prep.space.n_states, rng=rng), tree_real["contexts"],
         exact_tree(vocab, prep.space, agent, real, data_policy=prep.data_policy, follow="data")["contexts"]),
        ("D", M.plugin_tv(s_real, s_sim, prep.space.n_states, rng=rng), tree_real["contexts"], tree_sim["contexts"]),
    ):
        for t in range(3):
            exact = 0.5 * np.abs(law_a[t] - law_b[t]).sum()
            assert exact - 1e-9 <= est["high"][t] + 1e-3 and est["mean"][t] - exact <= bias, (key, t, est, exact)
        assert max(0.5 * np.abs(a - b).sum() for a, b in zip(law_a, law_b)) > 0.01  # a shift to measure


def test_exact_tree_matches_summary_mdp_for_data_policy(tiny):
    prep, vocab, agent = tiny
    from shiftbounds.tabular import expected_return

    real = ExplicitUser(prep.task, prep.real)
    judge_mdp = prep.real_mdp  # the real user accepts only right proposals: acceptance == judge
    tree = exact_tree(vocab, prep.space, agent, real, data_policy=prep.data_policy, follow="data")
    assert tree["J"] == pytest.approx(float(expected_return(judge_mdp, prep.data_policy)), abs=1e-9)


def test_train_agent_resumes_from_checkpoint(tiny, tmp_path):
    prep, vocab, agent = tiny
    sim = ExplicitUser(prep.task, prompted_simulator(0.3, 0.2))
    cfg = RLConfig(steps=4, goals_per_step=4, group=2, eval_every=2)
    ev = lambda a, step: {"J_real": float(step)}  # noqa: E731
    ck = tmp_path / "rl.ckpt"
    _, curve_a = train_agent(vocab, agent, "interactive", RLConfig(steps=2, goals_per_step=4, group=2, eval_every=2),
                             torch.Generator().manual_seed(0), user=sim, evaluate=ev, checkpoint=ck)
    assert [c["step"] for c in curve_a] == [0, 2]
    _, curve_b = train_agent(vocab, agent, "interactive", cfg, torch.Generator().manual_seed(0), user=sim, evaluate=ev, checkpoint=ck)
    assert [c["step"] for c in curve_b] == [0, 2, 4]  # step 0 is not recorded twice on resume
    assert [c["J_real"] for c in curve_b] == [0.0, 2.0, 4.0]
    # the policy-gradient and KL terms are logged apart (means over the steps since the last point)
    assert "pg" not in curve_b[0] and all(c["kl"] >= 0 and np.isfinite(c["pg"]) for c in curve_b[1:])
    with pytest.raises(ValueError, match="Static Context RL needs logs"):
        train_agent(vocab, agent, "static", cfg, torch.Generator())
    with pytest.raises(ValueError, match="static_reward must be"):
        RLConfig(static_reward="vibes")


def test_learner_options_change_training_and_default_to_todays_learner(tiny):
    """The explicit defaults are today's learner, draw for draw; the entropy bonus, per-turn
    returns-to-go and normalised advantages each change the trained agent (none is silently off)."""
    prep, vocab, agent = tiny
    sim = ExplicitUser(prep.task, prompted_simulator(0.3, 0.2))
    base = RLConfig(steps=3, goals_per_step=4, group=2)

    def trained(cfg):
        return train_agent(vocab, agent, "interactive", cfg, torch.Generator().manual_seed(0), user=sim)[0]

    ref = trained(base)
    same = trained(RLConfig(steps=3, goals_per_step=4, group=2, entropy_coef=0.0, advantage="return", normalise=False))
    assert all(torch.equal(p, q) for p, q in zip(ref.parameters(), same.parameters()))
    for option in ({"entropy_coef": 0.5}, {"advantage": "togo"}, {"normalise": True}):
        other = trained(RLConfig(steps=3, goals_per_step=4, group=2, **option))
        assert any(not torch.equal(p, q) for p, q in zip(ref.parameters(), other.parameters())), option
    with pytest.raises(ValueError, match="advantage must be one of"):
        RLConfig(advantage="vibes")
    with pytest.raises(ValueError, match="entropy_coef must be >= 0"):
        RLConfig(entropy_coef=-1.0)


def test_neural_user_rollout_and_static_rl(tiny):
    prep, vocab, agent = tiny
    net = ModelConfig(32, 1).build(vocab)
    ro = rollout(vocab, agent, NeuralUser(vocab, net), torch.zeros(8, dtype=torch.long), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(ro.user_probs).all()
    logs = encode(vocab, sample_logs(prep, 50, rng=np.random.default_rng(2)))
    for reward in ("myopic", "one_step", "awr"):
        a, _ = train_agent(vocab, agent, "static", RLConfig(steps=3, goals_per_step=4, group=2, static_reward=reward),
                           torch.Generator().manual_seed(0), logs=logs)
        assert all(torch.isfinite(p).all() for p in a.parameters())
        assert any(not torch.equal(p, q) for p, q in zip(a.parameters(), agent.parameters())), reward  # training moved it


def test_awr_raises_the_likelihood_of_logged_acts_that_paid(tiny):
    """GIVEN logs of pi_data WHEN the agent is trained by advantage-weighted regression on them (no
    KL) THEN the log-likelihood of the logged acts with positive advantage (return-to-go above the
    turn's mean) rises more than that of the acts with negative advantage: the weights, not plain
    behaviour cloning, drive it."""
    prep, vocab, agent = tiny
    logs = encode(vocab, sample_logs(prep, 400, rng=np.random.default_rng(3)))
    from shiftbounds.dialogue.neural.training import awr_baseline

    base, scale = awr_baseline(logs)
    mask = logs["turn_mask"].bool()
    assert base.shape == (3,) and scale > 0
    assert torch.allclose(base[0], logs["togo"][:, 0][mask[:, 0]].mean())
    good = mask & (logs["togo"] > base)
    bad = mask & (logs["togo"] < base)

    def loglik(net):
        with torch.no_grad():
            lp = torch.log_softmax(agent_turn_logits(vocab, net, logs["agent_view"]), -1)
        lp = lp.gather(-1, logs["actions"].clamp_min(0)[..., None])[..., 0]
        return lp[good].mean().item(), lp[bad].mean().item()

    trained, _ = train_agent(vocab, agent, "static", RLConfig(steps=40, goals_per_step=8, group=2, lr=3e-3, kl_coef=0.0,
                                                               static_reward="awr"), torch.Generator().manual_seed(0), logs=logs)
    (g0, b0), (g1, b1) = loglik(agent), loglik(trained)
    assert g1 - g0 > b1 - b0 + 0.05, (g0, g1, b0, b1)


def test_static_objective_sums_the_judged_reward_of_alive_turns(tiny):
    """GIVEN encoded logs WHEN J_static is measured THEN it equals the explicit sum over alive turns
    of sum_a pi(a | history) * judge(a, goal), averaged over dialogues, and it is 0 for no turns."""
    prep, vocab, agent = tiny
    data = encode(vocab, sample_logs(prep, 30, rng=np.random.default_rng(4)))
    with torch.no_grad():
        probs = torch.softmax(agent_turn_logits(vocab, agent, data["agent_view"]), -1)
    total = 0.0
    for i in range(30):
        for t in range(3):
            if data["turn_mask"][i, t]:
                g = int(data["goals"][i])
                total += sum(float(probs[i, t, a]) * (0.0 if a < prep.task.n_questions else 1.0 if a - prep.task.n_questions == g
                                                     else -prep.task.wrong_penalty) for a in range(prep.task.n_actions))
    assert M.static_objective(vocab, agent, data) == pytest.approx(total / 30, rel=1e-5)
    assert M.static_objective(vocab, agent, {**data, "turn_mask": torch.zeros_like(data["turn_mask"])}) == 0.0


def test_inverse_cdf_draws_the_law_and_common_noise_pairs_agents(tiny):
    """GIVEN probabilities and uniforms WHEN drawn by inverse CDF THEN the frequencies follow the law;
    GIVEN one agent evaluated twice and a second agent, all on the same RolloutNoise THEN the twice-run
    agent repeats itself exactly, and the two agents meet the same goals."""
    probs = torch.tensor([[0.1, 0.6, 0.3]]).expand(60000, 3)
    u = torch.rand(60000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    freq = torch.bincount(inverse_cdf(probs, u), minlength=3).double() / 60000
    assert torch.allclose(freq, torch.tensor([0.1, 0.6, 0.3], dtype=torch.float64), atol=0.01)
    assert inverse_cdf(torch.tensor([[0.0, 1.0, 0.0]]), torch.tensor([0.0], dtype=torch.float64)).item() == 1  # never a zero-mass act
    prep, vocab, agent = tiny
    real = ExplicitUser(prep.task, prep.real)
    noise = draw_noise(prep.task, 300, torch.Generator().manual_seed(4))
    a, b = rollout(vocab, agent, real, noise=noise), rollout(vocab, agent, real, noise=noise)
    assert torch.equal(a.actions, b.actions) and torch.equal(a.acts, b.acts)
    other = ModelConfig(32, 1).build(vocab)
    c = rollout(vocab, other, real, noise=noise)
    assert torch.equal(c.goals, a.goals) and not torch.equal(c.actions, a.actions)
    with pytest.raises(ValueError, match="noise"):
        rollout(vocab, agent, real, noise.goals, noise=noise)


def test_full_pipeline_smoke_and_resume(tmp_path):
    out = tmp_path / "fp"
    res = fp.main(["--preset", "smoke", "--out-dir", str(out)])
    for name in ("results.md", "results.json", "main.csv", "paired.csv", "power.csv", "per_turn.csv", "curves.csv", "simulators.csv",
                 "config.json", "timings.md", "learning_curves.png", "learning_curves.pdf", "per_turn_shifts.png", "user_models.png"):
        assert (out / name).exists(), name
    rows = {(r["task"], r["paradigm"]) for r in res["main"]}
    arms = ("real-user optimum (exact)", "pi_data (exact)", "Interactive RL optimum (exact)", "sft", "static_myopic",
            "static_one_step", "static_awr", "interactive", "calibrated", "calibrated_realism", "oracle")
    assert rows == {(t, p) for t in ("guess_number", "booking") for p in arms}
    diffs = {(r["task"], r["difference"]): r for r in res["paired"]}
    for t in ("guess_number", "booking"):
        r = diffs[(t, "calibrated - interactive")]
        per_seed = [x["paradigms"]["calibrated"]["J_real"] - x["paradigms"]["interactive"]["J_real"]
                    for x in res["runs"] if x["task"] == t]
        assert r["mean"] == pytest.approx(np.mean(per_seed)) and r["low"] <= r["mean"] <= r["high"]
        assert r["verdict"] == "not significant" and r["p"] >= 0.5  # two seeds: the smallest sign-flip p is 2 / 4
        assert r["eval_sd"] > 0 and r["train_sd"] ** 2 == pytest.approx(max(0.0, r["sd"] ** 2 - r["eval_sd"] ** 2))
        assert (t, "static_one_step - sft") in diffs and (t, "calibrated - static_awr") in diffs
        # the learner's ceiling: each share is the ratio of the mean paired differences to the oracle's headroom
        runs = [x for x in res["runs"] if x["task"] == t]
        J = lambda arm: np.array([x["paradigms"][arm]["J_real"] for x in runs])  # noqa: E731
        share = next(h for h in res["headroom"] if h["task"] == t and h["paradigm"] == "calibrated")
        assert share["share"] == pytest.approx(np.mean(J("calibrated") - J("interactive")) / np.mean(J("oracle") - J("interactive")))
        gaps = {g["paradigm"]: g for g in res["optimisation"] if g["task"] == t}
        assert set(gaps) == {"sft", "interactive", "oracle", "static_myopic"}
        assert gaps["oracle"]["exact_optimum"] == next(r["J_real"] for r in res["main"] if r["task"] == t
                                                       and r["paradigm"] == "real-user optimum (exact)")
        # no neural agent beats an exact optimum of its own objective beyond its seeds' noise
        assert all(float(g["gap_ci"].strip("[]").split(",")[1]) > 0 for g in gaps.values())
    cfg = parse_config(fp.PipelineConfig, "", fp.PRESETS, ["--preset", "smoke", "--out-dir", str(out)], name="experiments.full_pipeline")
    again = fp.run(cfg)
    assert again["main"] == res["main"] and again["paired"] == res["paired"]


@pytest.mark.parametrize("args, match", [
    (["--horizon", "9"], "--horizon and --sweep must lie in"),
    (["--sweep", "3,2"], "--sweep must list"),
    (["--seeds", "1"], "--seeds must be >= 2"),
    (["--tasks", "chess"], "--tasks must name tasks"),
    (["--group", "1"], "group >= 2"),
])
def test_full_pipeline_bad_options(args, match, capsys):
    with pytest.raises(SystemExit):
        fp.main(args)
    assert match in capsys.readouterr().err


def test_gap_and_bound_pick_each_arms_theorem():
    """GIVEN one arm's measurements WHEN its gap and bound are read THEN a simulator-trained arm gets
    Theorem 2 (J_sim - J_real against R sum_t B(delta)_t + sum_t rho_t), a logs-trained one Theorem 1
    (J_static - J_real against R sum_t B(eps)_t), and an arm trained on the real user none."""
    from shiftbounds.dialogue.neural.compounding import gap_and_bound

    sim = {"J_real": 0.2, "J_sim": 0.5, "delta": {"mean": [0.1, 0.2, 0.0]}, "rho": {"mean": [0.0, 0.05, 0.0]}}
    theorem, gap, bound = gap_and_bound(sim, 1.3)
    assert theorem == "theorem 2" and gap == pytest.approx(0.3) and bound == pytest.approx(1.3 * (0 + 0.1 + 0.3) + 0.05)
    static = {"J_real": 0.4, "J_static": 0.1, "eps": {"mean": [0.5, 0.6, 0.7]}}
    theorem, gap, bound = gap_and_bound(static, 1.3)
    assert theorem == "theorem 1" and gap == pytest.approx(-0.3) and bound == pytest.approx(1.3 * (0 + 0.5 + 1.0))
    assert gap_and_bound({**sim, "delta": {"mean": [0.0] * 3}, "rho": {"mean": [0.0] * 3}}, 1.3) is None


def test_full_pipeline_sweep_smoke(tmp_path):
    """GIVEN the smoke settings at two horizons WHEN the sweep runs THEN every arm but the oracle has a
    gap and a positive bound at both horizons and growth slopes, the exact end points obey their
    theorems, and a rerun reuses every horizon's run and gives the same rows."""
    out = tmp_path / "sweep"
    args = ["--preset", "smoke", "--tasks", "guess_number", "--sweep", "2,3", "--realism-steps", "0", "--out-dir", str(out)]
    res = fp.main(args)
    for name in ("sweep.md", "sweep.csv", "growth.csv", "results.json", "compounding.png", "compounding.pdf", "H2/results.json", "H3/main.csv"):
        assert (out / name).exists(), name
    arms = {(r["paradigm"], r["H"]) for r in res["sweep"]}
    expected = {"static_myopic", "static_one_step", "static_awr", "interactive", "calibrated"}
    assert arms == {(a, h) for a in expected for h in (2, 3)}
    assert {g["paradigm"] for g in res["growth"]} == expected
    assert all(r["bound"] > 0 for r in res["sweep"]) and all(r["bound"] > 0 for r in res["exact"])
    assert all(abs(r["gap"]) <= r["bound"] + 1e-9 for r in res["exact"])  # the exact end points obey the theorems
    again = fp.main(args)
    assert again["sweep"] == res["sweep"]


def test_perturbed_weights_move_by_rounding_and_change_the_run(tmp_path):
    """GIVEN --perturb-init WHEN a network is built THEN each non-zero weight moves by about 1e-7 of
    itself (never more than 1e-6), different keys move it differently, scale 0 leaves it untouched; a smoke run
    with a perturbation differs from the unperturbed one (so the option is not silent)."""
    cfg = parse_config(PipelineConfig, "", fp.PRESETS, ["--preset", "smoke", "--out-dir", str(tmp_path / "a")], name="x")
    plain = seed_setup(cfg, "guess_number", 0).build("agent")
    moved = seed_setup(replace(cfg, perturb_init=1), "guess_number", 0).build("agent")
    other = seed_setup(replace(cfg, perturb_init=2), "guess_number", 0).build("agent")
    for p, q, r in zip(plain.parameters(), moved.parameters(), other.parameters()):
        nz = p != 0  # zero-initialised biases stay 0: the perturbation is relative
        if nz.any():
            rel = (q.double() - p.double()).abs()[nz] / p.double().abs()[nz]
            assert rel.max() < 1e-6 and (q != p)[nz].float().mean() > 0.3 and not torch.equal(q, r)
    net = ModelConfig(16, 1).build(Vocab(guess_number(3, horizon=3)))
    before = [p.clone() for p in net.parameters()]
    perturb_weights(net, torch.Generator().manual_seed(0), scale=0.0)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    a = fp.main(["--preset", "smoke", "--tasks", "guess_number", "--out-dir", str(tmp_path / "a")])
    b = fp.main(["--preset", "smoke", "--tasks", "guess_number", "--perturb-init", "1", "--out-dir", str(tmp_path / "b")])
    assert [r["paradigms"] for r in a["runs"]] != [r["paradigms"] for r in b["runs"]]
    with pytest.raises(ValueError, match="--perturb-init must be >= 0"):
        PipelineConfig(perturb_init=-1)


def test_verdict_flips_count_changed_verdicts_and_keep_only_unanimous_orderings():
    default = [{"task": "t", "difference": "a - b", "holm verdict": "a > b"}, {"task": "t", "difference": "a - c", "holm verdict": "not significant"}]
    same = [dict(r) for r in default]
    flipped = [{**default[0], "holm verdict": "not significant"}, {**default[1], "holm verdict": "a > c"}]
    out = verdict_flips(default, [same, flipped, same])
    assert out["flip_rate"] == pytest.approx(2 / 6)
    assert [r["robust"] for r in out["rows"]] == ["not significant", "not significant"] and all(r["flips"] for r in out["rows"])
    assert verdict_flips(default, [same])["flip_rate"] == 0 and verdict_flips(default, [same])["rows"][0]["robust"] == "a > b"
    with pytest.raises(ValueError, match="compares other pairs"):
        verdict_flips(default, [default[:1]])
