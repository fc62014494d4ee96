"""The transformers path: loaders on the shared data, the judge, tokenizer, reward-model metrics,
the distillation losses and both smoke entry points."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from benchmarks.reference import ByteTokenizer, TinyLM, load_causal_lm, per_example_nll, span_nll
from shiftbounds import taskmaster_job
from shiftbounds.conversations import taskmaster_report, taskmaster_run, taskmaster_study
from shiftbounds.conversations.classifiers import make_batch
from shiftbounds.conversations.sampling import sample_batch
from shiftbounds.conversations.taskmaster import (
    OrderItem,
    load_reward_labels,
    load_tm4,
    order_credit,
    order_success,
    parse_orders,
    split_by_dialogue,
)
from shiftbounds.distill.gsm8k import METHODS, NoisyTeacher, extract_final, load_gsm8k, on_policy_loss
from shiftbounds.utils.configs import build, earlier_values, flat_dict
from shiftbounds.utils.device import resolve_device
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import roc_auc
from tests.marks import needs_data


@needs_data
def test_taskmaster_loaders_match_the_documented_counts():
    dialogues = load_tm4()
    assert len(dialogues) > 2500 and all(d.goal for d in dialogues)
    assert len(load_reward_labels("taskmaster4")) == 3228
    tm3 = load_reward_labels("taskmaster3")
    assert len(tm3) == 3667 and sum(x.reward for x in tm3) == 573
    with pytest.raises(ValueError, match="corpus must be"):
        load_reward_labels("taskmaster5")


def test_loaders_name_missing_data(tmp_path):
    with pytest.raises(ValueError, match="no files matching 'data_\\*.json'"):
        load_tm4(tmp_path)
    with pytest.raises(ValueError, match="gsm8k/train.jsonl not found"):
        load_gsm8k("train", tmp_path)
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "q", "answer": "no number"}) + "\n")
    with pytest.raises(ValueError, match="test.jsonl:1: answer has no"):
        load_gsm8k("test", tmp_path)


def test_judge_and_order_parsing():
    goal = (OrderItem("mocha", 1, ("oat milk",)),)
    text = '<api>add_order_item {"menu_item_id": "mocha-3844", "quantity": "1", "attributes": [{"option": "Oat Milk"}]}<agent>ok'
    assert order_success(goal, parse_orders(text)) == 1.0
    assert order_success(goal, parse_orders(text.replace("Oat", "Whole"))) == 0.0
    assert parse_orders("add_order_item {broken") == []
    a, b, c = split_by_dialogue(list(range(10)), rng=np.random.default_rng(0))
    assert sorted(a + b + c) == list(range(10)) and len(a) == 6
    with pytest.raises(ValueError, match="fractions must be"):
        split_by_dialogue([1], (0.5, 0.6, 0.1), rng=np.random.default_rng(0))


def test_byte_tokenizer_roundtrip_and_specials():
    tok = ByteTokenizer(("<user>", "<agent>"))
    ids = tok.encode("<user>café 12<agent>ok")
    assert ids[0] == tok.special["<user>"] and tok.decode(ids) == "<user>café 12<agent>ok"
    assert tok.vocab_size == 261


def test_models_device_and_bad_path(tmp_path):
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="holds no transformers model"):
        load_causal_lm(tmp_path)
    with pytest.raises(ValueError, match="family must be"):
        TinyLM("bert")


def test_span_batch_masks_only_targets():
    tok = ByteTokenizer()
    b = make_batch(tok, [("ab", "cd"), ("x", "yz!")], max_len=16)
    assert b.target_mask.sum(1).tolist() == [3.0, 4.0]  # target bytes + end of text
    model, _, _ = load_causal_lm(None, TinyLM("llama", 16, 1, 2, 32))
    loss = span_nll(model, b)
    per = per_example_nll(model, b)
    assert torch.isfinite(loss) and per.shape == (2,)


def test_gradient_checkpointing_keeps_gradients_and_cached_sampling():
    b = make_batch(ByteTokenizer(), [("ab", "cd"), ("x", "yz!")], max_len=16)
    grads = []
    for ckpt in (False, True):
        model, _, _ = load_causal_lm(None, TinyLM("gpt2", 32, 2, 4, 128), gradient_checkpointing=ckpt)
        model.train()
        span_nll(model, b).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])
    # in training mode with checkpointing, transformers drops the cache; the sampler must not care
    prompts = [[1, 2, 3, 4], [5, 6]]
    model.eval()
    want = sample_batch(model, prompts, 8, stop_ids=[258], pad_id=256, temperature=0)
    model.train()
    assert sample_batch(model, prompts, 8, stop_ids=[258], pad_id=256, temperature=0) == want
    assert model.training


def test_roc_auc():
    assert roc_auc(np.array([0.1, 0.9, 0.8, 0.2]), np.array([0, 1, 1, 0])) == 1.0
    assert roc_auc(np.array([1.0, 1.0]), np.array([0, 1])) == 0.5
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(np.array([1.0]), np.array([1]))


def test_gsm8k_answers_and_every_on_policy_loss():
    assert extract_final("so 3+4=7\n#### 1,234") == "1234"
    assert extract_final("no answer") is None
    g = torch.Generator().manual_seed(0)
    s = torch.randn(2, 5, 13, generator=g, requires_grad=True)
    t = torch.randn(2, 5, 13, generator=g)
    mask = torch.ones(2, 5)
    for m in METHODS[1:]:
        loss = on_policy_loss(m, s, t, NoisyTeacher(2.0, 0.1), mask)
        assert torch.isfinite(loss) and loss > 0, m
        loss.backward()
    with pytest.raises(ValueError, match="temperature > 0"):
        NoisyTeacher(0.0)


@needs_data
def test_gsm8k_smoke_entry_point(tmp_path):
    from experiments import gsm8k_distill

    res = gsm8k_distill.main(["--preset", "smoke", "--out-dir", str(tmp_path / "g"), "--methods", "bc,nail-F", "--etas", "0.2"])
    assert {r["method"] for r in res["rows"]} == {"bc", "nail-F"}
    assert (tmp_path / "g" / "results.md").exists() and (tmp_path / "g" / "config.json").exists()
    assert {p.name for p in (tmp_path / "g" / "runs").iterdir()} >= {"teacher", "student_init", "bc_eta0.2_seed0.json"}


@needs_data
def test_real_dialogue_smoke_entry_point(tmp_path):
    """The real-data run wired from the conversations library: every output, a resumed rerun that
    reproduces the results, a recomputed stage equal to the saved one, and a refused folder."""
    from experiments import real_dialogue

    res = real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "r"), "--workers", "2"])
    # the stages on one torch thread each: two worker processes and one process on two threads give the same bytes
    one = real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "one"), "--workers", "1", "--threads", "2"])
    for name in ("runs.csv", "paired.csv", "training.csv"):
        assert (tmp_path / "r" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert {**one, "config": None} == {**res, "config": None} and one["config"]["workers"] == res["config"]["workers"] == 0
    weights = sorted(p.relative_to(tmp_path / "r") for p in (tmp_path / "r" / "stages").rglob("*.safetensors"))
    assert len(weights) == 2 + 4 + 1 + 4 * 2  # base models, user models, SFT agent, RL agents: every weight the same bytes
    for w in weights:
        assert (tmp_path / "r" / w).read_bytes() == (tmp_path / "one" / w).read_bytes(), w
    with pytest.raises(SystemExit, match="one_thread: saved True, now False"):
        real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "one"), "--no-one-thread"])
    assert [row["arm"] for row in res["table"]] == ["sft", "static", "interactive_rule", "interactive_prompted", "calibrated"]
    assert {r["seed"] for r in res["runs"]} == {0, 1} and "held-out split" in res["note"]
    for row in res["paired"]:  # Holm keeps an ordering only where the uncorrected test called one
        assert 0.0 <= row["p"] <= 1.0 and row["holm verdict"] in (row["verdict"], "not significant")
    for name in ("results.md", "results.json", "config.json", "runs.csv", "paired.csv", "training.csv", "per_turn.csv", "timings.json",
                 "goals.csv", "realism_by_turn.png", "sycophancy.pdf", "paradigms.png", "paired.png", "paired.pdf"):
        assert (tmp_path / "r" / name).exists(), name
    # per-goal outcomes: every per-seed success is its goals' mean (the ledger's check recomputes it so)
    from shiftbounds.ledger.check import dialogue_goals
    assert len(res["goal_ids"]) == 4 and len(res["goals"]) == len(res["runs"]) and dialogue_goals(tmp_path, "r") == []
    goals_csv = (tmp_path / "r" / "goals.csv").read_text()
    first = goals_csv.splitlines()[1].rsplit(",", 1)
    flipped = first[0] + "," + ("1" if first[1][0] == "0" else "0") + first[1][1:]  # one goal's outcome changed
    (tmp_path / "r" / "goals.csv").write_text(goals_csv.replace(goals_csv.splitlines()[1], flipped, 1))
    assert dialogue_goals(tmp_path, "r")
    (tmp_path / "r" / "goals.csv").write_text(goals_csv)
    syc = res["sycophancy"]
    assert syc["people (logged replies)"]["accept_wrong"] is None
    confirmations = res["logged_confirmations"]  # the people row's accept-right is read from the same logged replies
    assert confirmations["n"] == syc["people (logged replies)"]["accept_right"]["n"] == confirmations["of_the_goal"]
    assert confirmations["not_accepted"] == round(confirmations["n"] * (1 - syc["people (logged replies)"]["accept_right"]["value"]))
    assert syc["rule-based"]["accept_right"]["value"] == 1.0  # the rule accepts every right order
    corrected = syc["held-out user model + wrong-order rule"]
    assert corrected["accept_wrong"]["value"] == 0.0  # the rule rejects every wrong order
    for name, d in res["discriminator"].items():
        assert 0.0 <= d["overall"]["value"] <= 1.0 and d["overall"]["n"] == sum(b["n"] for b in d["by_turn"].values()), name
    stages = tmp_path / "r" / "stages"
    meta = json.loads((stages / "agent_static_seed1" / "shiftbounds.json").read_text())
    for curve, key in (("reward", "reward"), ("goal success", "success")):  # both curves, from the agent's own log
        logged = meta[key]
        trend = next(t for t in res["training"] if (t["arm"], t["seed"], t["curve"]) == ("static", 1, curve))
        assert trend["steps"] == len(logged) >= 1 and trend["zero_variance_steps"] == meta["training_signal"]["zero_variance_steps"]
        assert trend["first_quarter"] == pytest.approx(logged[0]) and trend["last_quarter"] == pytest.approx(logged[-1])
    # --curve-every: the greedy agent against its training simulator from the SFT agent's evaluation there to its own
    curve = json.loads((stages / "agent_calibrated_seed1" / "shiftbounds.json").read_text())["curve"]
    assert curve["steps"] == [0, 1] and "curve" not in meta  # Static Context RL has no training simulator
    assert list(curve["outcomes"]) == ["calibrated", "held-out user model"]  # the smoke preset's --curve-users
    assert curve["outcomes"]["calibrated"][0] == json.loads((stages / "eval_sft_vs_calibrated_seed1.json").read_text())["calibrated"]["rewards"]
    final = json.loads((stages / "eval_calibrated_seed1.json").read_text())
    for user, outcomes in curve["outcomes"].items():
        assert outcomes[-1] == final[user]["rewards"], user
    assert curve["outcomes"]["held-out user model"][0] == json.loads((stages / "eval_sft_seed1.json").read_text())[
        "held-out user model"]["rewards"]
    ckpt = [t for t in res["training"] if t["curve"] == taskmaster_run.CHECKPOINT_CURVE]
    assert len([t for t in res["training"] if t["curve"] == taskmaster_run.CHECKPOINT_CURVE + " vs held-out user model"]) == 3 * 2
    assert sorted((t["arm"], t["seed"]) for t in ckpt) == sorted((a, s) for a in ("interactive_rule", "interactive_prompted", "calibrated")
                                                                   for s in (0, 1))
    assert all(t["checkpoints"] == 2 and t["units"] == 4 for t in ckpt)
    assert res["checkpoint_curves"]["calibrated seed 1"] == {"steps": [0, 1], **{
        "success" if u == "calibrated" else u: [float(np.mean(o)) for o in v] for u, v in curve["outcomes"].items()}}
    assert len(res["training"]) == 2 * 4 * 2 + 3 * 2 * 2 and res["training_curves"]["static seed 1"] == meta["success"]
    assert (tmp_path / "r" / "training_curves.png").exists() and "independent user model" in res["evaluation_users"]
    assert {"sim-to-real gap (held-out)", "sim-to-real gap (independent)"} <= set(res["table"][-1])
    # every arm with a training simulator against the SFT agent on that simulator: one family of three
    own = [p for p in res["paired"] if p["evaluation user"].startswith("its training simulator")]
    assert [(p["evaluation user"], p["difference"]) for p in own] == [
        ("its training simulator (rule-based)", "interactive_rule - sft"), ("its training simulator (prompted)", "interactive_prompted - sft"),
        ("its training simulator (calibrated)", "calibrated - sft")]
    sft0 = {r["user"]: r["success"] for r in res["runs"] if (r["arm"], r["seed"]) == ("sft", 0)}
    assert res["table"][-1]["SFT agent vs that simulator"] == pytest.approx(np.mean(
        [r["success"] for r in res["runs"] if (r["arm"], r["user"]) == ("sft", "calibrated")])) and "prompted" in sft0
    assert "goal_consistency" in syc["independent user model"]
    assert {p.name for p in stages.iterdir() if p.is_dir()} >= {"base", "user_calibrated", "user_heldout", "agent_sft",
                                                                 "agent_calibrated_seed1", "base_independent", "user_independent"}
    # a rerun loads every stage; a stage deleted and recomputed from the saved agent equals the saved one
    saved = json.loads((stages / "eval_calibrated_seed1.json").read_text())
    (stages / "eval_calibrated_seed1.json").unlink()
    timed = json.loads((tmp_path / "r" / "timings.json").read_text())["seconds_per_stage_computed"]
    assert len(timed) == len(taskmaster_run.stage_needs(build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS["smoke"])))
    again = real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "r")])
    assert json.loads((stages / "eval_calibrated_seed1.json").read_text()) == saved
    timings = json.loads((tmp_path / "r" / "timings.json").read_text())
    retimed = timings["seconds_per_stage_computed"]  # the first call's kept
    assert retimed.keys() == timed.keys() and {k: v for k, v in retimed.items() if k != "eval_calibrated_seed1"} == {
        k: v for k, v in timed.items() if k != "eval_calibrated_seed1"}
    assert [c["stages_computed"] for c in timings["calls"]] == [len(timed), 1] and timings["calls"][0]["workers"] == 2
    assert again["table"] == res["table"] and again["paired"] == res["paired"]
    # every stage's seconds are kept beside it: with timings.json lost (a call stopped before writing it), they come back
    (tmp_path / "r" / "timings.json").unlink()
    # the tables recomputed from results.json alone (--retabulate) are the run's
    retab = real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "r"), "--retabulate"])
    assert json.loads((tmp_path / "r" / "timings.json").read_text())["seconds_per_stage_computed"] == retimed
    assert retab["table"] == res["table"] and retab["paired"] == res["paired"] and retab["training"] == res["training"]
    # a subset of the arms is tabulated from the same folder, with its own paired rows
    sub = real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "r"), "--arms", "calibrated"])
    assert [row["arm"] for row in sub["table"]] == ["sft", "calibrated"]
    assert {p["difference"] for p in sub["paired"]} == {"calibrated - sft"} and sub["table"][1] == res["table"][-1]
    # a seed added to a saved run trains and evaluates that seed only; the saved seeds' rows stay
    more = real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "r"), "--arms", "calibrated", "--seeds", "0,1,2"])
    assert [r for r in more["runs"] if r["seed"] < 2] == [r for r in sub["runs"] if r["seed"] < 2]
    assert {r["seed"] for r in more["runs"]} == {0, 1, 2} and (stages / "agent_calibrated_seed2").is_dir()
    assert not (stages / "agent_static_seed2").exists()
    with pytest.raises(ValueError, match="--arms must be distinct names among static"):
        taskmaster_run.RealDialogueConfig(arms=("static", "reinforce"))
    with pytest.raises(ValueError, match="--sim-temperature must be >= 0; got 0.0, 1.0, -0.5"):
        taskmaster_run.RealDialogueConfig(sim_temperature=-0.5)
    # the disclosure probe reads the run's user models: every model, view, persona and temperature, shares in [0, 1]
    from experiments import disclosure_probe

    rows = disclosure_probe.main(["--preset", "smoke", "--stages", str(stages), "--out-dir", str(tmp_path / "d")])
    assert len(rows) == (3 + 2 * len(disclosure_probe.PERSONAS)) * 2 and (tmp_path / "d" / "disclosure.csv").exists()
    # asking after a silent opening: every silent opening is asked, and a share of them is reported
    ask = disclosure_probe.main(["--preset", "smoke", "--stages", str(stages), "--out-dir", str(tmp_path / "d2"),
                                 "--ask", "What would you like?", "--temperatures", "0"])
    for r in ask:
        assert r["asked"] == round(r["n"] * (1 - r["names whole goal"]))
        assert r["whole goal after asking"] is None if r["asked"] == 0 else 0 <= r["whole goal after asking"] <= 1
    assert {r["view"] for r in rows if r["user model"] == "prompted"} == {"as_user", "flipped"}
    assert all(0 <= r["names whole goal"] <= 1 and r["n"] == 4 for r in rows)
    with pytest.raises(ValueError, match="--stages must be a real_dialogue run's stages/ folder"):
        disclosure_probe.DisclosureConfig(stages=str(tmp_path))
    # the GRPO signal probe reads the same stages: counts add up, and greedy success splits exactly by disclosure
    from experiments import grpo_signal

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sig = grpo_signal.main(["--preset", "smoke", "--stages", str(stages), "--out-dir", str(tmp_path / "s")])
    # a probe without any mixed group (the smoke agent never or always succeeds) says so; one with some does not
    assert (sig["mixed_group_share"] == 0) == any("no gradient for success" in str(w.message) for w in caught)
    assert sum(sig["goals_by_successes"].values()) == sig["n_goals"] == 3 and 0 <= sig["mixed_group_share"] <= 1
    told, g = sig["opening_discloses"], sig["greedy"]
    parts = [(sig[k]["value"], sig[k]["n"]) for k in ("greedy, opening discloses", "greedy, opening does not") if sig[k]]
    assert sum(v * n for v, n in parts) == pytest.approx(g["value"] * g["n"]) and sum(n for _, n in parts) == g["n"] == told["n"]
    assert (tmp_path / "s" / "signal.md").exists()
    # every greedy dialogue ends in one failure mode, on the side of the disclosure split it was read on
    modes = sig["failure_modes"]
    first = sig["logged agent orders at its first turn"]
    assert 0 <= first["value"] <= 1 and first["n"] >= 1
    for side in ("opening discloses", "opening does not"):
        share = sig[f"greedy, {side}"]
        assert sum(modes[side].values()) == (share["n"] if share else 0)
        assert modes[side].get("success", 0) == (round(share["value"] * share["n"]) if share else 0)
    # against an evaluation user that opens with the logged request: that opening is what is read for disclosure
    logged = grpo_signal.main(["--preset", "smoke", "--stages", str(stages), "--out-dir", str(tmp_path / "s2"),
                               "--simulator", "logged opening, then held-out model + rule"])
    assert logged["n_goals"] == 3 and logged["greedy"]["n"] == 3
    with pytest.raises(ValueError, match="--simulator must be one of"):
        grpo_signal.SignalConfig(stages=str(stages), simulator="people")
    with pytest.raises(ValueError, match="--agent must name a model folder"):
        grpo_signal.SignalConfig(stages=str(stages), agent="agent_nope")
    # greedy agent and greedy users: the SFT agent's evaluation draws nothing from its seed, which is
    # what lets a run copy the first seed's instead of recomputing it (taskmaster_run.seed_free_source)
    from shiftbounds.conversations import taskmaster_study as study
    from shiftbounds.utils.stages import StageCache

    greedy = build(taskmaster_run.RealDialogueConfig, {**real_dialogue.PRESETS["smoke"], "user_temperature": 0.0})
    runner = taskmaster_run.Stages(greedy, StageCache(stages))
    a, b = (study.evaluate(runner.folder("agent_sft"), runner.users, [*study.EVAL_USERS, "calibrated"], runner.goals, seed=s,
                           turns=greedy.rl.max_turns, max_new=greedy.rl.max_new_tokens, temperature=0.0) for s in (0, 7))
    assert a == b
    # saved stages are never mixed with other settings
    with pytest.raises(SystemExit, match=r"error: .*\(sft_steps: saved 3, now 5\)"):
        real_dialogue.main(["--preset", "smoke", "--out-dir", str(tmp_path / "r"), "--sft-steps", "5"])


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_last_only_prefill_keeps_the_last_logits_and_the_cache(family):
    from shiftbounds.conversations.sampling import forward_with_cache

    model, _, _ = load_causal_lm(None, TinyLM(family, 32, 2, 4, 64), seed=3)
    model.eval()
    ids = torch.randint(0, 256, (3, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full, c_full = forward_with_cache(model, ids)
        last, c_last = forward_with_cache(model, ids, last_only=True)
        assert full.shape == (3, 9, model.config.vocab_size) and last.shape == (3, 1, model.config.vocab_size)
        torch.testing.assert_close(last, full[:, -1:])
        nxt = ids[:, :1]
        a, _ = forward_with_cache(model, nxt, c_full)
        b, _ = forward_with_cache(model, nxt, c_last)
    torch.testing.assert_close(a, b)


_drinks = st.builds(OrderItem, st.sampled_from(["latte", "mocha", "tea"]), st.integers(1, 2),
                    st.lists(st.sampled_from(["oat milk", "large", "iced"]), max_size=2, unique=True).map(tuple))


@given(st.lists(_drinks, min_size=1, max_size=3), st.lists(_drinks, min_size=0, max_size=3))
@example([OrderItem("latte")], [])  # nothing ordered
@example([OrderItem("latte", 1, ("iced",))], [OrderItem("latte", 1, ("iced",))])  # exact
@example([OrderItem("tea", 2, ("oat milk", "iced"))], [OrderItem("tea", 2, ("iced", "oat milk"))])  # options reordered
def test_partial_credit_lies_in_0_1_and_is_1_exactly_at_success(goal, ordered):
    credit = order_credit(tuple(goal), ordered)
    assert 0.0 <= credit <= 1.0
    assert (credit == 1.0) == (order_success(tuple(goal), ordered) == 1.0)
    if ordered and not {o.item for o in ordered} & {g.item for g in goal}:
        assert credit == 0.0  # no drink right: no credit


def test_partial_credit_counts_parts_of_a_drink():
    goal = (OrderItem("latte", 2, ("iced", "oat milk")),)
    assert order_credit(goal, [OrderItem("latte", 2, ("iced",))]) == 0.5 + 0.25 + 0.25 * 0.5
    assert order_credit(goal, [OrderItem("latte", 1, ("iced", "oat milk"))]) == 0.75
    assert order_credit(goal, [OrderItem("latte", 2, ("iced", "oat milk")), OrderItem("tea")]) == 0.5  # an extra drink halves it


def test_retabulating_a_run_from_before_the_independent_evaluator_keeps_its_tables(tmp_path):
    """Regression: the shipped cpu run has three evaluation users and the flipped view; re-tabulating
    a copy gives its paired rows and its (already retabulated) table exactly, its users only, and
    records the view it was made with."""
    import shutil


    src = Path(__file__).resolve().parents[1] / "results" / "real_dialogue" / "before_position_fix"
    shutil.copytree(src, tmp_path / "cpu")
    res = taskmaster_job.retabulate(tmp_path / "cpu")
    shipped = json.loads((src / "results.json").read_text())
    assert res["paired"] == shipped["paired"] and res["evaluation_users"] == shipped["evaluation_users"]
    assert res["config"]["user_view"] == "flipped" and "independent user model" not in res["evaluation_users"]
    assert res["table"] == shipped["table"] and any("sim-to-real gap (held-out)" in r for r in res["table"])  # idempotent


def test_real_dialogue_stage_needs_order_each_stage_after_what_it_needs():
    """Every stage's needs are stages of the run listed before it, each named once; each RL agent's
    evaluation needs that agent."""
    from experiments import real_dialogue

    cfg = build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS["smoke"])
    needs = taskmaster_run.stage_needs(cfg)
    keys = list(needs)
    assert all(keys.index(n) < keys.index(k) for k, ns in needs.items() for n in ns)
    assert ("agent", "calibrated", 1) in needs[("eval", "calibrated", 1)] and needs[("base",)] == ()
    assert len(keys) == 2 + 5 + 4 + 2 + 3 * 2 + 2 * 4 * 2
    assert len({taskmaster_run.stage_name(k) for k in keys}) == len(keys)


def test_real_dialogue_copies_the_sft_agents_seed_free_evaluations_from_the_first_seed(tmp_path, monkeypatch):
    """With every decode greedy, the SFT agent's evaluation at a later seed needs and copies the first
    seed's (against the evaluation users, and against a training simulator that draws nothing); the
    rule-based customer draws per dialogue and a sampling run draws everywhere: those are computed."""
    from dataclasses import replace

    from experiments import real_dialogue

    arms = ("interactive_rule", "calibrated", "calibrated_half_opening")
    cfg = build(taskmaster_run.RealDialogueConfig, {**real_dialogue.PRESETS["smoke"], "user_temperature": 0.0, "arms": arms,
                                              "seeds": (3, 1, 2), "out_dir": str(tmp_path)})
    needs = taskmaster_run.stage_needs(cfg)
    copied = {k: n[-1] for k, n in needs.items() if k[0] in ("eval", "eval_vs") and n[-1][0] in ("eval", "eval_vs")}
    assert copied == {**{("eval", "sft", s): ("eval", "sft", 3) for s in (1, 2)},
                      **{("eval_vs", "calibrated", s): ("eval_vs", "calibrated", 3) for s in (1, 2)}}
    keys = list(needs)
    assert all(keys.index(n) < keys.index(k) for k, ns in needs.items() for n in ns)
    sampling = replace(cfg, user_temperature=1.0)
    assert not any(taskmaster_run.seed_free_source(sampling, k) for k in taskmaster_run.stage_needs(sampling))
    # the copy is the first seed's result, read from its file, never recomputed
    calls = []
    monkeypatch.setattr(taskmaster_study, "evaluate", lambda *a, seed, **k: calls.append(seed) or {"seed": seed})
    monkeypatch.setattr(taskmaster_run.Stages, "folder", lambda self, name: tmp_path)
    monkeypatch.setattr(taskmaster_run.Stages, "users", {})
    runner = taskmaster_run.Stages.__new__(taskmaster_run.Stages)
    runner.cfg, runner.st, runner.goals = cfg, StageCache(tmp_path / "stages"), []
    assert [runner.stage(("eval", "sft", s)) for s in (3, 1, 2)] == [{"seed": 3}] * 3 and calls == [3]
    assert runner.stage(("eval_vs", "rule-based", 1)) == {"seed": 1} and calls == [3, 1]


def test_real_dialogue_paper_preset_is_the_train_split_configuration_with_a_family_holm_can_pass():
    """The paper preset changes only the arms and the seeds of the frozen train_split configuration, and
    has enough seeds that the exact sign-flip test's smallest p (2 / 2^n) passes Holm's first step over
    its family; the train_split preset's family of one passes at its six seeds."""
    from dataclasses import replace

    from experiments import real_dialogue

    train = build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS["train_split"])
    paper = build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS["paper"])
    assert replace(paper, arms=train.arms, seeds=train.seeds) == train and paper.arms != train.arms
    assert set(taskmaster_report.comparisons(paper.arms)) == {(a, "sft") for a in paper.arms} | {
        ("calibrated", "static"), ("calibrated", "interactive_prompted")}
    for cfg in (train, paper):
        family = len(taskmaster_report.comparisons(cfg.arms))
        assert 2 / 2 ** len(cfg.seeds) < 0.05 / family <= 2 / 2 ** (len(cfg.seeds) - 1)  # the fewest seeds that can


