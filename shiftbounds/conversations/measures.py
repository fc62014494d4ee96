"""Measuring any user simulator against held-out logs, through the conversation interface.

These are the real-data views of ``delta_t`` (docs/theory.md §3):

* :func:`user_turn_nll` / :func:`nll_by_turn` — per-token NLL of each human user turn under an LM
  simulator, in the simulator's view (persona, goal, the view's roles), by user-turn index;
* :func:`discriminator_auc_by_turn` — a real-vs-simulated classifier trained on human user turns and
  the simulator's replies at the same histories; its held-out ROC AUC overall and by user-turn index
  with 95 % intervals (0.5: indistinguishable at this classifier's size). Works for every
  :class:`~shiftbounds.conversations.simulators.UserSimulator`, rule-based ones included;
* :func:`sycophancy_report` — accept-right, accept-wrong, their paired difference and goal
  disclosure on a task's probes (:class:`~shiftbounds.conversations.tasks.ProbeBuilder`), with
  intervals, for a simulator or (``simulator=None``) the logged people;
* :func:`logged_confirmations` — what the logs hold to teach a user model to reject a wrong
  outcome: how many logged confirmations show the goal's outcome, how many replies do not accept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.classifiers import RewardModel, classifier_scores, fit_classifier
from shiftbounds.conversations.models import load_chat_model, model_positions
from shiftbounds.conversations.records import Conversation
from shiftbounds.conversations.rule_user import REPLY_KINDS
from shiftbounds.conversations.simulators import PERSONA, UserSimulator, reply_ids, respond_all
from shiftbounds.conversations.tasks import Judge, Probe, ProbeBuilder, ProbeSet
from shiftbounds.losses import token_log_probs
from shiftbounds.utils.seeding import derive_seed, numpy_rng, torch_init_seed
from shiftbounds.utils.stats import auc_ci, mean_ci, proportion_ci, roc_auc

TURN_EDGES = (0, 2, 4, 8)
"""User-turn index buckets of the per-turn tables: 0-1, 2-3, 4-7, 8+."""


def turn_bucket(t: int, edges: Sequence[int] = TURN_EDGES) -> str:
    """The bucket label of user-turn index ``t`` (``edges`` ascending, starting at 0)."""
    if t < 0:
        raise ValueError(f"a turn index is >= 0; got {t}")
    k = int(np.searchsorted(edges, t, side="right")) - 1
    return f"{edges[k]}+" if k == len(edges) - 1 else f"{edges[k]}-{edges[k + 1] - 1}"


@dataclass(frozen=True)
class UserTurn:
    """A human user turn of the logs: its conversation, its message index, its user-turn index."""

    conversation: Conversation
    index: int
    turn: int

    @property
    def history(self) -> list[dict]:
        return [m.as_dict() for m in self.conversation.messages[: self.index]]

    @property
    def text(self) -> str:
        return self.conversation.messages[self.index].content


def user_turns(convs: Sequence[Conversation], *, after_agent: bool = False) -> list[UserTurn]:
    """Every user turn of ``convs``; ``after_agent``: only those that answer an agent message (the
    last non-tool message before them is the agent's), which every simulator can produce."""
    out = []
    for c in convs:
        for t, j in enumerate(c.turns("user")):
            prev = [m.role for m in c.messages[:j] if m.role != "tool"]
            if not after_agent or (prev and prev[-1] == "assistant"):
                out.append(UserTurn(c, j, t))
    return out


@torch.no_grad()
def user_turn_nll(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, turns: Sequence[UserTurn], *, persona: str = PERSONA, view: str = "flipped",
                  batch: int = 8, max_len: int = 1024) -> np.ndarray:
    """Mean NLL per token of each human turn (its text and end marker) under an LM simulator reading
    the simulator's ``view`` (:data:`~shiftbounds.conversations.simulators.VIEWS`); histories are cut from the left to fit ``max_len``, never more than the
    model's positions (:func:`~shiftbounds.conversations.models.model_positions`)."""
    max_len = min(max_len, model_positions(model) or max_len)
    rows = []
    for u in turns:
        prompt, target = reply_ids(tokenizer, u.history, u.conversation.goal, u.text, persona, view)
        target = target[: max_len - 1]
        rows.append((prompt[-(max_len - len(target)):], target))
    out = []
    pad = tokenizer.pad_token_id
    for j in range(0, len(rows), batch):
        chunk = rows[j: j + batch]
        T = max(len(p) + len(t) for p, t in chunk)
        ids = torch.full((len(chunk), T), pad, dtype=torch.long)
        att = torch.zeros_like(ids)
        mask = torch.zeros((len(chunk), T - 1))
        for i, (p, t) in enumerate(chunk):
            ids[i, : len(p) + len(t)] = torch.tensor(p + t)
            att[i, : len(p) + len(t)] = 1
            mask[i, len(p) - 1: len(p) + len(t) - 1] = 1
        ids, att = ids.to(model.device), att.to(model.device)
        logp = token_log_probs(model(input_ids=ids, attention_mask=att).logits, ids, shift=True).cpu()
        out += (-(logp * mask).sum(1) / mask.sum(1)).tolist()
    return np.array(out)


def nll_by_turn(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, convs: Sequence[Conversation], *, persona: str = PERSONA, view: str = "flipped",
                batch: int = 8, max_len: int = 1024, edges: Sequence[int] = TURN_EDGES) -> dict:
    """:func:`user_turn_nll` over every user turn of ``convs``: the mean overall and by user-turn
    bucket, each with a 95 % t-interval over turns, and the counts."""
    turns = user_turns(convs)
    nll = user_turn_nll(model, tokenizer, turns, persona=persona, view=view, batch=batch, max_len=max_len)
    buckets = np.array([turn_bucket(u.turn, edges) for u in turns])
    by = {b: _estimate(mean_ci(nll[buckets == b])) | {"n": int((buckets == b).sum())}
          for b in dict.fromkeys(turn_bucket(t, edges) for t in sorted({u.turn for u in turns}))}
    return {"overall": _estimate(mean_ci(nll)) | {"n": len(nll)}, "by_turn": by}


def _estimate(e) -> dict:
    return {"value": float(e.value), "low": float(e.low), "high": float(e.high)}


def replies(simulator: UserSimulator, cases: Sequence[tuple[Any, list[dict], int]], *, batch: int = 64) -> list[str]:
    """The simulator's reply to each ``(goal, history, seed)``, reset to that goal and seed. A
    simulator with ``clone()`` answers in batches (LM simulators sharing one model sample together,
    :func:`~shiftbounds.conversations.simulators.respond_all`); each reply depends on its own seed only."""
    out = []
    if not hasattr(simulator, "clone"):
        for goal, history, seed in cases:
            simulator.reset(goal, seed=seed)
            out.append(simulator.respond(history)[0])
        return out
    for j in range(0, len(cases), batch):
        chunk = cases[j: j + batch]
        sims = [simulator.clone() for _ in chunk]
        for sim, (goal, _, seed) in zip(sims, chunk):
            sim.reset(goal, seed=seed)
        out += [r for r, _ in respond_all(sims, [h for _, h, _ in chunk])]
    return out


def simulated_replies(simulator: UserSimulator, turns: Sequence[UserTurn], *, seed: int = 0) -> list[str]:
    """The simulator's reply at each turn's history (the same goal; draws from ``seed`` and the
    turn's place, so every simulator answers from the same random numbers)."""
    return replies(simulator, [(u.conversation.goal, u.history, derive_seed(seed, u.conversation.id, u.index)) for u in turns])


def dialogue_text(messages: Sequence[dict]) -> str:
    """A history as a classifier reads it: ``role: content`` lines, tool messages included."""
    return "".join(f"\n{m['role']}: {m['content']}" for m in messages)


def discriminator_auc_by_turn(simulator: UserSimulator, classifier: str, train: Sequence[Conversation],
                              held: Sequence[Conversation], *, steps: int = 200, batch: int = 8, lr: float = 1e-3,
                              max_len: int = 512, max_turns: int | None = None, edges: Sequence[int] = TURN_EDGES,
                              seed: int = 0) -> dict:
    """Train a real-vs-``simulator`` discriminator on the user turns of ``train`` (human: 1, the
    simulator's reply at the same history: 0) and return its held-out AUC on ``held``, overall and
    by user-turn bucket, each with its 95 % Hanley-McNeil interval, and the counts.

    Args:
        classifier: a model folder or Hub id whose backbone the classifier starts from (a sequence
            classifier: a linear head on the last token's hidden state).
        max_turns: at most this many user turns from each split (drawn with ``seed``; ``None``: all).
    """
    rng = numpy_rng(seed, "discriminator")

    def pick(convs):
        turns = user_turns(convs, after_agent=True)
        if not turns:
            raise ValueError("no user turn that answers an agent message to discriminate on")
        if max_turns is not None and len(turns) > max_turns:
            turns = [turns[j] for j in sorted(rng.choice(len(turns), max_turns, replace=False))]
        return turns

    tr, ho = pick(train), pick(held)
    fake_tr = simulated_replies(simulator, tr, seed=derive_seed(seed, "train"))
    fake_ho = simulated_replies(simulator, ho, seed=derive_seed(seed, "held"))
    data = [(dialogue_text(u.history), "\nuser: " + t, y) for us, ts, y in ((tr, [u.text for u in tr], 1.0), (tr, fake_tr, 0.0))
            for u, t in zip(us, ts)]
    lm, tok = load_chat_model(classifier)
    max_len = min(max_len, model_positions(lm) or max_len)  # never past the backbone's positions
    with torch_init_seed(seed, "discriminator_head"):
        disc = RewardModel(lm).to(lm.device)
    fit_classifier(disc, tok, data, steps=steps, batch=batch, lr=lr, max_len=max_len, rng=rng, device=lm.device)
    score = lambda texts: classifier_scores(disc, tok, [(dialogue_text(u.history), "\nuser: " + t, 0.0)  # noqa: E731
                                                        for u, t in zip(ho, texts)], batch=batch, max_len=max_len,
                                             device=lm.device).numpy()
    real, fake = score([u.text for u in ho]), score(fake_ho)
    buckets = np.array([turn_bucket(u.turn, edges) for u in ho])

    def auc(sel):
        n = int(sel.sum())
        value = roc_auc(np.r_[real[sel], fake[sel]], np.r_[np.ones(n), np.zeros(n)])
        return _estimate(auc_ci(value, n, n)) | {"n": n}

    by = {b: auc(buckets == b) for b in dict.fromkeys(turn_bucket(t, edges) for t in sorted({u.turn for u in ho}))}
    return {"overall": auc(np.ones(len(ho), bool)), "by_turn": by}


def probe_outcomes(simulator: UserSimulator | None, probes: ProbeSet, builder: ProbeBuilder, *, seed: int = 0) -> dict:
    """The per-probe outcomes :func:`sycophancy_report` summarises, for a study that pools them
    itself (e.g. over goals and several calibrations): ``disclosed`` and ``consistent`` (one flag
    per disclosure probe; ``consistent`` ``None`` when the builder has no ``consistent``), ``right``
    and ``wrong`` (accepted, per confirmation probe), ``right_kinds`` and ``wrong_kinds`` (each
    reply's kind; ``None`` when the builder has no ``kind``), and ``pairs`` (right minus wrong
    acceptance over the pairs with both replies). Lists the simulator cannot fill (the people's
    unlogged replies) are empty. See :func:`sycophancy_report` for what is counted."""
    def answers(ps: Sequence[Probe], tag: str) -> list[str]:
        if simulator is None:
            return [p.human_reply for p in ps]
        return replies(simulator, [(p.goal, list(p.messages), derive_seed(seed, tag, i)) for i, p in enumerate(ps)])

    def logged(ps: Sequence[Probe]) -> list[Probe]:
        return list(ps) if simulator is not None else [p for p in ps if p.human_reply]

    def kinds(texts: list[str]) -> list[str] | None:
        return [builder.kind(t) for t in texts] if hasattr(builder, "kind") else None

    disclosure = logged(probes.disclosure)
    right_texts = answers(logged(probes.right), "right")
    openings = answers(disclosure, "disclosure")
    out = {"disclosed": [builder.discloses(r, p.goal) for r, p in zip(openings, disclosure)],
           "consistent": [builder.consistent(r, p.goal) for r, p in zip(openings, disclosure)]
           if hasattr(builder, "consistent") else None,
           "right": [builder.accepts(r) for r in right_texts], "right_kinds": kinds(right_texts),
           "wrong": [], "wrong_kinds": kinds([]), "pairs": []}
    if simulator is not None and probes.wrong:
        wrong_texts = answers(probes.wrong, "wrong")
        out |= {"wrong": [builder.accepts(r) for r in wrong_texts], "wrong_kinds": kinds(wrong_texts)}
        out["pairs"] = [float(a) - float(b) for a, b in zip(out["right"], out["wrong"])]
    elif simulator is None and logged(probes.wrong):
        out |= {"wrong": [builder.accepts(p.human_reply) for p in logged(probes.wrong)],
                "wrong_kinds": kinds([p.human_reply for p in logged(probes.wrong)]),
                "pairs": [float(builder.accepts(r.human_reply)) - float(builder.accepts(w.human_reply))
                          for r, w in zip(probes.right, probes.wrong) if r.human_reply and w.human_reply]}
    return out


def sycophancy_report(simulator: UserSimulator | None, probes: ProbeSet, builder: ProbeBuilder, *, seed: int = 0) -> dict:
    """``accept_right``, ``accept_wrong`` (the sycophancy rate), ``discrimination`` (their paired
    difference: right and wrong probes come from the same dialogue) and ``goal_disclosure``, each
    with a 95 % interval and its ``n``; when the builder has the optional methods, ``replies_right``
    / ``replies_wrong`` (the share of ``accept``, ``reject`` and ``unclear`` replies, by
    ``builder.kind``: a garbled simulator shows as unclear, not as sceptical) and
    ``goal_consistency`` (the share of openings whose content agrees with the goal, by
    ``builder.consistent``: a simulator that ignores its goal scores low however human it sounds).

    ``simulator=None`` reads the logged people's replies, and only where there is one: a probe whose
    history was not logged (``human_reply == ""``, e.g. a wrong confirmation made up from a logged
    one) is left out, not counted as a refusal. ``accept_wrong`` and ``discrimination`` of the
    people then need logged replies to wrong confirmations (pairs with both replies logged for
    ``discrimination``); ``None`` where the logs hold none. The per-probe outcomes are
    :func:`probe_outcomes`."""
    o = probe_outcomes(simulator, probes, builder, seed=seed)

    def share(flags: list[bool] | None) -> dict | None:
        return _estimate(proportion_ci(int(sum(flags)), len(flags))) | {"n": len(flags)} if flags else None

    def kinds(found: list[str] | None) -> dict | None:
        return {k: share([f == k for f in found]) for k in REPLY_KINDS} | {"n": len(found)} if found else None

    return {"accept_right": share(o["right"]), "accept_wrong": share(o["wrong"]),
            "discrimination": _estimate(mean_ci(np.array(o["pairs"]))) | {"n": len(o["pairs"])} if o["pairs"] else None,
            "goal_disclosure": share(o["disclosed"]), "replies_right": kinds(o["right_kinds"]),
            "replies_wrong": kinds(o["wrong_kinds"]), "goal_consistency": share(o["consistent"])}


def logged_confirmations(probes: ProbeSet, builder: ProbeBuilder, judge: Judge) -> dict:
    """The logged confirmations behind ``probes.right`` and the people's replies to them: ``n``,
    ``of_the_goal`` (the outcome confirmed so far is the goal's: ``judge`` pays at least 1 for the
    history), ``not_accepted`` (replies ``builder.accepts`` reads as no acceptance) and
    ``not_accepted_wrong`` (those that follow an outcome other than the goal's — the only turns
    from which a model of the logs could learn to reject a wrong outcome)."""
    logged = [p for p in probes.right if p.human_reply]
    if not logged:
        raise ValueError("the probes hold no logged reply to a confirmation")
    of_goal = [judge(p.goal, list(p.messages)) >= 1 for p in logged]
    rejected = [not builder.accepts(p.human_reply) for p in logged]
    return {"n": len(logged), "of_the_goal": sum(of_goal), "not_accepted": sum(rejected),
            "not_accepted_wrong": sum(r and not g for r, g in zip(rejected, of_goal))}
