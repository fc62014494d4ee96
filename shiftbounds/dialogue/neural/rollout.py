"""Batched multi-turn rollouts of an agent against a user model, with key-value caches.

Many dialogues run at once: at every turn the agent network reads only the new tokens through its
cache and proposes a distribution over its acts; the user (an explicit
:class:`~shiftbounds.dialogue.tasks.UserModel`, or a transformer user simulator with its own cache
over the goal-first view) answers. The rollout returns every quantity the measurements need:
sampled acts, the agent's and the user's *exact* per-turn distributions (and the real user's, when
asked, for ``delta_t``), log-probabilities and both rewards (goal-aware judge; the user's own
acceptance). Tokens after a dialogue ends are ``PAD`` and masked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from shiftbounds.dialogue.neural.tokens import BOS, PAD, Vocab
from shiftbounds.dialogue.summary import response_table
from shiftbounds.dialogue.tasks import ACCEPT, ENDING_ACTS, NO, REJECT, YES, HiddenGoalTask, UserModel, judge_reward
from shiftbounds.nn.generate import sample_tokens
from shiftbounds.nn.transformer import Transformer


@dataclass(frozen=True)
class Memory:
    """What a history-dependent user remembers of each of ``B`` dialogues: ``first [B, Q]`` (its first
    answer to each question, -1 if never answered) and ``repeats [B]`` (questions asked again)."""

    first: torch.Tensor
    repeats: torch.Tensor

    @staticmethod
    def empty(task: HiddenGoalTask, batch: int, device=None) -> Memory:
        return Memory(torch.full((batch, task.n_questions), -1, dtype=torch.long, device=device),
                      torch.zeros(batch, dtype=torch.long, device=device))

    def previous(self, task: HiddenGoalTask, actions: torch.Tensor) -> torch.Tensor:
        """``[B]`` the earlier answer to the asked question (-1 for none, and for proposals)."""
        Q = task.n_questions
        prev = self.first.gather(1, actions.clamp(0, Q - 1)[:, None])[:, 0]
        return torch.where((actions >= 0) & (actions < Q), prev, -1)

    def after(self, task: HiddenGoalTask, actions: torch.Tensor, acts: torch.Tensor, alive: torch.Tensor) -> Memory:
        """The memory after the agent's ``actions`` and the user's ``acts`` in the ``alive`` dialogues
        (the same update as :func:`~shiftbounds.dialogue.summary.next_state`)."""
        prev = self.previous(task, actions)
        question = alive & (actions >= 0) & (actions < task.n_questions)
        repeats = self.repeats + (question & (prev >= 0)).long()
        answered = question & (prev < 0) & ((acts == YES) | (acts == NO))
        first = self.first.clone()
        rows = torch.nonzero(answered)[:, 0]
        first[rows, actions[rows]] = (acts[rows] == YES).long()
        return Memory(first, repeats)


class ExplicitUser:
    """A user with explicit probabilities, read from
    :func:`~shiftbounds.dialogue.summary.response_table` ``[H, A, G, 3, H, K]``."""

    def __init__(self, task: HiddenGoalTask, model: UserModel) -> None:
        self.task, self.model = task, model
        self.table = torch.tensor(response_table(task, model), dtype=torch.float64)

    def probs(self, goals: torch.Tensor, actions: torch.Tensor, turn: int, memory: Memory,
              dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``[B, K]`` response distributions at turn ``turn`` (float32 by default, like the networks' outputs)."""
        prev = memory.previous(self.task, actions) + 1
        reps = memory.repeats.clamp_max(self.task.horizon - 1)
        return self.table.to(goals.device)[turn, actions.clamp_min(0), goals, prev, reps].to(dtype)

    def all_probs(self, goals: torch.Tensor, turn: int, memory: Memory) -> torch.Tensor:
        """``[B, A, K]`` (float64) the reply distribution after every agent act."""
        A = self.task.n_actions
        return torch.stack([self.probs(goals, torch.full_like(goals, a), turn, memory, torch.float64) for a in range(A)], 1)

    def at_histories(self, goals: torch.Tensor, actions: torch.Tensor, acts: torch.Tensor) -> torch.Tensor:
        """``[N, H, K]`` the reply distribution at every turn of logged histories (``actions`` and
        ``acts`` ``[N, H]``, ``-1`` after the end)."""
        memories = memory_along(self.task, actions, acts)
        return torch.stack([self.probs(goals, actions[:, t], t, m) for t, m in enumerate(memories)], 1)


def memory_along(task: HiddenGoalTask, actions: torch.Tensor, acts: torch.Tensor) -> list[Memory]:
    """The :class:`Memory` before every turn of histories ``actions``, ``acts`` ``[N, H]`` (-1 after the end)."""
    memory = Memory.empty(task, actions.shape[0], actions.device)
    out = []
    for t in range(actions.shape[1]):
        out.append(memory)
        memory = memory.after(task, actions[:, t], acts[:, t], actions[:, t] >= 0)
    return out


