"""Logged dialogues: sampling ``pi_data`` against a user, and the JSONL format real logs can use.

One dialogue per line::

    {"dialogue_id": "guess_number-000017", "task": "guess_number", "goal": "3",
     "turns": [{"agent": "ask:>=2", "user": "yes", "reward": 0.0},
               {"agent": "propose:3", "user": "accept", "reward": 1.0}]}

``agent`` and ``user`` are act names from the task's vocabularies
(:attr:`HiddenGoalTask.agent_acts`, :func:`~shiftbounds.dialogue.tasks.user_acts`); ``reward`` is
the goal-aware judge's reward of the agent act. A dialogue stops when a proposal is accepted, when
the user quits, or after ``H`` agent turns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shiftbounds.dialogue.summary import SummarySpace, next_state, response_table
from shiftbounds.dialogue.tasks import HiddenGoalTask, UserModel, judge_reward, user_acts
from shiftbounds.utils.io import atomic_write_text, jsonl_records


@dataclass(frozen=True)
class Dialogue:
    """One logged dialogue as integer ids (see the module docstring for the file format).

    Attributes:
        goal: goal index.
        actions: agent act per turn.
        acts: user act per turn.
        states: summary index before each turn (``len(actions)`` entries).
        rewards: judged reward per turn.
    """

    goal: int
    actions: tuple[int, ...]
    acts: tuple[int, ...]
    states: tuple[int, ...]
    rewards: tuple[float, ...]

    @property
    def success(self) -> bool:
        """The dialogue ended with the true goal accepted."""
        return bool(self.rewards) and self.rewards[-1] == 1.0


def sample_dialogues(space: SummarySpace, policy: np.ndarray, user: UserModel, n: int, *,
                     rng: np.random.Generator) -> list[Dialogue]:
    """``n`` dialogues of ``policy[t, s, a]`` (over summaries) with ``user``; goals from the prior."""
    task = space.task
    if user.has_memory and not space.memory:
        raise ValueError(f"user model {user.name!r} has memory; sample it on a space built with memory=True")
    table = response_table(task, user)  # [H, A, G, 3, H, K]
    first, repeats = space.first_answers(), np.minimum(space.repeats(), task.horizon - 1)
    out = []
    for _ in range(n):
        x = int(rng.choice(task.n_goals, p=task.prior))
        s = 1
        actions, acts, states, rewards = [], [], [], []
        for t in range(task.horizon):
            a = int(rng.choice(task.n_actions, p=policy[t, s]))
            prev = first[s, a] if task.is_question(a) else -1
            k = int(rng.choice(space.n_user_acts, p=table[t, a, x, prev + 1, repeats[s]]))
            actions.append(a), acts.append(k), states.append(s), rewards.append(judge_reward(task, a, x))
            s = int(space.successor[s, a, k])
            if s == 0:
                break
        out.append(Dialogue(x, tuple(actions), tuple(acts), tuple(states), tuple(rewards)))
    return out


def to_records(task: HiddenGoalTask, dialogues: list[Dialogue], prefix: str | None = None) -> list[dict]:
    """Dialogues as JSON-able records in the documented schema."""
    names_a, names_u = task.agent_acts, user_acts(task)
    prefix = prefix or task.name
    return [
        {
            "dialogue_id": f"{prefix}-{i:06d}",
            "task": task.name,
            "goal": task.goals[d.goal],
            "turns": [{"agent": names_a[a], "user": names_u[k], "reward": r}
                      for a, k, r in zip(d.actions, d.acts, d.rewards)],
        }
        for i, d in enumerate(dialogues)
    ]


def write_jsonl(path: str | Path, task: HiddenGoalTask, dialogues: list[Dialogue]) -> Path:
    """Write dialogues as JSONL (atomically)."""
    lines = [json.dumps(r) for r in to_records(task, dialogues)]
    return atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def read_jsonl(path: str | Path, space: SummarySpace) -> list[Dialogue]:
    """Read dialogues in the documented schema and replay their summaries.

    Raises:
        ValueError: naming the file, line and field when a record does not fit the task.
    """
    task = space.task
    a_idx = {n: i for i, n in enumerate(task.agent_acts)}
    u_idx = {n: i for i, n in enumerate(user_acts(task))}
    g_idx = {n: i for i, n in enumerate(task.goals)}
    out = []
    for where, rec in jsonl_records(path):
        if rec.get("task") != task.name:
            raise ValueError(f"{where}: task {rec.get('task')!r} does not match {task.name!r}")
        if rec.get("goal") not in g_idx:
            raise ValueError(f"{where}: goal {rec.get('goal')!r} is not one of {list(task.goals)}")
        s, actions, acts, states, rewards = 1, [], [], [], []
        for j, turn in enumerate(rec.get("turns", [])):
            if turn.get("agent") not in a_idx or turn.get("user") not in u_idx:
                raise ValueError(f"{where}: turn {j} has unknown acts agent={turn.get('agent')!r} user={turn.get('user')!r}")
            if s == 0 or j >= task.horizon:
                raise ValueError(f"{where}: turn {j} comes after the dialogue ended (accepted, or horizon {task.horizon})")
            a, k = a_idx[turn["agent"]], u_idx[turn["user"]]
            if next_state(task, space.states[s], a, k) is None:
                raise ValueError(f"{where}: turn {j}: user act {turn['user']!r} is impossible after {turn['agent']!r}")
            s2 = int(space.successor[s, a, k])  # -1 only after the last turn, where it is unused
            actions.append(a), acts.append(k), states.append(s), rewards.append(float(turn.get("reward", 0.0)))
            s = s2
        out.append(Dialogue(g_idx[rec["goal"]], tuple(actions), tuple(acts), tuple(states), tuple(rewards)))
    return out


def split(dialogues: list[Dialogue], held_out_fraction: float, *, rng: np.random.Generator) -> tuple[list, list]:
    """Random train / held-out split by dialogue."""
    if not 0 <= held_out_fraction < 1:
        raise ValueError(f"held_out_fraction must lie in [0, 1); got {held_out_fraction}")
    perm = rng.permutation(len(dialogues))
    k = int(round(held_out_fraction * len(dialogues)))
    return [dialogues[i] for i in perm[k:]], [dialogues[i] for i in perm[:k]]
