"""The exact optimum of the KL-regularised RL objective for a history-dependent agent.

The main job's RL maximises ``J(pi) - beta * E_pi[sum_t KL(pi(.|h_t) || pi_SFT(.|h_t))]`` (the exact
per-turn KL of :func:`~shiftbounds.losses.policy_gradient_loss`, weighted by ``--kl-coef``). Its
maximiser is the soft-optimal policy ``pi_beta(a|h) ∝ pi_SFT(a|h) exp(Q_beta(h, a) / beta)``, with
``Q_beta`` from the soft Bellman backup ``V_beta(h) = beta log sum_a pi_SFT(a|h) exp(Q_beta(h, a) /
beta)``. Because ``pi_SFT`` reads the whole history, so does ``pi_beta``: both are computed here on
the tree of every agent history (acts and the user's replies that do not end the dialogue), where
a history's value averages over the goals it is consistent with (the posterior, from the users'
explicit reply probabilities).

With it the gap of a learned agent to the *unregularised* optimum splits exactly:
``J* - J(learned) = [J* - J(pi_beta)] + [J(pi_beta) - J(learned)]``, the cost of the KL
regularisation and the optimisation error. ``beta = 0`` gives the unregularised optimum itself (the
greedy policy on ``Q``), which equals the summary MDP's optimum: a test of the tree.

Objectives: ``"accept"`` (the interactive arms' ``J_sim``: +1 for an accepted proposal,
``-wrong_penalty`` for a rejected one, against the training user), ``"judge"`` (``J_real``'s
goal-aware judge) and :func:`soft_static_optimum` for myopic Static Context RL's ``J_static``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from shiftbounds.dialogue.neural.rollout import ExplicitUser, Memory
from shiftbounds.dialogue.neural.tokens import BOS, Vocab
from shiftbounds.dialogue.summary import SummarySpace
from shiftbounds.dialogue.tasks import ACCEPT, ENDING_ACTS, REJECT, judge_reward
from shiftbounds.losses import log_probs
from shiftbounds.nn.transformer import Transformer

OBJECTIVES = ("accept", "judge")


@dataclass(frozen=True)
class HistoryTree:
    """Every agent history ``[BOS, a_0, u_0, ..., a_{t-1}, u_{t-1}]`` before turn ``t < H`` that some
    given user reaches with positive probability (an agent with full support plays every act).

    Attributes:
        tokens: per turn ``t``, the histories' tokens ``[N_t, 1 + 2t]``.
        memory: per turn, the users' :class:`Memory` of each history.
        states: per turn, each history's summary (index into the :class:`SummarySpace`).
        child: per turn ``t < H - 1``, ``[N_t, A, K]`` the index of history ``(h, a, u)`` at turn
            ``t + 1``, or -1 where the reply ends the dialogue or no user gives it.
    """

    vocab: Vocab
    tokens: list[torch.Tensor]
    memory: list[Memory]
    states: list[np.ndarray]
    child: list[np.ndarray]

    @property
    def sizes(self) -> list[int]:
        return [len(s) for s in self.states]


def reply_probs(tree: HistoryTree, user: ExplicitUser, t: int) -> np.ndarray:
    """``[N_t, G, A, K]`` the user's reply distribution at every history of turn ``t``, goal and act."""
    G, n = tree.vocab.task.n_goals, tree.sizes[t]
    mem = tree.memory[t]
    rows = Memory(mem.first.repeat_interleave(G, 0), mem.repeats.repeat_interleave(G, 0))
    return user.all_probs(torch.arange(G).repeat(n), t, rows).numpy().reshape(n, G, tree.vocab.n_agent, -1)


