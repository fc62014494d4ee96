"""Per-turn measurements of neural agents and simulators from sampled dialogues (docs/pipeline.md "Measurements").

Estimators (each returns a mean and a 95 % CI per turn):

* ``eps_t`` — on histories of ``pi_data`` with the real user (logged dialogues, or a fresh sample
  from the same law): the exact TV between the agent's next-act distribution and ``pi_data``'s at
  that history (``pi_data`` acts on the summary of the history), averaged: an unbiased estimate;
* ``delta_t`` and ``rho_t`` — on the agent's *own* rollouts against the simulator: the exact TV
  between the real user's and the simulator's answer distributions after the sampled agent act
  (unbiased for ``sum_a pi(a|h) TV(...)``), and the reward mismatch there. The context is the pair
  (goal, history): the simulator answers knowing its goal, so this is the simulator error of the
  joint Markov state (docs/theory.md §1 allows any Markov summary);
* ``Delta_t`` and ``D_t`` — plug-in TV between the empirical distributions of the summary contexts
  of two samples (policy vs logs; real vs simulated user), with a bootstrap CI. Plug-in TV is
  biased upwards by about ``sqrt(S / n)`` for ``S`` occupied contexts; it lower-bounds the TV over
  full histories (data processing).
"""

from __future__ import annotations

import numpy as np
import torch

from shiftbounds.dialogue.neural.rollout import (
    ExplicitUser,
    NeuralUser,
    Rollout,
    RolloutNoise,
    agent_turn_logits,
    memory_along,
    rollout,
    user_answer_probs,
)
from shiftbounds.dialogue.neural.tokens import Vocab
from shiftbounds.dialogue.summary import SummarySpace
from shiftbounds.dialogue.tasks import ACCEPT, CLARIFY, N_BASE_USER_ACTS, NO, QUIT, YES, judge_reward
from shiftbounds.nn.transformer import Transformer
from shiftbounds.utils.stats import mean_ci


def _per_turn_ci(values: torch.Tensor, mask: torch.Tensor) -> dict:
    """Mean and 95 % CI per turn of ``values * mask`` over *all* dialogues ``[N, H]``: a dialogue
    that has ended contributes 0, as the absorbing end state does in the theory's occupancy-weighted
    sums (``eps_t = sum_s d_t(s) TV(...)``), so the estimate is unconditional, not per alive dialogue."""
    out = {"mean": [], "low": [], "high": []}
    for t in range(values.shape[1]):
        e = mean_ci((values[:, t] * mask[:, t]).double().cpu().numpy())
        for k, x in zip(("mean", "low", "high"), (e.value, e.low, e.high)):
            out[k].append(x)
    return out


OFF_SUPPORT = -2  # a history no consistent user produces (e.g. a neural simulator leaking an eliminated goal)


def summaries(space: SummarySpace, actions: torch.Tensor, acts: torch.Tensor) -> np.ndarray:
    """Summary index before each turn, ``[N, H]``: ``-1`` after the dialogue ended, and
    :data:`OFF_SUPPORT` from the turn after an answer that no consistent user gives (successor
    ``-1`` in the summary space) to the end of that dialogue. Such histories have probability 0
    under the real user, so they count as one extra context in :func:`plugin_tv` (they are shift)."""
    N, H = actions.shape
    out = np.full((N, H), -1)
    A, K = actions.cpu().numpy(), acts.cpu().numpy()
    for i in range(N):
        s = 1
        for t in range(H):
            if A[i, t] < 0:
                break
            out[i, t] = s
            if t + 1 < H and s != OFF_SUPPORT:
                s = int(space.successor[s, A[i, t], K[i, t]])
                s = OFF_SUPPORT if s < 0 else s
    return out


def evaluation(ro_real: Rollout, ro_sim: Rollout | None = None) -> dict:
    """``J_real`` (judge, real user) with its CI over dialogues, success and turns from a rollout
    against the real user; with a rollout against a simulator, also ``J_sim`` (its acceptance)."""
    j = mean_ci(ro_real.judge_rewards.sum(1).double().cpu().numpy())
    out = {"J_real": j.value, "J_real_low": j.low, "J_real_high": j.high,
           "success": float(ro_real.success.mean()), "turns": float(ro_real.turn_mask.sum(1).mean())}
    if ro_sim is not None:
        out["J_sim"] = float(ro_sim.accept_rewards.sum(1).mean())
        out["sim_gap"] = out["J_sim"] - out["J_real"]
    return out


@torch.no_grad()
def static_objective(vocab: Vocab, agent: Transformer, data: dict) -> float:
    """Static Context RL's myopic objective ``J_static`` at the logged histories of ``data``
    (encoded dialogues of ``pi_data``): the judge's expected reward of the agent's next act against
    the logged goal, summed over the turns a dialogue is alive and averaged over dialogues (an
    unbiased estimate of ``sum_t E_{d_t^{pi_data}} [r_t(s, pi)]``)."""
    task = vocab.task
    probs = torch.softmax(agent_turn_logits(vocab, agent, data["agent_view"]), -1)  # [N, H, A]
    acts = torch.arange(task.n_actions, device=probs.device)
    r = judge_reward(task, acts[None, None, :], data["goals"][:, None, None], dtype=probs.dtype)  # [N, 1, A]
    return float(((probs * r).sum(-1) * data["turn_mask"]).sum(1).double().mean())


