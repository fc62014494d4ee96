"""User simulators over chat messages and their calibration with TRL's SFTTrainer (tiny models
built from a config offline)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from shiftbounds.conversations import Conversation, Message
from shiftbounds.conversations.calibration import (
    GOAL_HEADER,
    CalibrationConfig,
    calibrate,
    conversation_examples,
    dialogue_examples,
    sft_trainer,
    user_turn_examples,
)
from shiftbounds.conversations.models import METADATA, load_chat_model
from shiftbounds.conversations.simulators import (
    HiddenGoalUser,
    LMUser,
    OrderingUser,
    UserSimulator,
    reply_ids,
    reply_prompt_ids,
    simulator_view,
)
from shiftbounds.dialogue.tasks import memory_user, prompted_simulator


def test_simulator_view_flips_roles_and_hides_tools():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "order?"}, {"role": "tool", "content": "{}"}]
    view = simulator_view(msgs, {"order": ["latte"]}, "Goal: {goal}")
    assert view == [{"role": "system", "content": 'Goal: {"order": ["latte"]}'}, {"role": "assistant", "content": "hi"},
                    {"role": "user", "content": "order?"}]


def test_as_user_view_keeps_roles_and_opens_a_user_turn(synthetic):
    """In the as_user view the model reads the roles as they are and continues in the user's slot;
    the reply's target ids are exactly what follows that prompt in the rendered dialogue."""
    _, _, base = synthetic
    _, tok = load_chat_model(base)
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "order?"}, {"role": "tool", "content": "{}"}]
    view = simulator_view(msgs, "a latte", "Goal: {goal}", "as_user")
    assert [m["role"] for m in view] == ["system", "user", "assistant"]
    prompt = reply_prompt_ids(tok, msgs, "a latte", "Goal: {goal}", "as_user")
    assert tok.decode(prompt).endswith("order?<|end|><|user|>")
    p2, target = reply_ids(tok, msgs, "a latte", "one latte please", "Goal: {goal}", "as_user")
    assert p2 == prompt and tok.decode(target) == "one latte please<|end|>"
    pf, tf = reply_ids(tok, msgs, "a latte", "one latte please", "Goal: {goal}", "flipped")
    assert tok.decode(pf).endswith("<|assistant|>") and tok.decode(tf) == "one latte please<|end|>"
    with pytest.raises(ValueError, match="view must be one of"):
        simulator_view(msgs, "a latte", view="sideways")


