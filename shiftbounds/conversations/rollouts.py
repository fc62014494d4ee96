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

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.models import chat_ids
from shiftbounds.conversations.sampling import sample_batch
from shiftbounds.conversations.simulators import UserSimulator, respond_all
from shiftbounds.conversations.tasks import Judge
from shiftbounds.utils.seeding import derive_seed, torch_generator

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


def _user_block(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> list[int]:
    """The tokens the template adds for the last (user) message and the next generation prompt."""
    before, after = chat_ids(tokenizer, messages[:-1], False), chat_ids(tokenizer, messages, True)
    if after[: len(before)] != before:
        raise ValueError("the chat template does not render a conversation's prefix as a prefix of the whole; "
                         "multi-turn rollouts need a prefix-stable template")
    return after[len(before):]


def rollout_dialogues(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: Sequence[list[dict]], goals: Sequence[Any],
                      simulators: Sequence[UserSimulator], judge: Judge, *, max_turns: int, max_new_tokens: int,
                      temperature: float, seeds: Sequence[int], user_first: bool = False) -> list[dict]:
    """One dialogue per prompt, all at once: each agent turn is one batched, cached sampling call over
    the dialogues still open, and LM simulators sharing a model answer in one batch
    (:func:`~shiftbounds.conversations.simulators.respond_all`). Dialogue ``i`` draws from
    ``seeds[i]`` only (its own generators), so it is the same whatever else is in the batch.
    ``user_first``: the simulator opens the dialogue (as customers do on Taskmaster-4); its opening
    is part of the agent's prompt, not of the completion."""
    n = len(prompts)
    if not len(goals) == len(simulators) == len(seeds) == n:
        raise ValueError(f"need as many goals, simulators and seeds as prompts ({n}); got {len(goals)}, {len(simulators)}, {len(seeds)}")
    eos = tokenizer.eos_token_id
    for sim, goal, seed in zip(simulators, goals, seeds):
        sim.reset(goal, seed=derive_seed(seed, "user"))
    gens = [torch_generator(seed, "agent") for seed in seeds]
    completion, mask, logps, messages = ([[] for _ in range(n)] for _ in range(4))
    if user_first:
        for i, (opening, _) in enumerate(respond_all(simulators, [[] for _ in range(n)])):
            messages[i].append({"role": "user", "content": opening})
    prompt_ids = [chat_ids(tokenizer, list(p) + messages[i], True) for i, p in enumerate(prompts)]
    was_training = model.training
    model.eval()
    open_ = list(range(n))
    for turn in range(max_turns):
        rows, lps = sample_batch(model, [prompt_ids[i] + completion[i] for i in open_], max_new_tokens, stop_ids=[eos],
                                 pad_id=tokenizer.pad_token_id, temperature=temperature, generator=[gens[i] for i in open_],
                                 return_log_probs=True)
        for i, toks, lp in zip(open_, rows, lps):
            completion[i] += toks
            mask[i] += [1] * len(toks)
            logps[i] += lp
            messages[i].append({"role": "assistant", "content": tokenizer.decode(toks, skip_special_tokens=True).strip()})
        replies = respond_all([simulators[i] for i in open_], [messages[i] for i in open_])
        still = []
        for i, (reply, done) in zip(open_, replies):
            messages[i].append({"role": "user", "content": reply})
            if done or turn + 1 == max_turns:
                continue
            # the agent's turn as sampled, closed by the end token if it ran out of tokens, then the user's
            # turn as the template renders it (neither is trained: env_mask 0)
            user = ([eos] if completion[i][-1:] != [eos] else []) + _user_block(tokenizer, list(prompts[i]) + messages[i])
            completion[i] += user
            mask[i] += [0] * len(user)
            logps[i] += [0.0] * len(user)
            still.append(i)
        open_ = still
        if not open_:
            break
    model.train(was_training)
    return [{"prompt_ids": prompt_ids[i], "completion_ids": completion[i], "env_mask": mask[i], "logprobs": logps[i],
             "judge_reward": float(judge(goals[i], messages[i])), "messages": messages[i]} for i in range(n)]


def rollout_dialogue(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompt: list[dict], goal: Any, simulator: UserSimulator, judge: Judge, *,
                     max_turns: int, max_new_tokens: int, temperature: float, seed: int) -> dict:
    """One dialogue from ``prompt`` (:func:`rollout_dialogues` with one prompt; the module docstring
    lists the fields returned)."""
    return rollout_dialogues(model, tokenizer, [prompt], [goal], [simulator], judge, max_turns=max_turns,
                             max_new_tokens=max_new_tokens, temperature=temperature, seeds=[seed])[0]


def make_rollout_func(goals: Mapping[str, Any], simulator_factory: Callable[[], UserSimulator], judge: Judge, *,
                      max_turns: int = 4, max_new_tokens: int = 16, temperature: float = 1.0, seed: int = 0,
                      user_first: bool = False, credit: Judge | None = None):
    """The ``rollout_func`` for ``GRPOTrainer``: one dialogue per prompt it is given, against a fresh
    simulator from ``simulator_factory``, scored by ``judge`` (and by ``credit``, a partial-credit
    judge, into ``credit_reward`` when given); ``goals`` maps each conversation key to its goal. Every
    dialogue's draws come from (``seed``, trainer step, position in the global batch), so a run on
    several processes rolls out the dialogues of a single-process run, and a run resumed from a
    checkpoint those of the uninterrupted one (the trainer generates once per optimiser step: the
    count of calls starts at the step it resumes from)."""
    calls = {"n": None}

    def rollout_func(prompts: Sequence[list[dict]], trainer) -> dict:
        if calls["n"] is None:
            calls["n"] = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        step = calls["n"]
        calls["n"] += 1
        offset = trainer.accelerator.process_index * len(prompts)  # the dialogue's place in the global batch
        keys = [_key(p) for p in prompts]
        missing = [k for k in keys if k not in goals]
        if missing:
            raise KeyError(f"conversation(s) {missing} have no goal in the rollout's goal table")
        outs = rollout_dialogues(trainer.model, trainer.processing_class, prompts, [goals[k] for k in keys],
                                 [simulator_factory() for _ in prompts], judge, max_turns=max_turns,
                                 max_new_tokens=max_new_tokens, temperature=temperature,
                                 seeds=[derive_seed(seed, step, offset + i) for i in range(len(prompts))],
                                 user_first=user_first)
        out = {k: [o[k] for o in outs] for k in ("prompt_ids", "completion_ids", "env_mask", "logprobs", "judge_reward")}
        if credit is not None:
            out["credit_reward"] = [float(credit(goals[k], o["messages"])) for k, o in zip(keys, outs)]
        return out

    return rollout_func


def judge_reward_func(prompts, completions, judge_reward, **_) -> list[float]:
    """The reward function that hands the rollout's judged rewards to the trainer."""
    return [float(r) for r in judge_reward]


def credit_reward_func(prompts, completions, credit_reward, **_) -> list[float]:
    """The reward function that hands the rollout's partial credit to the trainer."""
    return [float(r) for r in credit_reward]


# ------------------------------------------------------------------------ Static Context RL
def static_context_dataset(convs, system: str):
    """Static Context RL's training contexts: one row per agent turn of the logs, its prompt the
    agent's tagged system prompt (:func:`agent_prompt`, key ``<id>#<turn>``) and the logged history
    before that turn; returns ``(datasets.Dataset, goals by key)``. The trainer's own single-turn
    generation completes each context once per generation."""
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


def static_reward_func(goals: Mapping[str, Any], judge: Judge, name: str = "static_judge_reward"):
    """The reward function of Static Context RL, named ``name``: the judge scores the logged history
    followed by the agent's one new turn (the dialogue does not continue: no simulator)."""
    def reward(prompts, completions, **_) -> list[float]:
        out = []
        for p, c in zip(prompts, completions):
            text = c[0]["content"] if isinstance(c, list) else c
            out.append(float(judge(goals[_key(p)], list(p[1:]) + [{"role": "assistant", "content": text}])))
        return out

    reward.__name__ = name
    return reward
