"""Multi-turn rollouts for TRL's ``GRPOTrainer``: the agent writes a turn, a
:class:`~shiftbounds.conversations.simulators.UserSimulator` answers, and so on.

:func:`make_rollout_func` builds the ``rollout_func`` the trainer calls with a batch of prompts.
Every dataset row's prompt is the agent's system prompt tagged with the conversation's key
(``[conversation <id>]``, see :func:`agent_prompt`): the key finds the goal that the simulator is
told and the judge scores against, while the agent never sees the goal. For each prompt the
function returns one dialogue as TRL expects it:

* ``prompt_ids`` — the agent's chat-templated prompt;
* ``completion_ids`` — every later token, the agent's turns and the simulator's turns in order;
* ``env_mask`` — 1 on the agent's tokens, 0 on the simulator's: the trainer's loss and KL never
  touch a user token;
* ``logprobs`` — the sampling log-probabilities of the agent's tokens (0 on user tokens);
* ``judge_reward`` — ``judge(goal, messages)``, passed to :func:`judge_reward_func`.

The user's turns are spliced in as the chat template renders them (the template must render a
conversation's prefix as a prefix of the whole, as common templates do; a template that does not is
refused with an error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from shiftbounds.conversations.simulators import UserSimulator
from shiftbounds.conversations.tasks import Judge
from shiftbounds.losses import token_log_probs
from shiftbounds.utils.seeding import derive_seed, torch_init_seed

KEY_TAG = "[conversation {key}]"


def agent_prompt(system: str, key: str) -> list[dict]:
    """A dataset row's prompt: the agent's ``system`` prompt tagged with the conversation ``key``."""
    return [{"role": "system", "content": f"{system}\n{KEY_TAG.format(key=key)}"}]


def _key(prompt: list[dict]) -> str:
    text = prompt[0]["content"]
    start = text.rfind("[conversation ")
    if start < 0 or not text.endswith("]"):
        raise ValueError(f"prompt {text!r} carries no '[conversation <id>]' tag; build prompts with agent_prompt()")
    return text[start + len("[conversation "): -1]


def _render(tokenizer, messages: list[dict], generation_prompt: bool) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False))


def _user_block(tokenizer, messages: list[dict]) -> list[int]:
    """The tokens the template adds for the last (user) message and the next generation prompt."""
    before, after = _render(tokenizer, messages[:-1], False), _render(tokenizer, messages, True)
    if after[: len(before)] != before:
        raise ValueError("the chat template does not render a conversation's prefix as a prefix of the whole; "
                         "multi-turn rollouts need a prefix-stable template")
    return after[len(before):]


@torch.no_grad()
def _agent_turn(model, context: list[int], *, max_new_tokens: int, temperature: float, eos: int, seed: int):
    """Sample one agent turn after ``context``: ``(token ids, their log-probabilities)``."""
    ids = torch.tensor([context], device=model.device)
    with torch_init_seed(seed, "agent_turn"):  # generate() draws from the global generator
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=True,
                             temperature=temperature, top_k=None, top_p=None, eos_token_id=eos, pad_token_id=eos,
                             output_scores=True, return_dict_in_generate=True)
    new = out.sequences[0, ids.shape[1]:]
    logps = token_log_probs(torch.stack([s[0] for s in out.scores]), new).tolist()
    return new.tolist(), logps


def rollout_dialogue(model, tokenizer, prompt: list[dict], goal: Any, simulator: UserSimulator, judge: Judge, *,
                     max_turns: int, max_new_tokens: int, temperature: float, seed: int) -> dict:
    """One dialogue from ``prompt`` (see the module docstring for the fields returned)."""
    prompt_ids = _render(tokenizer, prompt, True)
    simulator.reset(goal, seed=derive_seed(seed, "user"))
    completion, mask, logps, messages = [], [], [], []
    for turn in range(max_turns):
        toks, lps = _agent_turn(model, prompt_ids + completion, max_new_tokens=max_new_tokens, temperature=temperature,
                                eos=tokenizer.eos_token_id, seed=derive_seed(seed, "agent", turn))
        completion += toks
        mask += [1] * len(toks)
        logps += lps
        messages.append({"role": "assistant", "content": tokenizer.decode(toks, skip_special_tokens=True).strip()})
        reply, done = simulator.respond(messages)
        messages.append({"role": "user", "content": reply})
        if done or turn + 1 == max_turns:
            break
        # the agent's turn as sampled, closed by the end token if it ran out of tokens, then the user's
        # turn as the template renders it (neither is trained: env_mask 0)
        user = ([tokenizer.eos_token_id] if toks[-1:] != [tokenizer.eos_token_id] else []) + _user_block(tokenizer, prompt + messages)
        completion += user
        mask += [0] * len(user)
        logps += [0.0] * len(user)
    return {"prompt_ids": prompt_ids, "completion_ids": completion, "env_mask": mask, "logprobs": logps,
            "judge_reward": float(judge(goal, messages)), "messages": messages}


def make_rollout_func(goals: Mapping[str, Any], simulator_factory: Callable[[], UserSimulator], judge: Judge, *,
                      max_turns: int = 4, max_new_tokens: int = 16, temperature: float = 1.0, seed: int = 0):
    """The ``rollout_func`` for ``GRPOTrainer``: one dialogue per prompt it is given, against a fresh
    simulator from ``simulator_factory``, scored by ``judge``; ``goals`` maps each conversation key to
    its goal. Every dialogue's draws come from (``seed``, trainer step, position in the global batch),
    so a run on several processes rolls out the dialogues of a single-process run."""
    calls = {"n": 0}

    def rollout_func(prompts: Sequence[list[dict]], trainer) -> dict:
        model, tok = trainer.model, trainer.processing_class
        step = calls["n"]
        calls["n"] += 1
        was_training = model.training
        model.eval()
        offset = trainer.accelerator.process_index * len(prompts)  # the dialogue's place in the global batch
        outs = []
        for i, p in enumerate(prompts):
            key = _key(p)
            if key not in goals:
                raise KeyError(f"conversation {key!r} has no goal in the rollout's goal table")
            outs.append(rollout_dialogue(model, tok, p, goals[key], simulator_factory(), judge, max_turns=max_turns,
                                         max_new_tokens=max_new_tokens, temperature=temperature,
                                         seed=derive_seed(seed, step, offset + i)))
        model.train(was_training)
        return {k: [o[k] for o in outs] for k in ("prompt_ids", "completion_ids", "env_mask", "logprobs", "judge_reward")}

    return rollout_func


def judge_reward_func(prompts, completions, judge_reward, **_) -> list[float]:
    """The reward function that hands the rollout's judged rewards to the trainer."""
    return [float(r) for r in judge_reward]