class NeuralUser:
    """A transformer user simulator over the goal-first view; answers are restricted to the acts
    that can follow the agent's act (:meth:`Vocab.valid_user_acts`)."""

    def __init__(self, vocab: Vocab, net: Transformer) -> None:
        self.vocab, self.net = vocab, net
        self.valid = vocab.valid_user_acts()

    def start(self, goals: torch.Tensor):
        """Feed ``[goal, BOS]``; returns the cache."""
        prefix = torch.stack([goals + self.vocab.goal_offset, torch.full_like(goals, BOS)], 1)
        _, cache = self.net(prefix)
        return cache

    def step(self, cache, new_tokens: torch.Tensor, actions: torch.Tensor):
        """Feed ``new_tokens [B, n]`` (the user's previous act, if any, and the agent's new act) in
        one call; returns the user's answer distribution ``[B, K]`` and the cache."""
        logits, cache = self.net(new_tokens, cache)
        v = self.vocab
        lu = logits[:, -1, v.user_offset: v.user_offset + v.n_user]
        lu = lu.masked_fill(~self.valid.to(lu.device)[actions], float("-inf"))
        return torch.softmax(lu.float(), -1), cache


@dataclass(frozen=True)
class Rollout:
    """Everything one batch of dialogues produced (``B`` dialogues, ``H`` turns).

    Attributes:
        goals: ``[B]``.
        agent_view: ``[B, 1 + 2H]`` tokens as the agent saw them.
        actions, acts: ``[B, H]`` agent and user acts (``-1`` after the end).
        turn_mask: ``[B, H]`` 1 where the turn happened.
        agent_probs: ``[B, H, A]`` the agent's distribution at each turn (temperature 1).
        user_probs: ``[B, H, K]`` the answering user's distribution.
        real_probs: ``[B, H, K]`` the real user's distribution at the same context, or ``None``.
        judge_rewards: ``[B, H]`` goal-aware judge (1 right proposal, ``-penalty`` wrong, 0 question).
        accept_rewards: ``[B, H]`` the answering user's acceptance (1 accept, ``-penalty`` reject).
    """

    goals: torch.Tensor
    agent_view: torch.Tensor
    actions: torch.Tensor
    acts: torch.Tensor
    turn_mask: torch.Tensor
    agent_probs: torch.Tensor
    user_probs: torch.Tensor
    real_probs: torch.Tensor | None
    judge_rewards: torch.Tensor
    accept_rewards: torch.Tensor

    @property
    def success(self) -> torch.Tensor:
        """``[B]``: the true goal was proposed (and so accepted by a real user)."""
        return (self.judge_rewards == 1.0).any(1).float()


@dataclass(frozen=True)
class RolloutNoise:
    """Common random numbers for evaluation rollouts: the goals ``[B]`` and one uniform per
    dialogue and turn for the agent's draw and for the user's ``[B, H]``.

    Every arm of a seed evaluated with the same noise meets the same goals, and where two agents
    reach the same history they act alike with the same probability law and their users answer
    alike: the paired difference between two arms then carries little evaluation noise.
    """

    goals: torch.Tensor
    agent_u: torch.Tensor
    user_u: torch.Tensor


