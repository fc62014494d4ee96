"""Exact values of *history-dependent* agents on tiny tasks, by enumerating the dialogue tree.

The summary MDP of :mod:`shiftbounds.dialogue.summary` is exact for policies of the summary; a
neural agent reads the whole history, so its exact ``J``, ``eps_t`` and ``delta_t`` need the tree of
(goal, history) pairs, enumerated turn by turn in batches. Feasible for tiny tasks only (the tree
grows like ``G (A K)^H``); it is the ground truth that the sampled estimates of
:mod:`shiftbounds.dialogue.neural.measures` are tested against.
"""

from __future__ import annotations

import numpy as np
import torch

from shiftbounds.dialogue.neural.rollout import ExplicitUser, Memory, agent_turn_logits
from shiftbounds.dialogue.neural.tokens import BOS, PAD, Vocab
from shiftbounds.dialogue.summary import SummarySpace
from shiftbounds.dialogue.tasks import ACCEPT, ENDING_ACTS, judge_reward


@torch.no_grad()
def exact_tree(vocab: Vocab, space: SummarySpace, agent, user: ExplicitUser, *, data_policy: np.ndarray | None = None,
               follow: str = "agent", compare_user: ExplicitUser | None = None, max_nodes: int = 200_000) -> dict:
    """Enumerate every (goal, history) reachable against ``user`` by ``agent`` (``follow="agent"``)
    or by ``pi_data`` (``follow="data"``, a summary policy, needs ``data_policy``).

    Returns the exact ``J`` (judge reward) of the followed policy, and per turn: ``contexts`` (the
    law of the summary before the turn, ``[S + 1]``, the last entry the mass of ended dialogues:
    what :func:`~shiftbounds.dialogue.neural.measures.plugin_tv` estimates ``Delta_t`` and ``D_t`` from),
    ``eps`` (the TV between ``agent`` and ``pi_data`` at the visited histories, when ``data_policy``
    is given; with ``follow="data"`` this is docs/theory.md's ``eps_t``), and ``delta`` and ``rho``
    (the TV between ``user``'s and ``compare_user``'s answers after the followed act, and their
    reward mismatch at proposals, when ``compare_user`` is given).
    """
    if follow not in ("agent", "data") or (follow == "data" and data_policy is None):
        raise ValueError(f"follow must be 'agent', or 'data' with a data_policy; got {follow!r}")
    task = vocab.task
    H, Q, pen = task.horizon, task.n_questions, task.wrong_penalty
    G = task.n_goals
    goals = torch.arange(G)
    prob = torch.as_tensor(task.prior, dtype=torch.float64)
    tokens = torch.full((G, 1), BOS)
    state = np.ones(G, dtype=np.int64)
    memory = Memory.empty(task, G)
    J = 0.0
    eps, delta, rho, contexts = [], [], [], []
    for t in range(H):
        law = np.bincount(state, weights=prob.numpy(), minlength=space.n_states)
        contexts.append(np.append(law, 1.0 - law.sum()))
        logits = agent_turn_logits(vocab, agent, torch.cat([tokens, torch.full((len(tokens), 1), PAD)], 1))
        p_agent = torch.softmax(logits[:, t].double(), -1)
        pa = p_agent
        if data_policy is not None:
            pd = torch.as_tensor(data_policy[t, state], dtype=torch.float64)
            eps.append(float((prob * 0.5 * (p_agent - pd).abs().sum(-1)).sum()))
            if follow == "data":
                pa = pd
        A = pa.shape[1]
        pu = user.all_probs(goals, t, memory)  # [N, A, K]
        if compare_user is not None:
            pc = compare_user.all_probs(goals, t, memory)
            delta.append(float((prob[:, None] * pa * 0.5 * (pu - pc).abs().sum(-1)).sum()))
            gap = (1 + pen) * (pu[..., ACCEPT] - pc[..., ACCEPT]).abs() * (torch.arange(pa.shape[1]) >= Q)
            rho.append(float((prob[:, None] * pa * gap).sum()))
        acts = torch.arange(A)
        r = judge_reward(task, acts[None], goals[:, None], dtype=torch.float64)  # not float32 scalars
        J += float((prob[:, None] * pa * r).sum())
        if t + 1 == H:
            break
        joint = prob[:, None, None] * pa[:, :, None] * pu  # [N, A, K]
        joint[:, :, list(ENDING_ACTS)] = 0.0  # accepted (or quit) dialogues end (no further reward)
        n, a, k = torch.nonzero(joint > 0, as_tuple=True)
        if len(n) > max_nodes:
            raise ValueError(f"the dialogue tree has {len(n)} nodes at turn {t + 1}, over max_nodes={max_nodes}")
        prob = joint[n, a, k]
        goals = goals[n]
        memory = Memory(memory.first[n], memory.repeats[n]).after(task, a, k, torch.ones_like(a, dtype=torch.bool))
        tokens = torch.cat([tokens[n], (a + vocab.agent_offset)[:, None], (k + vocab.user_offset)[:, None]], 1)
        state = np.array([space.successor[s, ai, ki] for s, ai, ki in zip(state[n.numpy()], a.numpy(), k.numpy())])
    return {"J": J, "eps": eps, "delta": delta, "rho": rho, "contexts": contexts}