# ------------------------------------------------------------------------ Static Context RL
def static_context_dataset(convs, system: str):
    """Static Context RL's training contexts: one row per agent turn of the logs, its prompt the
    agent's tagged system prompt (:func:`agent_prompt`, key ``<id>#<turn>``) and the logged history
    before that turn; returns ``(datasets.Dataset, goals by key)``. The trainer's own single-turn
    generation completes each context once per generation."""
    from datasets import Dataset

    rows, goals = [], {}
    for c in convs:
        msgs = [m.as_dict() for m in c.messages if m.role in ("user", "assistant")]
        for j, m in enumerate(msgs):
            if m["role"] == "assistant":
                key = f"{c.id}#{j}"
                rows.append({"prompt": agent_prompt(system, key) + msgs[:j]})
                goals[key] = c.goal
    if not rows:
        raise ValueError("the conversations hold no agent turn to train on")
    return Dataset.from_list(rows), goals


def static_reward_func(goals: Mapping[str, Any], judge: Judge):
    """The reward function of Static Context RL: the judge scores the logged history followed by the
    agent's one new turn (the dialogue does not continue: no simulator)."""
    def reward(prompts, completions, **_) -> list[float]:
        out = []
        for p, c in zip(prompts, completions):
            text = c[0]["content"] if isinstance(c, list) else c
            out.append(float(judge(goals[_key(p)], list(p[1:]) + [{"role": "assistant", "content": text}])))
        return out

    reward.__name__ = "static_judge_reward"
    return reward