def history_tree(vocab: Vocab, space: SummarySpace, users: list[ExplicitUser]) -> HistoryTree:
    """The tree of every history some user of ``users`` reaches (see :class:`HistoryTree`)."""
    task = vocab.task
    H, A, K = task.horizon, vocab.n_agent, vocab.n_user
    tokens, memory, states, child = [torch.full((1, 1), BOS)], [Memory.empty(task, 1)], [np.array([1])], []
    partial = HistoryTree(vocab, tokens, memory, states, child)
    for t in range(H - 1):
        reach = np.zeros((partial.sizes[t], A, K), dtype=bool)
        for user in users:
            reach |= (reply_probs(partial, user, t) > 0).any(1)
        reach[:, :, list(ENDING_ACTS)] = False
        h, a, k = np.nonzero(reach)
        index = np.full((partial.sizes[t], A, K), -1, dtype=np.int64)
        index[h, a, k] = np.arange(len(h))
        child.append(index)
        ht, at, kt = (torch.as_tensor(x) for x in (h, a, k))
        tokens.append(torch.cat([tokens[t][ht], (at + vocab.agent_offset)[:, None], (kt + vocab.user_offset)[:, None]], 1))
        mem = memory[t]
        memory.append(Memory(mem.first[ht], mem.repeats[ht]).after(task, at, kt, torch.ones(len(h), dtype=torch.bool)))
        states.append(space.successor[states[t][h], a, k])
    return partial


def reach_weights(tree: HistoryTree, user: ExplicitUser, probs: list[np.ndarray]) -> list[np.ndarray]:
    """Per turn ``[N_t, G]``: ``P(goal) * prod_s P(u_s | goal, history)``, the probability of a
    history and goal when the agent plays its acts (the agent's own probabilities left out: they do
    not depend on the goal)."""
    task = tree.vocab.task
    w = [np.asarray(task.prior, dtype=np.float64)[None, :]]
    for t, index in enumerate(tree.child):
        nxt = np.zeros((tree.sizes[t + 1], task.n_goals))
        h, a, k = np.nonzero(index >= 0)
        nxt[index[h, a, k]] = w[t][h] * probs[t][h, :, a, k]
        w.append(nxt)
    return w