def test_real_dialogue_paper_requests_preset_is_run_t_with_the_other_paradigms():
    """Confirmatory run U: run T's configuration (the cpu preset) and seeds with Static Context RL and Interactive RL
    (prompted simulator) beside T's arm, so a folder holding T's stages trains only the new arms; the
    arm that opens with a logged request is compared against each of them (not against another
    Calibrated variant), and at twelve seeds the exact test can pass Holm's first step over the stated
    family of two under the Bonferroni bar of seven confirmatory runs."""
    from dataclasses import replace

    from experiments import real_dialogue

    cpu = build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS["cpu"])
    u = build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS["paper_requests"])
    assert replace(u, arms=cpu.arms, seeds=cpu.seeds) == cpu
    assert "calibrated_opening" in u.arms and u.seeds == tuple(range(26, 38))
    pairs = taskmaster_report.comparisons(u.arms, taskmaster_run.baselines(u))
    assert pairs[-2:] == [("calibrated_opening", "static"), ("calibrated_opening", "interactive_prompted")]
    assert len(pairs) == len(set(pairs)) == 8  # three arms against SFT and the baseline, then the two
    assert ("calibrated_opening", "calibrated") not in taskmaster_report.comparisons(("calibrated", "calibrated_opening"))
    assert 2 / 2 ** len(u.seeds) < 0.05 / 7 / 2


