"""The token view of a hidden-goal task (docs/pipeline.md "One task, two views").

One vocabulary for every model: ``PAD``, ``BOS``, the agent's acts, the user's acts and one token
per goal. A dialogue of ``H`` turns is ``[BOS, a_0, u_0, a_1, u_1, ..., a_{H-1}, u_{H-1}]`` in the
agent's view; the user model's view puts the goal token first: ``[g, BOS, a_0, u_0, ...]`` (the goal
is visible to the user model only). After a proposal is accepted the remaining turns are ``PAD``
and masked out. Every act is one token, so each turn's distribution is a next-token distribution
over a small vocabulary and per-turn TV distances are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.tasks import ACCEPT, CLARIFY, N_BASE_USER_ACTS, NO, QUIT, REJECT, YES, HiddenGoalTask, user_acts

PAD, BOS = 0, 1


@dataclass(frozen=True)
class Vocab:
    """Token ids of a task's acts and goals."""

    task: HiddenGoalTask

    @property
    def n_agent(self) -> int:
        return self.task.n_actions

    @property
    def n_user(self) -> int:
        return N_BASE_USER_ACTS + self.task.n_goals

    @property
    def agent_offset(self) -> int:
        return 2

    @property
    def user_offset(self) -> int:
        return 2 + self.n_agent

    @property
    def goal_offset(self) -> int:
        return 2 + self.n_agent + self.n_user

    @property
    def size(self) -> int:
        return self.goal_offset + self.task.n_goals

    def names(self) -> list[str]:
        """Readable name of every token id."""
        return ["<pad>", "<bos>"] + list(self.task.agent_acts) + list(user_acts(self.task)) + [f"goal:{g}" for g in self.task.goals]

    def valid_user_acts(self) -> torch.Tensor:
        """``[A, K]`` bool: user acts that can answer each agent act (questions: yes / no / clarify /
        quit / any leak; proposals: accept / reject). Every user model is restricted to these."""
        A, K, Q = self.n_agent, self.n_user, self.task.n_questions
        valid = torch.zeros(A, K, dtype=torch.bool)
        valid[:Q, [YES, NO, CLARIFY, QUIT]] = True
        valid[:Q, N_BASE_USER_ACTS:] = True
        valid[Q:, [ACCEPT, REJECT]] = True
        return valid


def encode(vocab: Vocab, dialogues: list[Dialogue]) -> dict[str, torch.Tensor]:
    """Token tensors of logged dialogues (all padded to ``H`` turns).

    Returns:
        agent_view: ``[N, 1 + 2H]`` tokens ``BOS, a_0, u_0, ...``.
        user_view: ``[N, 2 + 2H]`` tokens ``g, BOS, a_0, u_0, ...``.
        actions, acts: ``[N, H]`` act indices (-1 after the end).
        turn_mask: ``[N, H]`` 1 where the turn happened.
        goals: ``[N]``.
        togo: ``[N, H]`` judged return-to-go of the logged continuation from each turn.
    """
    H = vocab.task.horizon
    N = len(dialogues)
    actions = np.full((N, H), -1)
    acts = np.full((N, H), -1)
    togo = np.zeros((N, H))
    for i, d in enumerate(dialogues):
        actions[i, : len(d.actions)] = d.actions
        acts[i, : len(d.acts)] = d.acts
        togo[i, : len(d.rewards)] = np.cumsum(np.asarray(d.rewards)[::-1])[::-1]
    actions_t, acts_t = torch.as_tensor(actions), torch.as_tensor(acts)
    mask = actions_t >= 0
    turns = torch.stack([torch.where(mask, actions_t + vocab.agent_offset, PAD),
                         torch.where(mask, acts_t + vocab.user_offset, PAD)], dim=2).reshape(N, 2 * H)
    bos = torch.full((N, 1), BOS)
    goals = torch.as_tensor([d.goal for d in dialogues])
    return {
        "agent_view": torch.cat([bos, turns], 1),
        "user_view": torch.cat([(goals + vocab.goal_offset)[:, None], bos, turns], 1),
        "actions": actions_t,
        "acts": acts_t,
        "turn_mask": mask.float(),
        "goals": goals,
        "togo": torch.as_tensor(togo, dtype=torch.float32),
    }