@torch.no_grad()
def evaluate_agent(vocab: Vocab, agent: Transformer, real: ExplicitUser, noise: RolloutNoise,
                   sim: ExplicitUser | NeuralUser | None = None) -> dict:
    """:func:`evaluation` of ``agent`` on the goals and draws of ``noise`` (common random numbers:
    agents evaluated with the same noise are paired dialogue by dialogue)."""
    ro = rollout(vocab, agent, real, noise=noise)
    return evaluation(ro, rollout(vocab, agent, sim, noise=noise) if sim is not None else None)


@torch.no_grad()
def eps_on_logs(vocab: Vocab, agent: Transformer, space: SummarySpace, data_policy: np.ndarray, data: dict,
                states: np.ndarray) -> dict:
    """Per-turn ``eps_t`` on logged histories (see the module docstring)."""
    probs = torch.softmax(agent_turn_logits(vocab, agent, data["agent_view"]), -1)  # [N, H, A]
    H = vocab.task.horizon
    ref = torch.as_tensor(data_policy[np.arange(H)[None, :], np.maximum(states, 0)], dtype=probs.dtype, device=probs.device)
    tv = 0.5 * (probs - ref).abs().sum(-1)
    return _per_turn_ci(tv, data["turn_mask"])


def simulator_errors(ro: Rollout, task) -> dict:
    """Per-turn ``delta_t`` and ``rho_t`` on a rollout against a simulator recorded with ``real=``."""
    if ro.real_probs is None:
        raise ValueError("the rollout must record the real user's distributions (rollout(..., real=...))")
    tv = 0.5 * (ro.real_probs - ro.user_probs).abs().sum(-1)
    proposal = ro.actions >= task.n_questions
    gap = (1 + task.wrong_penalty) * (ro.real_probs[..., ACCEPT] - ro.user_probs[..., ACCEPT]).abs()
    rho = torch.where(proposal, gap, torch.zeros_like(gap))
    return {"delta": _per_turn_ci(tv, ro.turn_mask), "rho": _per_turn_ci(rho, ro.turn_mask)}


def plugin_tv(a: np.ndarray, b: np.ndarray, n_states: int, *, rng: np.random.Generator, n_boot: int = 200) -> dict:
    """Per-turn plug-in TV between the empirical context distributions of two samples ``[N, H]``
    (``-1`` = ended and :data:`OFF_SUPPORT` each count as one extra context), with a bootstrap CI."""
    H = a.shape[1]
    shift = -OFF_SUPPORT

    def tv(x, y, t):
        px = np.bincount(x[:, t] + shift, minlength=n_states + shift) / len(x)
        py = np.bincount(y[:, t] + shift, minlength=n_states + shift) / len(y)
        return 0.5 * np.abs(px - py).sum()

    out = {"mean": [], "low": [], "high": []}
    for t in range(H):
        boots = [tv(a[rng.integers(len(a), size=len(a))], b[rng.integers(len(b), size=len(b))], t) for _ in range(n_boot)]
        out["mean"].append(tv(a, b, t))
        out["low"].append(float(np.quantile(boots, 0.025)))
        out["high"].append(float(np.quantile(boots, 0.975)))
    return out


USER_RATES = ("accept_wrong", "leak", "clarify", "clarify_first", "clarify_last", "quit", "repeat_consistency")
"""The rates :func:`sycophancy` reports per user model, in a fixed order."""


@torch.no_grad()
def sycophancy(vocab: Vocab, user, data: dict) -> dict:
    """How a user model behaves at logged histories, each rate the mean of its probabilities there.

    * ``accept_wrong``: accepting a wrong proposal; ``leak``: volunteering the goal at a question;
    * ``clarify``: asking for clarification at a question, also split into ``clarify_first`` (turn 0)
      and ``clarify_last`` (turn ``H - 1``): a rate that grows with the dialogue shows up there;
    * ``quit``: ending the dialogue at a *repeated* question (one answered earlier in the dialogue);
    * ``repeat_consistency``: at a repeated question, the probability that an answer repeats the
      earlier one (1 for a consistent user; ``1 - 2 err (1 - err)`` for a memoryless one erring ``err``).

    A rate is ``nan`` where the logs hold no such turn.
    """
    task = vocab.task
    p = user_answer_probs(vocab, user, data).double()  # [N, H, K]
    mask = data["turn_mask"] > 0
    a = data["actions"].clamp_min(0)
    question = mask & (a < task.n_questions)
    wrong = mask & (a >= task.n_questions) & (a - task.n_questions != data["goals"][:, None])
    prev = torch.stack([m.previous(task, data["actions"][:, t]) for t, m in enumerate(memory_along(task, data["actions"], data["acts"]))], 1)
    repeated = question & (prev >= 0)
    answered = p[..., YES] + p[..., NO]
    same = torch.where(prev == 1, p[..., YES], p[..., NO]) / answered.clamp_min(1e-12)

    def rate(values: torch.Tensor, where: torch.Tensor) -> float:
        return float(values[where].mean()) if where.any() else float("nan")

    turn = torch.arange(task.horizon, device=mask.device)[None, :].expand_as(mask)
    return {
        "accept_wrong": rate(p[..., ACCEPT], wrong),
        "leak": rate(p[..., N_BASE_USER_ACTS:].sum(-1), question),
        "clarify": rate(p[..., CLARIFY], question),
        "clarify_first": rate(p[..., CLARIFY], question & (turn == 0)),
        "clarify_last": rate(p[..., CLARIFY], question & (turn == task.horizon - 1)),
        "quit": rate(p[..., QUIT], repeated),
        "repeat_consistency": rate(same, repeated & (answered > 1e-9)),
    }