def turn_rewards(tree: HistoryTree, probs: list[np.ndarray], objective: str) -> list[np.ndarray]:
    """Per turn ``[N_t, G, A]`` the expected reward of each act: ``"accept"`` (the answering user's
    acceptance, the interactive arms' ``J_sim``) or ``"judge"`` (the goal-aware judge)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    task = tree.vocab.task
    A, G, Q = task.n_actions, task.n_goals, task.n_questions
    if objective == "judge":
        r = judge_reward(task, torch.arange(A)[None, :], torch.arange(G)[:, None], dtype=torch.float64).numpy()
        return [np.broadcast_to(r, (n, G, A)) for n in tree.sizes]
    proposal = np.arange(A) >= Q
    return [proposal * (p[..., ACCEPT] - task.wrong_penalty * p[..., REJECT]) for p in probs]


@torch.no_grad()
def policy_log_probs(tree: HistoryTree, agent: Transformer) -> list[np.ndarray]:
    """Per turn ``[N_t, A]`` the agent's log-probabilities of its acts at every history (float64),
    turn by turn with the key-value cache (each history feeds its two new tokens after its parent's
    cache, as in a rollout)."""
    vocab, out = tree.vocab, []
    device = next(agent.parameters()).device
    logits, cache = agent(tree.tokens[0].to(device))
    for t in range(len(tree.tokens)):
        if t:
            parent = torch.as_tensor(np.nonzero(tree.child[t - 1] >= 0)[0], device=device)
            logits, cache = agent(tree.tokens[t][:, -2:].to(device), [(k[parent], v[parent]) for k, v in cache])
        out.append(log_probs(logits[:, -1, vocab.agent_offset: vocab.agent_offset + vocab.n_agent].double()).cpu().numpy())
    return out


def _q_values(tree: HistoryTree, t: int, w: np.ndarray, r: np.ndarray, probs: np.ndarray, v_next: np.ndarray | None) -> np.ndarray:
    """``[N_t, A]`` the posterior-averaged ``Q(h, a)`` = E[r + V(next history) | h, a] (0 at histories no goal reaches)."""
    total = np.einsum("ng,nga->na", w, r)
    if v_next is not None:
        idx = tree.child[t]
        cont = np.where(idx >= 0, v_next[np.maximum(idx, 0)], 0.0)  # [N, A, K]
        total = total + np.einsum("ng,ngak,nak->na", w, probs, cont)
    mass = w.sum(1)
    return np.divide(total, mass[:, None], out=np.zeros_like(total), where=mass[:, None] > 0)


def _soft_choice(q: np.ndarray, ref_logp: np.ndarray, beta: float) -> np.ndarray:
    """``[N, A]`` log pi: ``softmax(log pi_SFT + Q / beta)``, or greedy on ``Q`` (first maximiser) at beta = 0."""
    if beta == 0:
        logpi = np.full_like(q, -np.inf)
        logpi[np.arange(len(q)), q.argmax(1)] = 0.0
        return logpi
    z = ref_logp + (q - q.max(1, keepdims=True)) / beta  # shifted: no overflow however small beta is
    return z - np.logaddexp.reduce(z, axis=1, keepdims=True)


@dataclass(frozen=True)
class SoftOptimum:
    """The soft-optimal policy and its values (expectations at the start of a dialogue).

    Attributes:
        beta: the KL weight.
        log_policy: per turn ``[N_t, A]`` log pi_beta at every history.
        objective: ``J(pi_beta)``, the unregularised objective of the soft-optimal policy.
        kl: ``E_{pi_beta}[sum_t KL(pi_beta || pi_SFT)]``.
        regularised: ``objective - beta * kl``, the optimum of the regularised objective.
    """

    beta: float
    log_policy: list[np.ndarray]
    objective: float
    kl: float

    @property
    def regularised(self) -> float:
        return self.objective - self.beta * self.kl


def _kl(logpi: np.ndarray, ref_logp: np.ndarray) -> np.ndarray:
    """``[N]`` KL(pi || ref) per history (0 log 0 = 0)."""
    pi = np.exp(logpi)
    return (pi * np.where(pi > 0, logpi - ref_logp, 0.0)).sum(1)


@dataclass(frozen=True)
class Interaction:
    """A user on the tree: per turn its reply probabilities ``probs [N_t, G, A, K]``, the reach
    weights ``weights [N_t, G]`` (:func:`reach_weights`) and the objective's expected rewards
    ``rewards [N_t, G, A]`` (:func:`turn_rewards`)."""

    tree: HistoryTree
    probs: list[np.ndarray]
    weights: list[np.ndarray]
    rewards: list[np.ndarray]

    def backup(self, choose) -> tuple[list[np.ndarray], float]:
        """Backward induction: ``choose(t, q)`` gives ``(log pi [N_t, A], v [N_t])`` from ``Q [N_t, A]``;
        returns the per-turn log-policies and the value at the start."""
        log_policy: list[np.ndarray] = [np.empty(0)] * len(self.tree.tokens)
        v = None
        for t in reversed(range(len(self.tree.tokens))):
            q = _q_values(self.tree, t, self.weights[t], self.rewards[t], self.probs[t], v)
            log_policy[t], v = choose(t, q)
        return log_policy, float(v[0])

    def value(self, log_policy: list[np.ndarray]) -> float:
        """The exact objective of a history policy (``log_policy`` per turn ``[N_t, A]``)."""
        return self.backup(lambda t, q: (log_policy[t], (np.exp(log_policy[t]) * q).sum(1)))[1]

    def kl(self, log_policy: list[np.ndarray], ref_log_probs: list[np.ndarray]) -> float:
        """``E_pi[sum_t KL(pi(.|h_t) || pi_ref(.|h_t))]`` over the dialogues ``pi`` has with this user."""
        zero = replace(self, rewards=[np.zeros_like(r) for r in self.rewards])
        return zero.backup(lambda t, q: (log_policy[t], (np.exp(log_policy[t]) * q).sum(1) + _kl(log_policy[t], ref_log_probs[t])))[1]


def interaction(tree: HistoryTree, user: ExplicitUser, objective: str = "accept") -> Interaction:
    """:class:`Interaction` of ``user`` on ``tree`` for ``objective`` (one of :data:`OBJECTIVES`)."""
    probs = [reply_probs(tree, user, t) for t in range(len(tree.tokens))]
    return Interaction(tree, probs, reach_weights(tree, user, probs), turn_rewards(tree, probs, objective))


def soft_optimum(view: Interaction, ref_log_probs: list[np.ndarray], beta: float) -> SoftOptimum:
    """The maximiser of ``J - beta KL(pi || pi_ref)`` against the user of ``view`` (``ref_log_probs``:
    pi_SFT's, :func:`policy_log_probs`), by the soft Bellman backup; ``beta = 0``: the unregularised
    optimum (greedy)."""
    if beta < 0:
        raise ValueError(f"beta must be >= 0; got {beta}")

    def choose(t: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lp = _soft_choice(q, ref_log_probs[t], beta)
        return lp, (np.exp(lp) * q).sum(1) - beta * _kl(lp, ref_log_probs[t])

    log_policy, _ = view.backup(choose)
    return SoftOptimum(beta, log_policy, view.value(log_policy), view.kl(log_policy, ref_log_probs))


@dataclass(frozen=True)
class StaticContexts:
    """The logged contexts of ``pi_data`` against the real user: per turn, ``mass [N_t]`` (the
    probability of each history under ``pi_data``) and ``reward [N_t, A]`` (the judge's expected
    reward of each act given the history)."""

    mass: list[np.ndarray]
    reward: list[np.ndarray]

    def value(self, log_policy: list[np.ndarray]) -> float:
        """``J_static = sum_t E_{h_t ~ pi_data}[E_{a ~ pi(.|h_t)} r(h_t, a)]`` of a history policy."""
        return float(sum((m * (np.exp(lp) * r).sum(1)).sum() for m, r, lp in zip(self.mass, self.reward, log_policy)))

    def kl(self, log_policy: list[np.ndarray], ref_log_probs: list[np.ndarray]) -> float:
        """``sum_t E_{h_t ~ pi_data} KL(pi(.|h_t) || pi_ref(.|h_t))``."""
        return float(sum((m * _kl(lp, ref)).sum() for m, lp, ref in zip(self.mass, log_policy, ref_log_probs)))


def static_contexts(tree: HistoryTree, real: ExplicitUser, data_policy: np.ndarray) -> StaticContexts:
    """:class:`StaticContexts` of ``data_policy [H, S, A]`` (a summary policy) on ``tree``."""
    probs = [reply_probs(tree, real, t) for t in range(len(tree.tokens))]
    weights = reach_weights(tree, real, probs)
    rewards = turn_rewards(tree, probs, "judge")
    reach = [np.ones(1)]  # P(pi_data plays the history's acts), per turn
    for t, index in enumerate(tree.child):
        nxt = np.zeros(tree.sizes[t + 1])
        h, a, k = np.nonzero(index >= 0)
        nxt[index[h, a, k]] = reach[t][h] * data_policy[t, tree.states[t][h], a]
        reach.append(nxt)
    return StaticContexts([r * w.sum(1) for r, w in zip(reach, weights)],
                          [_q_values(tree, t, weights[t], rewards[t], probs[t], None) for t in range(len(tree.tokens))])


def soft_static_optimum(contexts: StaticContexts, ref_log_probs: list[np.ndarray], beta: float) -> SoftOptimum:
    """Myopic Static Context RL's regularised optimum: at every logged context,
    ``pi_beta(a|h) ∝ pi_SFT(a|h) exp(r(h, a) / beta)`` (greedy at beta = 0); ``objective`` is its
    ``J_static`` and ``kl`` the KL summed over turns at ``pi_data``'s histories."""
    if beta < 0:
        raise ValueError(f"beta must be >= 0; got {beta}")
    log_policy = [_soft_choice(r, ref, beta) for r, ref in zip(contexts.reward, ref_log_probs)]
    return SoftOptimum(beta, log_policy, contexts.value(log_policy), contexts.kl(log_policy, ref_log_probs))