@needs_data
def test_real_dialogue_calibrated_opening_arm_trains_on_logged_openings(tmp_path, monkeypatch):
    """The arm whose simulator opens with the logged request: its training goals carry their
    dialogues' first user turns, the SFT agent is evaluated against that simulator under a file
    name without spaces, and the arm is tested against it in its own family."""
    from experiments import real_dialogue
    from shiftbounds.conversations import taskmaster_study as study
    from shiftbounds.conversations.paradigms import ParadigmConfig
    from shiftbounds.conversations.taskmaster_study import LOGGED_CALIBRATED, with_openings
    from shiftbounds.conversations.tasks import load_taskmaster

    train = load_taskmaster(None, 10, 10, rng=np.random.default_rng(0))["tm4"][0]
    logged = [next(m.content for m in c.messages if m.role == "user") for c in train]
    assert [c.goal["opening"] for c in with_openings(train)] == logged
    seen = {}

    def capture(paradigm, sft, convs, judge, cfg, folder, simulator, credit, *curve):  # what the arm would train on
        sim = simulator()
        seen["openings"] = []
        for c in convs:
            sim.reset(c.goal, seed=0)
            seen["openings"].append(sim.respond([])[0])
        return folder

    monkeypatch.setattr(study, "train_paradigm", capture)
    inner = study.OrderingUser(0.0, 0.0)
    study.train_arm("calibrated_opening", tmp_path, train, {LOGGED_CALIBRATED: study.LoggedOpeningUser(inner, name="x")},
                    ParadigmConfig(), tmp_path)
    assert seen["openings"] == logged
    res = real_dialogue.main(["--preset", "smoke", "--arms", "calibrated_opening", "--out-dir", str(tmp_path / "r")])
    assert (tmp_path / "r" / "stages" / "eval_sft_vs_logged_opening_then_calibrated_seed1.json").is_file()
    own = [p for p in res["paired"] if p["evaluation user"].startswith("its training simulator")]
    assert [(p["evaluation user"], p["difference"]) for p in own] == [(f"its training simulator ({LOGGED_CALIBRATED})",
                                                                      "calibrated_opening - sft")]


