"""The three paradigms on TRL's GRPOTrainer with one configuration: agents saved and loaded like
simulators, paired evaluation, and two processes under ``accelerate launch`` (gloo on the CPU)
training the same agent as one process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbounds.conversations.calibration import CalibrationConfig, calibrate
from shiftbounds.conversations.models import METADATA, load_chat_model
from shiftbounds.conversations.paradigms import (
    PARADIGMS,
    SYSTEM,
    ParadigmConfig,
    evaluate_agent,
    grpo_config,
    resolve_system,
    train_paradigm,
)
from shiftbounds.conversations.records import as_conversations, to_dataset
from shiftbounds.conversations.simulators import HiddenGoalUser, LMUser
from shiftbounds.conversations.tasks import hidden_goal_judge
from shiftbounds.dialogue.tasks import prompted_simulator
from tests.padding import assert_left_padding_is_invisible

ROOT = Path(__file__).resolve().parents[1]


def _weights(folder):
    model, _ = load_chat_model(folder)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_every_paradigm_trains_with_one_config_and_saves_an_agent(synthetic, tmp_path):
    prep, convs, base = synthetic
    def judge(goal, messages):  # the task's reward plus a length term: variance within every group
        return hidden_goal_judge(prep.task)(goal, messages) + 0.1 * len(messages[-2 if messages[-1]["role"] == "user" else -1]["content"])

    sim = LMUser.from_pretrained(calibrate(convs[:20], base, tmp_path / "sim", CalibrationConfig(steps=2, batch=4)),
                                 max_new_tokens=4)
    factories = {"interactive": lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2)),
                 "calibrated": sim.clone, "static": None}
    cfg = ParadigmConfig(steps=1, batch=4, num_generations=2, lr=1e-2, max_turns=2, max_new_tokens=5)
    start = _weights(base)
    for paradigm in PARADIGMS:
        out = train_paradigm(paradigm, base, convs[:8], judge, cfg, tmp_path / paradigm, factories[paradigm])
        meta = json.loads((out / METADATA).read_text())
        assert meta["kind"] == "agent" and meta["paradigm"] == paradigm and len(meta["reward"]) == 1
        assert meta["config"]["lr"] == cfg.lr and meta["training_signal"]["no_op"] is False
        trained = _weights(out)
        assert any(not torch.equal(trained[k], start[k]) for k in start), paradigm
    # paired evaluation: the same agent meets the same draws, and a different agent the same simulator draws
    model, tok = load_chat_model(tmp_path / "interactive")
    kw = dict(max_turns=2, max_new_tokens=5, seed=3)
    real = lambda: HiddenGoalUser(prep.task, prep.real)  # noqa: E731
    a = evaluate_agent(model, tok, convs[20:30], real, judge, **kw)
    b = evaluate_agent(model, tok, convs[20:30], real, judge, batch=3, **kw)
    assert a["rewards"] == b["rewards"] and a["n"] == 10 and a["low"] <= a["mean"] <= a["high"]  # batching changes nothing
    c = evaluate_agent(model, tok, to_dataset(convs[20:30]), real, judge, return_transcripts=True, **kw)  # a Dataset works too
    assert c["rewards"] == a["rewards"] and "transcripts" not in a
    assert [t["id"] for t in c["transcripts"]] == [x.id for x in convs[20:30]] and [t["reward"] for t in c["transcripts"]] == a["rewards"]
    assert [x.system for x in as_conversations(c["transcripts"])] == [c["transcripts"][0]["messages"][0]["content"]] * 10
    # the trainer's config is the same for every paradigm
    assert grpo_config(cfg, tmp_path / "x").to_dict() | {"output_dir": ""} == grpo_config(cfg, tmp_path / "y").to_dict() | {"output_dir": ""}


def test_a_run_without_reward_variance_warns_and_says_so(synthetic, tmp_path):
    """Regression (a silent no-op): GIVEN a judge that never pays WHEN Interactive RL trains THEN
    every group has zero reward variance, the weights stay the starting agent's, a RuntimeWarning
    says so and shiftbounds.json records it."""
    prep, convs, base = synthetic
    cfg = ParadigmConfig(steps=2, batch=4, num_generations=2, lr=1e-2, max_turns=2, max_new_tokens=5)
    with pytest.warns(RuntimeWarning, match="learned nothing: 2 of 2 steps had no reward variance"):
        out = train_paradigm("interactive", base, convs[:8], lambda goal, messages: 0.0, cfg, tmp_path / "agent",
                             lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2)))
    signal = json.loads((out / METADATA).read_text())["training_signal"]
    assert signal == {"steps": 2, "zero_variance_steps": 2, "weights_moved": False, "no_op": True}
    trained, start = _weights(out), _weights(base)
    assert all(torch.equal(trained[k], start[k]) for k in start)


def test_a_partial_credit_is_paid_beside_the_judge_and_success_is_logged_apart(synthetic, tmp_path):
    """With credit_weight w the reward per step is success + w * credit, and ``success`` records the
    judge's own mean: here a judge that never pays beside a credit that varies, so the run learns
    from the credit alone while its success curve stays at 0 (in both paradigms that take rewards)."""
    prep, convs, base = synthetic
    credit = lambda goal, messages: min(len(messages[-2 if messages[-1]["role"] == "user" else -1]["content"]) / 10, 1.0)  # noqa: E731
    cfg = ParadigmConfig(steps=2, batch=4, num_generations=2, lr=1e-2, max_turns=2, max_new_tokens=5, credit_weight=0.5)
    for paradigm, factory in (("interactive", lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2))), ("static", None)):
        out = train_paradigm(paradigm, base, convs[:8], lambda goal, messages: 0.0, cfg, tmp_path / paradigm, factory, credit)
        meta = json.loads((out / METADATA).read_text())
        assert meta["success"] == [0.0, 0.0] and all(r > 0 for r in meta["reward"]), meta
        assert meta["training_signal"]["no_op"] is False
    with pytest.raises(ValueError, match="credit_weight 0.5 > 0 needs a credit judge"):
        train_paradigm("static", base, convs[:8], lambda goal, messages: 0.0, cfg, tmp_path / "x")
    with pytest.raises(ValueError, match="credit_weight must be >= 0"):
        ParadigmConfig(credit_weight=-1)


def test_a_checkpoint_curve_measures_the_agent_it_saves_and_leaves_training_unchanged(synthetic, tmp_path):
    """GIVEN a measure of the greedy agent against a sampling simulator with its own draws WHEN it
    runs every step THEN its first point is the starting agent's evaluation and its last the saved
    agent's, and the saved weights are the same bytes as a run without it (the measure draws nothing
    from the trainer's generators and hands the model back in training mode)."""
    prep, convs, base = synthetic
    judge = lambda goal, messages: hidden_goal_judge(prep.task)(goal, messages) + 0.1 * len(  # noqa: E731
        messages[-2 if messages[-1]["role"] == "user" else -1]["content"])
    user = lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2))  # noqa: E731
    cfg = ParadigmConfig(steps=3, batch=4, num_generations=2, lr=1e-2, max_turns=2, max_new_tokens=5, temperature=1.0)
    kw = dict(max_turns=2, max_new_tokens=5, temperature=0.0, seed=5)
    modes = []

    def checkpoint(model, tok):
        modes.append(model.training)
        return {"user": evaluate_agent(model, tok, convs[20:26], user, judge, **kw)["rewards"]}

    plain = train_paradigm("interactive", base, convs[:8], judge, cfg, tmp_path / "plain", user)
    measured = train_paradigm("interactive", base, convs[:8], judge, cfg, tmp_path / "curve", user, checkpoint=checkpoint,
                              curve_every=2)
    a, b = _weights(plain), _weights(measured)
    assert all(torch.equal(a[k], b[k]) for k in a) and any(not torch.equal(a[k], _weights(base)[k]) for k in a)
    curve = json.loads((measured / METADATA).read_text())["curve"]
    assert curve["steps"] == [0, 2, 3] and modes == [False] * 3 and all(len(o) == 6 for o in curve["outcomes"]["user"])
    for step, folder in ((0, base), (3, measured)):
        assert curve["outcomes"]["user"][curve["steps"].index(step)] == evaluate_agent(*load_chat_model(folder), convs[20:26], user,
                                                                               judge, **kw)["rewards"]
    assert "curve" not in json.loads((plain / METADATA).read_text())
    with pytest.raises(ValueError, match="a checkpoint measure needs curve_every >= 1; got 0"):
        train_paradigm("interactive", base, convs[:8], judge, cfg, tmp_path / "x", user, checkpoint=checkpoint)


