"""Where a GRPO run's policy gradient can come from, measured before training.

GRPO's advantage is a reward minus its group's mean: a group whose generations all earn the same
goal success teaches nothing about success. :func:`rollout_signal` rolls an agent out against a
simulator several times per goal and reports how many goals would give a group of ``group``
generations some variance in success (:func:`mixed_group_share`), beside the greedy agent's
success, overall and split by whether the simulator's opening stated the goal (an agent that is
never told the goal cannot be paid for reaching it, whatever it learns), and, with a task's
``failure_mode(goal, messages)``, how the greedy dialogues end on each side of that split (where
an agent that is told the goal still fails, and so where RL against that user has room to gain).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from math import comb
from typing import Any

import numpy as np
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.paradigms import evaluate_agent
from shiftbounds.conversations.records import ConversationData, as_conversations
from shiftbounds.conversations.simulators import UserSimulator
from shiftbounds.conversations.tasks import Judge
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import derive_seed
from shiftbounds.utils.stats import proportion_ci


def mixed_group_share(successes: Sequence[int], draws: int, group: int) -> float:
    """The expected share of goals at which a group of ``group`` generations has both a success and
    a failure, estimated without bias from ``draws`` >= ``group`` draws per goal with
    ``successes[i]`` successes at goal ``i``: the share of the ``group``-subsets of each goal's draws
    that are mixed, ``1 - (C(s, g) + C(k - s, g)) / C(k, g)``, averaged over goals.

    Raises:
        ValueError: ``group`` < 2, ``draws`` < ``group``, no goal, or a count outside [0, draws].
    """
    if group < 2 or draws < group:
        raise ValueError(f"need 2 <= group <= draws; got group {group}, draws {draws}")
    s = [int(x) for x in successes]
    if not s or min(s) < 0 or max(s) > draws:
        raise ValueError(f"successes must be counts in [0, {draws}], one per goal; got {list(successes)[:10]}")
    total = comb(draws, group)
    return float(np.mean([1.0 - (comb(x, group) + comb(draws - x, group)) / total for x in s]))


def share(flags: np.ndarray) -> dict:
    """A share of ``flags`` with its 95 % interval (:func:`~shiftbounds.utils.stats.proportion_ci`) and ``n``."""
    e = proportion_ci(int(flags.sum()), len(flags))
    return {"value": e.value, "low": e.low, "high": e.high, "n": len(flags)}


def rollout_signal(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, convs: ConversationData, simulator_factory: Callable[[], UserSimulator], judge: Judge, *,
                   draws: int, group: int, temperature: float, max_turns: int, max_new_tokens: int,
                   discloses: Callable[[str, Any], bool] | None = None,
                   failure_mode: Callable[[Any, list[dict]], str] | None = None, system: str | None = None, user_first: bool = True,
                   seed: int = 0, progress: Progress | None = None) -> dict:
    """The agent's goal success against fresh simulators on ``convs``' goals: greedily once, and
    ``draws`` times at ``temperature`` (GRPO's rollouts); per goal, the successes of the draws.

    Returns ``greedy`` and ``sampled`` success (shares with 95 % intervals), ``goals_by_successes``
    (how many goals had 0, 1, ..., ``draws`` successes), ``mixed_group_share``
    (:func:`mixed_group_share` for groups of ``group``) and, with ``discloses(opening, goal)`` and
    the simulator opening (``user_first``), the greedy dialogues' ``opening_discloses`` share and
    greedy success where it did and where it did not; with ``failure_mode(goal, messages) -> str`` as
    well, ``failure_modes``: per side of that split, how many greedy dialogues ended in each mode
    (keys in order of first appearance). ``progress`` is updated after each pass. A
    mixed share of 0 (no success gradient at all) warns (``RuntimeWarning``).

    Raises:
        ValueError: ``group`` outside [2, ``draws``], ``temperature`` <= 0, ``discloses`` without
            ``user_first``, or ``failure_mode`` without ``discloses``.
    """
    convs = as_conversations(convs)
    if not 2 <= group <= draws or temperature <= 0:
        raise ValueError(f"need 2 <= group <= draws and a sampling temperature > 0; got group {group}, draws {draws}, {temperature}")
    if discloses is not None and not user_first:
        raise ValueError("discloses reads the simulator's opening: it needs user_first=True")
    if failure_mode is not None and discloses is None:
        raise ValueError("failure_mode splits the greedy dialogues by disclosure: it needs discloses")
    kw = dict(max_turns=max_turns, max_new_tokens=max_new_tokens, system=system, user_first=user_first)

    def once(temp: float, key: tuple, transcripts: bool = False) -> dict:
        r = evaluate_agent(model, tokenizer, convs, simulator_factory, judge, temperature=temp, seed=derive_seed(seed, *key),
                           return_transcripts=transcripts, **kw)
        if progress is not None:
            progress.update(note=f"{key[0]} pass: success {r['mean']:.3f}")
        return r

    greedy = once(0.0, ("greedy",), discloses is not None)
    sampled = np.array([once(temperature, ("draw", d))["rewards"] for d in range(draws)]) >= 1.0
    wins = sampled.sum(axis=0)
    g = np.array(greedy["rewards"]) >= 1.0
    out = {"n_goals": len(convs), "draws": draws, "group": group, "temperature": temperature,
           "greedy": share(g), "sampled": share(sampled.ravel()),
           "goals_by_successes": {str(k): int((wins == k).sum()) for k in range(draws + 1)},
           "mixed_group_share": mixed_group_share(wins, draws, group)}
    if out["mixed_group_share"] == 0:
        warnings.warn(f"no goal gave two of its {draws} draws different goal success: GRPO from this agent against this "
                      "simulator gets no gradient for success (an agent that never or always succeeds, or samples one answer)",
                      RuntimeWarning, stacklevel=2)
    if discloses is not None:
        told = np.array([discloses(t["messages"][1]["content"], c.goal) for t, c in zip(greedy["transcripts"], convs)])
        out |= {"opening_discloses": share(told),
                "greedy, opening discloses": share(g[told]) if told.any() else None,
                "greedy, opening does not": share(g[~told]) if (~told).any() else None}
        if failure_mode is not None:
            modes = [failure_mode(c.goal, t["messages"]) for t, c in zip(greedy["transcripts"], convs)]
            out["failure_modes"] = {side: dict(Counter(m for m, k in zip(modes, told) if k == flag))
                                    for side, flag in (("opening discloses", True), ("opening does not", False))}
    return out
