"""Multi-turn rollouts through TRL's GRPOTrainer: masks, the judge's reward reaching the trainer,
Static Context RL on logged contexts (tiny models built offline)."""

from __future__ import annotations

import os

import numpy as np
import torch

from shiftbounds.conversations.models import load_chat_model
from shiftbounds.conversations.rollouts import (
    agent_prompt,
    judge_reward_func,
    make_rollout_func,
    rollout_dialogue,
    rollout_dialogues,
    static_context_dataset,
    static_reward_func,
)
from shiftbounds.conversations.simulators import HiddenGoalUser, LMUser
from shiftbounds.conversations.tasks import hidden_goal_judge
from shiftbounds.dialogue.tasks import prompted_simulator

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def test_env_mask_marks_exactly_the_agent_tokens(synthetic):
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    user = HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2))
    out = rollout_dialogue(model, tok, agent_prompt("You are the agent.", convs[0].id), convs[0].goal, user,
                           hidden_goal_judge(prep.task), max_turns=3, max_new_tokens=5, temperature=1.0, seed=0)
    ids, mask = np.array(out["completion_ids"]), np.array(out["env_mask"])
    assert len(ids) == len(mask) == len(out["logprobs"]) and mask.sum() > 0 and (mask == 0).any()
    assert all(lp == 0.0 for lp, m in zip(out["logprobs"], mask) if m == 0)
    assert all(lp <= 0.0 for lp in out["logprobs"])
    # every user reply appears in the masked-out tokens, and none of the agent's tokens carries one
    hidden = tok.decode(ids[mask == 0].tolist())
    for m in out["messages"][:-1]:
        if m["role"] == "user":
            assert f"<|user|>{m['content']}<|end|>" in hidden
    assert "<|user|>" not in tok.decode(ids[mask == 1].tolist())
    # the whole dialogue re-renders to the same prefix structure: prompt, then agent / user turns
    again = rollout_dialogue(model, tok, agent_prompt("You are the agent.", convs[0].id), convs[0].goal,
                             HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2)), hidden_goal_judge(prep.task),
                             max_turns=3, max_new_tokens=5, temperature=1.0, seed=0)
    assert again["completion_ids"] == out["completion_ids"]  # seeded: the same dialogue


def test_judge_reward_reaches_the_trainer_and_moves_the_agent(synthetic, tmp_path):
    """GRPO with the rollout: the trainer's logged reward is the judge's, and a reward with
    variance changes the weights; one GRPOConfig shape serves Interactive and Static Context RL."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    prep, convs, base = synthetic
    goals = {c.id: c.goal for c in convs[:8]}
    given = []

    def judge(goal, messages):  # rewards longer first agent turns: variance within each group
        r = float(len(messages[0]["content"]))
        given.append(r)
        return r

    rollout = make_rollout_func(goals, lambda: HiddenGoalUser(prep.task, prompted_simulator(0.3, 0.2)), judge,
                                max_turns=2, max_new_tokens=6)
    _, tok = load_chat_model(base)
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=2, per_device_train_batch_size=4, num_generations=2,
                      beta=0.0, learning_rate=1e-2, report_to=[], logging_steps=1, save_strategy="no", bf16=False,
                      max_completion_length=64, disable_tqdm=True, seed=0)
    trainer = GRPOTrainer(model=str(base), reward_funcs=judge_reward_func, args=args,
                          train_dataset=Dataset.from_list([{"prompt": agent_prompt("You are the agent.", k)} for k in goals]),
                          processing_class=tok, rollout_func=rollout)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logged = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2 and len(given) == 8
    np.testing.assert_allclose(logged, [np.mean(given[:4]), np.mean(given[4:])], rtol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))

    ds, keys = static_context_dataset(convs[:3], "You are the agent.")
    assert len(ds) == sum(len(c.turns("assistant")) for c in convs[:3])
    reward = static_reward_func(keys, hidden_goal_judge(prep.task))
    row = ds[0]["prompt"]
    goal = keys[row[0]["content"].rsplit("[conversation ", 1)[1][:-1]]
    assert reward([row], [[{"role": "assistant", "content": f"propose:{goal}"}]]) == [1.0]
    static = GRPOTrainer(model=str(base), reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok)
    static.train()
    assert [h["reward"] for h in static.state.log_history if "reward" in h]


def test_batched_dialogues_equal_one_at_a_time(synthetic):
    """Dialogues rolled out together (agent turns and LM-user replies batched) are the dialogues
    rolled out alone: each draws from its own seed."""
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    user = LMUser(model, tok, max_new_tokens=4)
    judge = hidden_goal_judge(prep.task)
    prompts = [agent_prompt("You are the agent.", c.id) for c in convs[:5]]
    goals = [c.goal for c in convs[:5]]
    kw = dict(max_turns=3, max_new_tokens=5, temperature=1.0)
    together = rollout_dialogues(model, tok, prompts, goals, [user.clone() for _ in prompts], judge, seeds=[7, 1, 2, 3, 4], **kw)
    alone = [rollout_dialogue(model, tok, p, g, user.clone(), judge, seed=s, **kw) for p, g, s in zip(prompts, goals, [7, 1, 2, 3, 4])]
    for a, b in zip(together, alone):
        assert a["completion_ids"] == b["completion_ids"] and a["env_mask"] == b["env_mask"] and a["messages"] == b["messages"]
        np.testing.assert_allclose(a["logprobs"], b["logprobs"], atol=1e-5)
    assert len({len(a["completion_ids"]) for a in together}) > 1  # the rows really differ in length


def test_each_dialogue_of_a_batch_meets_its_own_customer(synthetic):
    """Simulators are per dialogue: a batch of rule-based customers with different goals each state
    their own goal (a shared instance would answer every dialogue with the last goal it was given)."""
    from shiftbounds.conversations.simulators import OrderingUser
    from shiftbounds.conversations.tasks import taskmaster4_judge

    _, _, base = synthetic
    model, tok = load_chat_model(base)
    goals = [{"order": [{"item": item, "quantity": 1, "options": []}]} for item in ("latte", "mocha", "cortado")]
    user = OrderingUser(accept_wrong=0.0, leak=1.0)
    outs = rollout_dialogues(model, tok, [agent_prompt("You are the agent.", str(i)) for i in range(3)], goals,
                             [user.clone() for _ in goals], taskmaster4_judge, max_turns=1, max_new_tokens=3,
                             temperature=1.0, seeds=[0, 1, 2], user_first=True)
    assert [o["messages"][0]["content"] for o in outs] == ["I'd like 1 latte", "I'd like 1 mocha", "I'd like 1 cortado"]