def test_the_system_prompt_comes_from_the_agent_folder(tmp_path):
    """Regression (a silent mismatch): an agent is evaluated and trained with the system prompt it
    was trained with, read from its shiftbounds.json; another prompt passed explicitly warns."""
    (tmp_path / METADATA).write_text(json.dumps({"kind": "agent", "system": "You take coffee orders."}))
    assert resolve_system(None, tmp_path) == "You take coffee orders."
    with pytest.warns(UserWarning, match="trained with the system prompt 'You take coffee orders.'"):
        assert resolve_system("You are a helpful assistant.", tmp_path) == "You are a helpful assistant."
    assert resolve_system(None, tmp_path / "elsewhere") == SYSTEM and resolve_system(None, None) == SYSTEM


def test_bad_paradigm_inputs_are_named(synthetic, tmp_path):
    prep, convs, base = synthetic
    with pytest.raises(ValueError, match=r"batch \(6\) must be a multiple of num_generations \(4\)"):
        ParadigmConfig(batch=6, num_generations=4)
    with pytest.raises(ValueError, match="num_generations >= 2"):
        ParadigmConfig(num_generations=1)
    with pytest.raises(ValueError, match="paradigm must be one of"):
        train_paradigm("offline", base, convs, hidden_goal_judge(prep.task), ParadigmConfig(), tmp_path)
    with pytest.raises(ValueError, match="the interactive paradigm needs a simulator_factory"):
        train_paradigm("interactive", base, convs, hidden_goal_judge(prep.task), ParadigmConfig(), tmp_path)


