"""TRL's ``environment_factory`` with a simulated user: the environment's contract on its own, and
a few CPU steps of ``GRPOTrainer(environment_factory=...)`` with a tiny agent SFT-ed to call the
tool, checking that the tool was called and the simulator answered (not merely that a reward was
logged)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers.utils import get_json_schema

from shiftbounds.conversations.environment import (
    LEFT,
    SimulatedUserEnvironment,
    environment_dataset,
    environment_factory,
    tool_calling_chat_template,
)
from shiftbounds.conversations.models import build_tiny_chat_model, load_chat_model
from shiftbounds.conversations.simulators import HiddenGoalUser, LMUser
from shiftbounds.dialogue.tasks import memory_user
from shiftbounds.utils.seeding import torch_init_seed
from tests.cli_task import judge as guess_judge

SYSTEM = "You are the agent."
CALL = '<tool_call>\n{"name": "send_message", "arguments": {"message": "ask:>=2"}}\n</tool_call>'


def test_environment_contract(synthetic):
    """Reset returns the user's opening and draws from its seed, the tool relays the agent's message
    and the user's reply into the transcript, the judge scores it, and the user leaves after
    max_turns; a row without a goal is refused."""
    prep, convs, _ = synthetic
    env = SimulatedUserEnvironment(HiddenGoalUser(prep.task, memory_user(prep.task)), guess_judge, max_turns=2, user_first=False)
    goal = convs[0].goal
    assert env.reset(goal_json=json.dumps(goal), seed=4, prompt=[]) is None
    reply = env.send_message("ask:>=2")
    assert env.transcript == [{"role": "assistant", "content": "ask:>=2"}, {"role": "user", "content": reply}]
    assert env.get_reward() == guess_judge(goal, env.transcript)
    second = env.send_message("ask:>=2")
    assert env.send_message("ask:>=2") == LEFT and env.calls == 3 and env.done
    env.reset(goal_json=json.dumps(goal), seed=4)
    assert env.send_message("ask:>=2") == reply and (env.done or env.send_message("ask:>=2") == second)
    with pytest.raises(ValueError, match="needs a goal"):
        env.reset(prompt=[])
    public = {n for n in dir(SimulatedUserEnvironment) if not n.startswith("_") and callable(getattr(SimulatedUserEnvironment, n))}
    assert public == {"reset", "send_message", "get_reward"}  # TRL exposes every other public method as a tool


@pytest.fixture(scope="module")
def tool_agent(synthetic, tmp_path_factory):
    """A tiny ChatML agent fitted to answer every prompt (the tool schema, the system prompt and a
    logged opening) with one call of ``send_message``: a scripted policy in a real model."""
    _, convs, tiny = synthetic
    tmp = tmp_path_factory.mktemp("tool_agent")
    prompt = environment_dataset(convs[:1], SYSTEM)[0]["prompt"]
    tools = [get_json_schema(SimulatedUserEnvironment.send_message)]
    boilerplate = load_chat_model(tiny)[1].apply_chat_template(prompt, tools=tools, chat_template=tool_calling_chat_template(),
                                                               tokenize=False)
    base = build_tiny_chat_model(tmp / "base", [CALL, boilerplate, *(m.content for c in convs[:40] for m in c.messages)] * 2,
                                 vocab_size=600, d_model=64, n_layer=2, chat_template=tool_calling_chat_template())
    model, tok = load_chat_model(base)
    call = tok(CALL + "<|im_end|>", add_special_tokens=False)["input_ids"]
    env = SimulatedUserEnvironment(LMUser.from_pretrained(tiny, max_new_tokens=4), guess_judge)
    openings = [env.reset(**row) for row in environment_dataset(convs[:4], SYSTEM)]  # exactly what the GRPO run's users say
    rows = [tok.apply_chat_template(prompt[:-1] + [{"role": "user", "content": o}], tools=tools, add_generation_prompt=True,
                                    tokenize=True, return_dict=False) for o in openings]
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with torch_init_seed(0, "tool agent"):
        for _ in range(80):  # teacher forcing on exactly the tokens generation will see: every row ends in the call
            loss = sum(model(torch.tensor([r + call]), labels=torch.tensor([[-100] * len(r) + call])).loss for r in rows) / len(rows)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.save_pretrained(tmp / "agent")
    tok.save_pretrained(tmp / "agent")
    return tmp / "agent"


@pytest.mark.slow
def test_grpo_trainer_talks_to_the_simulated_user(synthetic, tool_agent, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    _, convs, base = synthetic
    sim = LMUser.from_pretrained(base, max_new_tokens=4)
    factory = environment_factory(sim.clone, guess_judge, max_turns=2, user_first=True, seed=1)
    _, tok = load_chat_model(tool_agent)
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=64, temperature=0.3, learning_rate=1e-4, logging_steps=1, report_to=[],
                      use_cpu=True, bf16=False, disable_tqdm=True, max_tool_calling_iterations=2, seed=0)
    trainer = GRPOTrainer(model=str(tool_agent), args=args, train_dataset=environment_dataset(convs[:4], SYSTEM),
                          processing_class=tok, environment_factory=factory)
    trainer.train()
    envs = factory.environments
    assert sum(e.calls for e in envs) > 0, "the agent never called the tool"
    spoken = [m for e in envs for m in e.transcript if m["role"] == "assistant"]
    assert spoken and all(m["content"] == "ask:>=2" for m in spoken)
    replies = [e.transcript[i + 1] for e in envs for i, m in enumerate(e.transcript[:-1]) if m["role"] == "assistant"]
    assert replies and all(r["role"] == "user" for r in replies)
    assert any(h.get("tools/call_frequency", 0) > 0 for h in trainer.state.log_history)
    assert any("rewards/SimulatedUserEnvironment/mean" in h for h in trainer.state.log_history)