def test_real_dialogue_rl_split_trains_on_calibration_dialogues_outside_the_evaluation_goals():
    """``--rl-split``: the train split by default; the calibration split, less its first ``--n-eval``
    dialogues where the evaluation goals come from it (never an evaluation goal), all of it where
    they come from the held-out split; a split with nothing left, or an unknown split, is refused by name."""
    from dataclasses import replace

    from experiments import real_dialogue

    train, calib = [f"t{i}" for i in range(5)], [f"c{i}" for i in range(6)]
    cfg = build(taskmaster_run.RealDialogueConfig, {**real_dialogue.PRESETS["smoke"], "n_eval": 4})
    assert taskmaster_run.rl_dialogues(cfg, train, calib) == train
    on_calib = build(taskmaster_run.RealDialogueConfig, {**real_dialogue.PRESETS["smoke"], "n_eval": 4, "rl_split": "calibration"})
    assert taskmaster_run.rl_dialogues(on_calib, train, calib) == calib
    dev = build(taskmaster_run.RealDialogueConfig, {**real_dialogue.PRESETS["smoke"], "n_eval": 4, "rl_split": "calibration",
                                              "eval_split": "calibration"})
    assert taskmaster_run.rl_dialogues(dev, train, calib) == ["c4", "c5"]
    with pytest.raises(ValueError, match="needs --n-eval below the split's 6 dialogues; got 6"):
        taskmaster_run.rl_dialogues(build(taskmaster_run.RealDialogueConfig, {**flat_dict(dev), "n_eval": 6}), train, calib)
    with pytest.raises(ValueError, match="--rl-split must be train or calibration; got 'held-out'"):
        build(taskmaster_run.RealDialogueConfig, {**real_dialogue.PRESETS["smoke"], "rl_split": "held-out"})
    # the baseline that imitates the same logs: its own SFT stage, evaluated once and copied to the later seeds,
    # and every arm compared against it beside the SFT agent; none without --rl-split calibration
    needs = taskmaster_run.stage_needs(replace(on_calib, user_temperature=0.0))  # greedy: the same dialogues at every seed
    plus = taskmaster_run.SFT_PLUS
    assert needs[(f"agent_{plus}",)] == needs[("agent_sft",)] and taskmaster_run.baselines(cfg) == ()
    assert (f"agent_{plus}",) in needs[("eval", plus, 0)] and needs[("eval", plus, 1)][-1] == ("eval", plus, 0)
    assert not any(plus in str(k) for k in taskmaster_run.stage_needs(cfg))
    assert taskmaster_report.comparisons(("calibrated_opening",), (plus,)) == [("calibrated_opening", "sft"), ("calibrated_opening", plus)]