def test_as_user_calibration_trains_on_the_user_turns_only(synthetic, tmp_path):
    """The as_user examples' labels are the user turns' tokens and end marker, as in the flipped view,
    and the calibrated folder loads back reading the dialogue in its own view."""
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    examples = user_turn_examples(convs[:4], view="as_user", tokenizer=tok)
    assert all(isinstance(ex["prompt"], str) and ex["prompt"].endswith("<|user|>") for ex in examples)
    targets = {m.content for c in convs[:4] for m in c.messages if m.role == "user"}
    trainer = sft_trainer(examples, model, tok, CalibrationConfig(steps=1, batch=4), tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    for ids, labels in zip(batch["input_ids"], batch["labels"]):
        kept = ids[labels != -100]
        assert tok.decode(kept, skip_special_tokens=True).strip() in targets
        assert tok.decode(kept).endswith("<|end|>") and "<|user|>" not in tok.decode(kept)
    out = calibrate(convs[:8], base, tmp_path / "sim", CalibrationConfig(steps=2, batch=4, view="as_user"))
    sim = LMUser.from_pretrained(out, max_new_tokens=3)
    assert sim.view == "as_user"
    assert tok.decode(sim.prompt_ids([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ask:>=1"}])).endswith("<|user|>")
    with pytest.raises(ValueError, match="pass the tokenizer"):
        user_turn_examples(convs[:1], view="as_user")


def test_every_simulator_follows_the_protocol(synthetic):
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    sims = [LMUser(model, tok, max_new_tokens=3), HiddenGoalUser(prep.task, memory_user(prep.task)), OrderingUser()]
    goals = [convs[0].goal, convs[0].goal, {"order": [{"item": "latte", "quantity": 1, "options": []}]}]
    for sim, goal in zip(sims, goals):
        assert isinstance(sim, UserSimulator)
        sim.reset(goal, seed=3)
        first = sim.respond([{"role": "assistant", "content": "ask:>=1"}])
        sim.reset(goal, seed=3)
        assert sim.respond([{"role": "assistant", "content": "ask:>=1"}]) == first  # the seed fixes the draws
        assert isinstance(first[0], str) and isinstance(first[1], bool)


def test_at_temperature_samples_the_same_weights_otherwise(synthetic):
    """A greedy simulator's copy at a temperature shares its weights and samples: its replies vary
    with the seed where the greedy ones cannot; the greedy original is left greedy."""
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    greedy = LMUser(model, tok, max_new_tokens=4, temperature=0.0)
    hot = greedy.at_temperature(5.0)
    assert hot.model is greedy.model and (greedy.temperature, hot.temperature) == (0.0, 5.0)

    def replies(sim):
        out = set()
        for seed in range(8):
            sim.reset(convs[0].goal, seed=seed)
            out.add(sim.respond([{"role": "assistant", "content": "ask:>=1"}])[0])
        return out

    assert len(replies(greedy)) == 1 and len(replies(hot)) > 1
    with pytest.raises(ValueError, match="temperature must be >= 0; got -1"):
        greedy.at_temperature(-1)


def test_train_arm_rolls_out_its_simulator_at_the_given_temperature(synthetic, monkeypatch):
    """``train_arm``'s ``sim_temperature`` reaches the rollouts' simulator (and the default keeps the
    simulator's own); the rule-based customer, which has no temperature, is passed as it is."""
    from shiftbounds.conversations import taskmaster_study as study

    _, _, base = synthetic
    model, tok = load_chat_model(base)
    users = {"calibrated": LMUser(model, tok, max_new_tokens=3, temperature=0.0), "rule-based": OrderingUser()}
    factories = []
    monkeypatch.setattr(study, "train_paradigm", lambda *a: factories.append(a[6]))
    study.train_arm("calibrated", base, [], users, None, base, 0.7)
    study.train_arm("calibrated", base, [], users, None, base)
    study.train_arm("interactive_rule", base, [], users, None, base, 0.7)
    assert [f().temperature for f in factories[:2]] == [0.7, 0.0] and users["calibrated"].temperature == 0.0
    assert isinstance(factories[2](), OrderingUser)


def test_hidden_goal_user_reads_its_memory_off_the_messages(synthetic):
    prep, _, _ = synthetic
    task = prep.task
    real = memory_user(task)
    user = HiddenGoalUser(task, real)
    user.reset(task.goals[2], seed=0)
    msgs = [{"role": "assistant", "content": "ask:>=1"}, {"role": "user", "content": "no"},  # a wrong answer
            {"role": "assistant", "content": "ask:>=1"}]
    law = user.reply_law(msgs)
    np.testing.assert_allclose(law, real.response(task, 0, 2, turn=1, previous=0, repeats=0))
    assert law[1] > 0 and law[0] == 0  # consistent: repeats its wrong "no"
    user_sim = HiddenGoalUser(task, prompted_simulator(1.0, 0.0))
    user_sim.reset(task.goals[0], seed=0)
    assert user_sim.respond([{"role": "assistant", "content": "propose:2"}]) == ("accept", True)  # sycophantic
    assert user.respond([{"role": "assistant", "content": "hello"}]) == ("clarify", False)  # not an act
    with pytest.raises(ValueError, match="is not an act of guess_number"):
        HiddenGoalUser(task, real, strict=True).reply_law([{"role": "assistant", "content": "hello"}])
    with pytest.raises(ValueError, match="is not one of the task's goals"):
        user.reset("seven")


def test_calibration_trains_on_user_turns_only(synthetic, tmp_path):
    """The SFT labels are exactly the user turns' tokens (and their end marker): never the persona,
    the goal or the agent's turns."""
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    examples = user_turn_examples(convs[:4])
    assert len(examples) == sum(len(c.turns("user")) for c in convs[:4])
    trainer = sft_trainer(examples, model, tok, CalibrationConfig(steps=1, batch=4), tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    targets = set()
    for ex in examples:
        targets.add(ex["completion"][0]["content"])
    for ids, labels in zip(batch["input_ids"], batch["labels"]):
        kept = ids[labels != -100]
        assert len(kept) > 0
        text = tok.decode(kept, skip_special_tokens=True).strip()
        assert text in targets, text
        assert tok.decode(kept).endswith("<|end|>")


def test_conversation_recipe_trains_on_every_user_turn_and_nothing_else(synthetic, tmp_path):
    """The whole-conversation recipe: one example per conversation whose SFT labels are exactly the
    user turns' tokens (each with its end marker), in order: never the persona, the goal or the
    agent's turns; ``calibrate`` with it records the recipe and moves the weights."""
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    examples = conversation_examples(convs[:4])
    assert len(examples) == 4 and examples[0]["messages"][0]["role"] == "system"
    trainer = sft_trainer(examples, model, tok, CalibrationConfig(steps=1, batch=4), tmp_path, assistant_only=True)
    batch = next(iter(trainer.get_train_dataloader()))
    wanted = sorted("".join(f"{m.content}<|end|>" for m in c.messages if m.role == "user") for c in convs[:4])
    got = sorted(tok.decode(ids[labels != -100]) for ids, labels in zip(batch["input_ids"], batch["labels"]))
    assert got == wanted
    out = calibrate(convs[:8], base, tmp_path / "sim", CalibrationConfig(steps=2, batch=4, recipe="conversation"))
    meta = json.loads((out / METADATA).read_text())
    assert meta["recipe"] == "conversation" and meta["n_examples"] == 8
    assert meta["n_user_turns"] == sum(len(c.turns("user")) for c in convs[:8])
    with pytest.raises(ValueError, match="recipe must be one of"):
        CalibrationConfig(recipe="dialogues")


def test_training_reports_progress_lines_not_log_dicts(synthetic, tmp_path, capsys):
    """Trainers print one progress line with step, ETA and loss (on stderr), not TRL's dict per log."""
    from transformers import PrinterCallback

    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    trainer = sft_trainer(user_turn_examples(convs[:4]), model, tok, CalibrationConfig(steps=2, batch=4), tmp_path)
    assert not any(isinstance(c, PrinterCallback) for c in trainer.callback_handler.callbacks)
    trainer.train()
    out, err = capsys.readouterr()
    assert "{'loss'" not in out and "'loss':" not in err
    last = [line for line in err.splitlines() if line.startswith("[SFT]")][-1]
    assert last.startswith("[SFT] 2/2") and "ETA" in last and "loss " in last, last


def test_calibrate_saves_a_simulator_that_loads_back(synthetic, tmp_path):
    prep, convs, base = synthetic
    out = calibrate(convs, base, tmp_path / "sim", CalibrationConfig(steps=3, batch=4, persona="Be the user. Goal: {goal}"))
    meta = json.loads((out / METADATA).read_text())
    assert meta["kind"] == "calibrated" and meta["n_user_turns"] == sum(len(c.turns("user")) for c in convs)
    sim = LMUser.from_pretrained(out, max_new_tokens=3)
    assert sim.name == "calibrated" and sim.persona == "Be the user. Goal: {goal}"
    base_model, _ = load_chat_model(base)
    ids = torch.tensor([sim.prompt_ids([{"role": "assistant", "content": "ask:>=1"}])])
    assert not torch.allclose(sim.model(ids).logits, base_model(ids).logits)  # the weights moved
    reloaded = LMUser.from_pretrained(out, max_new_tokens=3)
    torch.testing.assert_close(reloaded.model(ids).logits, sim.model(ids).logits)


def test_goal_annotated_pretraining_adds_each_goal_carrying_dialogue_once_led_by_its_goal():
    msgs = (Message("user", "one latte"), Message("assistant", "done"))
    convs = [Conversation("a", {"order": [], "text": "1 latte"}, msgs), Conversation("b", None, msgs)]
    plain = dialogue_examples(convs)
    assert [len(ex["messages"]) for ex in plain] == [2, 2]
    annotated = dialogue_examples(convs, GOAL_HEADER)
    assert annotated[:2] == plain and len(annotated) == 3  # the goal-less dialogue is not annotated
    assert annotated[2]["messages"] == [{"role": "system", "content": "The user's goal: 1 latte."}, *plain[0]["messages"]]
    with pytest.raises(ValueError, match="goal_header must contain"):
        dialogue_examples(convs, "no goal")


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="persona must contain"):
        CalibrationConfig(persona="no goal here")
    with pytest.raises(ValueError, match="no user turn"):
        user_turn_examples([Conversation("x", "g", (Message("assistant", "hi"),))])


def test_goal_text_uses_a_goals_own_description():
    from shiftbounds.conversations.simulators import goal_text

    assert goal_text("3") == "3"
    assert goal_text({"order": [{"item": "latte"}], "text": "1 latte (iced)"}) == "1 latte (iced)"
    assert goal_text({"order": [{"item": "latte"}]}) == '{"order": [{"item": "latte"}]}'


def test_logged_opening_user_opens_with_the_log_then_defers(synthetic):
    from shiftbounds.conversations.simulators import CorrectedUser, LoggedOpeningUser, respond_all

    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    lm = LMUser(model, tok, max_new_tokens=3)
    goal = {"order": "x", "opening": "one latte please"}
    user = LoggedOpeningUser(CorrectedUser(lm, judge=lambda g, m: 0.0, placed=lambda m: True, accepts=lambda r: True,
                                           correction=lambda g: "no!"))
    user.reset(goal, seed=0)
    assert user.respond([]) == ("one latte please", False)
    later = [{"role": "user", "content": "one latte please"}, {"role": "assistant", "content": "hot?"}]
    assert user.respond(later) == ("no!", False)  # the inner corrected LM user answers, the rule applies
    a, b = user.clone(), user.clone()
    a.reset(goal, seed=0)
    b.reset(goal, seed=0)
    assert respond_all([a, b], [[], later]) == [("one latte please", False), ("no!", False)]
    with pytest.raises(ValueError, match="needs a goal with an 'opening'"):
        user.reset("3")
    # with share 1/2 each dialogue's seed draws whether it opens with the log or as the inner user,
    # the same in one batch as alone; about half of 200 seeds do (binomial 99.9 % bounds)
    half = LoggedOpeningUser(lm, share=0.5)
    alone = []
    for seed in range(200):
        half.reset(goal, seed=seed)
        alone.append(half.respond([]))
    sims = [half.clone() for _ in range(200)]
    for seed, u in enumerate(sims):
        u.reset(goal, seed=seed)
    assert respond_all(sims, [[] for _ in sims]) == alone
    logged = sum(a == ("one latte please", False) for a in alone)
    assert 100 - 3.3 * 50 ** 0.5 < logged < 100 + 3.3 * 50 ** 0.5 and logged < 200
    with pytest.raises(ValueError, match=r"share \(of dialogues opened with the logged request\) must lie in \[0, 1\]; got 1.5"):
        LoggedOpeningUser(lm, share=1.5)
    with pytest.raises(ValueError, match="got seed None"):
        half.reset(goal)
    hot = half.at_temperature(0.5)  # the inner LM user samples otherwise; the share and the name stay
    assert (hot.inner.temperature, hot.share, hot.name, lm.temperature) == (0.5, 0.5, half.name, 1.0)


def test_a_new_wrapper_batches_through_its_own_methods(synthetic, monkeypatch):
    """GIVEN a wrapper the batcher has never heard of, which implements ``batched`` and ``finish``
    (it shouts its inner LM user's reply) WHEN three of them and two plain LM users answer in one
    ``respond_all`` call THEN all five are sampled in one batched call, each reply equals what that
    simulator answers alone with the same seed, and the wrapper's rule is applied."""
    from shiftbounds.conversations import simulators
    from shiftbounds.conversations.simulators import respond_all

    calls = []
    real = simulators.sample_batch
    monkeypatch.setattr(simulators, "sample_batch", lambda model, prompts, *a, **kw: calls.append(len(prompts)) or real(model, prompts, *a, **kw))

    class Shouting:
        def __init__(self, inner):
            self.inner = inner

        def reset(self, goal, *, seed=None):
            self.inner.reset(goal, seed=seed)

        def respond(self, messages):
            return self.finish(messages, self.inner.respond(messages))

        def batched(self, messages):
            return self.inner.batched(messages)

        def finish(self, messages, answer):
            return answer[0].upper() + "!", answer[1]

    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    lm = LMUser(model, tok, max_new_tokens=4)
    history = [{"role": "assistant", "content": "what would you like?"}]

    def make(k):
        sim = Shouting(lm.clone()) if k < 3 else lm.clone()
        sim.reset("a latte", seed=k)
        return sim

    together = respond_all([make(k) for k in range(5)], [history] * 5)
    assert calls == [5]
    alone = [make(k).respond(history) for k in range(5)]
    assert together == alone
    assert all(r.endswith("!") and r[:-1] == r[:-1].upper() for r, _ in together[:3])


def test_the_chat_template_marks_assistant_tokens_for_assistant_only_loss(synthetic, tmp_path):
    """GIVEN a tiny chat model WHEN a conversation is rendered with the assistant-token mask THEN
    the mask covers exactly the assistant's content and end marker, and SFTTrainer with
    ``assistant_only_loss=True`` trains on a messages dataset."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    msgs = [{"role": "user", "content": "yes"}, {"role": "assistant", "content": "ask:>=2"}, {"role": "user", "content": "no"}]
    out = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    marked = [t for t, m in zip(ids, mask) if m]
    assert tok.decode(marked) == "ask:>=2<|end|>" and sum(mask) == len(marked) < len(ids)
    args = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, assistant_only_loss=True,
                     report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True, bf16=False)
    trainer = SFTTrainer(model=model, args=args, processing_class=tok,
                         train_dataset=Dataset.from_list([{"messages": [m.as_dict() for m in c.messages]} for c in convs[:4]]))
    assert trainer.train().training_loss > 0


def test_examples_longer_than_the_training_length_warn(synthetic):
    from shiftbounds.conversations.calibration import warn_long_examples

    prep, convs, base = synthetic
    _, tok = load_chat_model(base)
    short = [{"messages": [{"role": "user", "content": "yes"}]}]
    long = [{"prompt": [{"role": "user", "content": "yes " * 400}], "completion": [{"role": "assistant", "content": "no"}]}]
    assert warn_long_examples(short, tok, 64) == 0
    with pytest.warns(UserWarning, match="1 of 2 training examples are longer than max_length=64 tokens"):
        assert warn_long_examples(short + long, tok, 64) == 1