def draw_noise(task: HiddenGoalTask, n: int, generator: torch.Generator) -> RolloutNoise:
    """``n`` goals and their uniforms, drawn from ``generator`` (on the CPU)."""
    goals = torch.randint(task.n_goals, (n,), generator=generator)
    return RolloutNoise(goals, torch.rand(n, task.horizon, generator=generator, dtype=torch.float64),
                        torch.rand(n, task.horizon, generator=generator, dtype=torch.float64))


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One draw per row of ``probs [B, V]`` from the uniforms ``u [B]`` in ``[0, 1)``: the first
    index whose cumulative probability exceeds ``u`` (so never an index of zero mass; the naive
    ``multinomial`` driven by a given uniform)."""
    cdf = probs.double().cumsum(-1)
    return (cdf <= (u.to(cdf.device) * cdf[:, -1])[:, None]).sum(-1).clamp_max(probs.shape[-1] - 1)


@torch.no_grad()
def rollout(vocab: Vocab, agent: Transformer, user: ExplicitUser | NeuralUser, goals: torch.Tensor | None = None, *,
            temperature: float = 1.0, generator: torch.Generator | None = None,
            real: ExplicitUser | None = None, noise: RolloutNoise | None = None) -> Rollout:
    """Run ``len(goals)`` dialogues of ``H`` turns; see :class:`Rollout`.

    With ``noise`` (:class:`RolloutNoise`, temperature 1 only), the goals and every draw come from
    it instead of ``goals`` and ``generator``, on the device of the agent."""
    task = vocab.task
    if noise is not None:
        if goals is not None or temperature != 1.0:
            raise ValueError("rollout with noise takes its goals from the noise and samples at temperature 1")
        goals = noise.goals.to(next(agent.parameters()).device)
    elif goals is None:
        raise ValueError("rollout needs goals (or noise)")
    H, B, Q, pen = task.horizon, goals.shape[0], task.n_questions, task.wrong_penalty
    dev = goals.device
    a_off, u_off = vocab.agent_offset, vocab.user_offset
    logits, agent_cache = agent(torch.full((B, 1), BOS, device=dev))
    user_cache = user.start(goals) if isinstance(user, NeuralUser) else None
    memory = Memory.empty(task, B, dev)
    alive = torch.ones(B, dtype=torch.bool, device=dev)
    toks = [torch.full((B,), BOS, device=dev)]
    pending = None  # the user's last act, fed to the user network together with the next agent act
    out = {k: [] for k in ("actions", "acts", "mask", "pa", "pu", "pr", "rj", "ra")}
    for t in range(H):
        la = logits[:, -1, a_off: a_off + vocab.n_agent].float()
        pa = torch.softmax(la, -1)
        a = sample_tokens(la, temperature, generator) if noise is None else inverse_cdf(pa, noise.agent_u[:, t])
        a_tok = torch.where(alive, a + a_off, PAD)
        if isinstance(user, NeuralUser):
            new = a_tok[:, None] if pending is None else torch.stack([pending, a_tok], 1)
            pu, user_cache = user.step(user_cache, new, a)
        else:
            pu = user.probs(goals, a, t, memory)
        u = (sample_tokens(torch.log(pu.clamp_min(1e-30)), 1.0, generator) if noise is None
             else inverse_cdf(pu, noise.user_u[:, t]))
        u_tok = torch.where(alive, u + u_off, PAD)
        proposal = a >= Q
        rj = judge_reward(task, a, goals) * alive
        ra = torch.where(proposal, torch.where(u == ACCEPT, 1.0, torch.where(u == REJECT, -pen, 0.0)), 0.0) * alive
        for key, val in (("actions", torch.where(alive, a, -1)), ("acts", torch.where(alive, u, -1)),
                         ("mask", alive.float()), ("pa", pa), ("pu", pu), ("rj", rj), ("ra", ra)):
            out[key].append(val)
        if real is not None:
            out["pr"].append(real.probs(goals, a, t, memory))
        pending = u_tok
        logits, agent_cache = agent(torch.stack([a_tok, u_tok], 1), agent_cache)
        toks += [a_tok, u_tok]
        memory = memory.after(task, a, u, alive)
        alive = alive & ~torch.isin(u, torch.tensor(ENDING_ACTS, device=dev))
    st = lambda key: torch.stack(out[key], 1)  # noqa: E731 - stack per-turn lists to [B, H, ...]
    return Rollout(goals, torch.stack(toks, 1), st("actions"), st("acts"), st("mask"), st("pa"), st("pu"),
                   st("pr") if real is not None else None, st("rj"), st("ra"))


def agent_turn_logits(vocab: Vocab, agent: Transformer, agent_view: torch.Tensor) -> torch.Tensor:
    """Agent-act logits at every agent turn, ``[B, H, A]``, from one forward pass over the agent view
    (position ``2t`` holds the token before ``a_t``)."""
    logits, _ = agent(agent_view[:, :-1])
    return logits[:, 0::2, vocab.agent_offset: vocab.agent_offset + vocab.n_agent]


def user_turn_logits(vocab: Vocab, user_net: Transformer, user_view: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """User-act logits at every user turn, ``[B, H, K]`` (position ``2 + 2t`` holds ``a_t``), restricted
    to the acts valid after each agent act (``actions`` ``[B, H]``, ``-1`` after the end)."""
    logits, _ = user_net(user_view[:, :-1])
    lu = logits[:, 2::2, vocab.user_offset: vocab.user_offset + vocab.n_user]
    valid = vocab.valid_user_acts().to(lu.device)[actions.clamp_min(0)]
    return lu.masked_fill(~valid, float("-inf"))


def user_answer_probs(vocab: Vocab, sim: ExplicitUser | Transformer, data: dict) -> torch.Tensor:
    """The simulator's answer distribution ``[N, H, K]`` at every logged history."""
    if isinstance(sim, ExplicitUser):
        return sim.at_histories(data["goals"], data["actions"], data["acts"])
    return torch.softmax(user_turn_logits(vocab, sim, data["user_view"], data["actions"]), -1)