@needs_data
def test_real_dialogue_rl_on_the_calibration_split_reports_the_baseline_that_imitates_those_logs(tmp_path):
    """A run with ``--rl-split calibration``: the baseline's SFT saw the train and calibration dialogues
    (the SFT agent the train split's), both rows are tabulated, and the arm is paired against each."""
    from experiments import real_dialogue

    out = tmp_path / "r"
    res = real_dialogue.main(["--preset", "smoke", "--arms", "calibrated_opening", "--rl-split", "calibration", "--out-dir", str(out)])
    plus = taskmaster_run.SFT_PLUS
    seen = {a: json.loads((out / "stages" / f"agent_{a}" / "shiftbounds.json").read_text())["n_conversations"] for a in ("sft", plus)}
    assert seen[plus] > seen["sft"] > 0
    assert [row["arm"] for row in res["table"]] == ["sft", plus, "calibrated_opening"]
    held = {r["difference"] for r in res["paired"] if r["evaluation user"] == "held-out user model"}
    assert held == {"calibrated_opening - sft", f"calibrated_opening - {plus}"}
    assert "RL dialogues: the calibration split" in res["note"]


@pytest.mark.parametrize("preset", ["cpu", "train_split"])
def test_real_dialogue_presets_are_their_shipped_runs(preset):
    """``--preset cpu`` is the configuration of the shipped confirmatory run S and ``--preset train_split``
    that of the first confirmatory run (the cpu preset before it was renamed), each shipped under
    ``results/real_dialogue/<preset>/`` (their config.json), apart from where and on how many workers
    each was written."""
    from experiments import real_dialogue

    saved = json.loads((Path(__file__).parents[1] / f"results/real_dialogue/{preset}/config.json").read_text())["config"]
    saved = {**earlier_values(taskmaster_run.RealDialogueConfig), **saved}  # settings added after the run, at the values it was made with
    preset_cfg = json.loads(json.dumps(flat_dict(build(taskmaster_run.RealDialogueConfig, real_dialogue.PRESETS[preset]))))
    assert {k: v for k, v in preset_cfg.items() if k not in ("out_dir", "workers")} == {
        k: v for k, v in saved.items() if k not in ("out_dir", "workers")}