def test_two_processes_under_accelerate_train_the_same_agent_as_one(synthetic, tmp_path):
    """Interactive RL, 2 steps: one process with 4 dialogues per step, and ``accelerate launch
    --num_processes 2`` (gloo on the CPU) with 2 per process, give the same rewards and weights."""
    _, _, base = synthetic
    worker = str(ROOT / "tests" / "workers" / "grpo_two_processes.py")
    subprocess.run([sys.executable, worker, str(base), str(tmp_path / "one"), "4"], check=True, capture_output=True)
    # the launcher of the interpreter running the tests (a venv's, activated or not): never skipped
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
              "--dynamo_backend", "no", "--main_process_port", "0"]
    done = subprocess.run(launch + [worker, str(base), str(tmp_path / "two"), "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = (json.loads((tmp_path / k / METADATA).read_text()) for k in ("one", "two"))
    np.testing.assert_allclose(two["reward"], one["reward"], rtol=1e-6)
    w1, w2, w0 = _weights(tmp_path / "one"), _weights(tmp_path / "two"), _weights(base)
    moved = max(float((w1[k] - w0[k]).abs().max()) for k in w0)
    gap = max(float((w1[k] - w2[k]).abs().max()) for k in w0)
    assert moved > 1e-3 and gap < 1e-2 * moved, (moved, gap)


def test_reporting_and_checkpoints_reach_the_trainers(tmp_path):
    """``report_to`` and checkpointing pass through to ``GRPOConfig``; saving without a folder to
    save in is refused."""
    from shiftbounds.conversations.calibration import Reporting

    rep = Reporting(report_to=("tensorboard",), save_strategy="steps", save_steps=7, checkpoint_dir=str(tmp_path / "ckpt"))
    args = grpo_config(ParadigmConfig(steps=1, batch=2, num_generations=2, reporting=rep), tmp_path / "out")
    assert args.report_to == ["tensorboard"] and args.save_strategy == "steps" and args.save_steps == 7
    assert grpo_config(ParadigmConfig(steps=1, batch=2, num_generations=2), tmp_path / "o").report_to == []
    with pytest.raises(ValueError, match="needs a checkpoint_dir"):
        Reporting(save_strategy="steps")
    with pytest.raises(ValueError, match="save_strategy must be"):
        Reporting(save_strategy="sometimes")



def test_the_trainer_scores_a_left_padded_row_as_the_row_alone(synthetic, tmp_path):
    """TRL left-pads prompts and calls the policy (and the reference) with ``input_ids`` and
    ``attention_mask`` only; GPT-2's learned positions would then score a padded row as another
    sequence. The paradigms' trainers count positions from the mask."""
    from shiftbounds.conversations.paradigms import paradigm_trainer

    prep, convs, base = synthetic
    cfg = ParadigmConfig(steps=1, batch=4, num_generations=2, beta=0.1, max_turns=1, max_new_tokens=4)
    trainer = paradigm_trainer("interactive", base, convs[:4], hidden_goal_judge(prep.task), cfg, tmp_path,
                               lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2)))
    assert_left_padding_is_invisible((trainer.model, trainer.ref_model), load_chat_model(base)[0])


def test_lora_trains_adapters_and_saves_an_ordinary_merged_agent(synthetic, tmp_path):
    """``lora_rank`` > 0: only adapters train (the base weights under them are frozen), and the saved
    agent is a plain model folder whose merged weights differ from the start; 0 keeps full fine-tuning."""
    prep, convs, base = synthetic
    judge = lambda goal, messages: hidden_goal_judge(prep.task)(goal, messages) + 0.1 * len(messages[-1]["content"])  # noqa: E731
    cfg = ParadigmConfig(steps=1, batch=4, num_generations=2, lr=5e-2, max_new_tokens=5, lora_rank=4)
    out = train_paradigm("static", base, convs[:8], judge, cfg, tmp_path / "lora")
    assert not (out / "adapter_config.json").exists() and json.loads((out / METADATA).read_text())["config"]["lora_rank"] == 4
    trained, start = _weights(out), _weights(base)
    assert trained.keys() == start.keys()
    changed = [k for k in start if not torch.equal(trained[k], start[k])]
    assert changed and all(k.endswith("weight") for k in changed)
    with pytest.raises(ValueError, match="lora_rank must be >= 0"):
        ParadigmConfig(lora_rank=-1)
