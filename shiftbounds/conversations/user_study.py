"""Prompted vs calibrated user models on held-out goals, with the calibration as the replication unit.

A study of user simulators, not of agents: every user model answers the same held-out histories
greedily, and is measured by

* the NLL of the people's user turns, by turn (:func:`~shiftbounds.conversations.measures.user_turn_nll`);
* a **goal-aware discriminator**'s held-out AUC, by turn (:func:`probe_discriminator`): a logistic
  probe on a frozen chat model's features of ``goal + history + reply``, trained to tell the
  people's replies from the user model's at the same histories. It reads the goal, so a user model
  that sounds human but ignores its goal is caught; 0.5 is "indistinguishable to this probe";
* goal disclosure, goal consistency, and accept / reject / unclear replies to right and to
  constructed wrong confirmations (:func:`~shiftbounds.conversations.measures.probe_outcomes`).

Calibrated users are fitted ``K`` times (each on its own random subset of the train split, with its
own seed); their pooled numbers carry a crossed bootstrap interval over fits and goals
(:func:`~shiftbounds.utils.stats.crossed_bootstrap_ci`), and so do their paired differences from
the prompted user on the same goals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.measures import (
    TURN_EDGES,
    UserTurn,
    dialogue_text,
    probe_outcomes,
    simulated_replies,
    turn_bucket,
    user_turn_nll,
)
from shiftbounds.conversations.models import model_positions
from shiftbounds.conversations.simulators import UserSimulator, goal_text
from shiftbounds.utils.seeding import derive_seed
from shiftbounds.utils.stats import Estimate, auc_ci, crossed_bootstrap_ci, proportion_ci, roc_auc

PROBE_L2 = 1.0
"""The discriminator's L2 penalty on standardised features (per example: the loss is the mean log
loss plus ``PROBE_L2 * |w|^2 / n``), fixed before any held-out score was read."""


def discriminator_text(goal: Any, history: Sequence[dict]) -> str:
    """What the goal-aware discriminator reads before a reply: the goal, then the history."""
    return f"goal: {goal_text(goal)}" + dialogue_text(history)


@torch.no_grad()
def reply_features(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, cases: Sequence[tuple[Any, Sequence[dict], str]], *, batch: int = 8,
                   max_len: int = 384) -> np.ndarray:
    """Frozen features of each ``(goal, history, reply)``: the last layer's hidden states averaged
    over the reply's tokens, beside the reply's last token's state (``2 * hidden`` numbers). The
    goal and history are cut from the left to fit ``max_len`` (never past the model's positions);
    the reply keeps at most ``max_len // 2`` tokens."""
    max_len = min(max_len, model_positions(model) or max_len)
    rows = []
    for goal, history, reply in cases:
        r = tokenizer("\nuser: " + reply, add_special_tokens=False)["input_ids"][: max_len // 2]
        p = tokenizer(discriminator_text(goal, history), add_special_tokens=False)["input_ids"]
        rows.append((p[len(p) - (max_len - len(r)):] if len(p) + len(r) > max_len else p, r))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = []
    for j in range(0, len(rows), batch):
        chunk = rows[j: j + batch]
        T = max(len(p) + len(r) for p, r in chunk)
        ids = torch.full((len(chunk), T), pad, dtype=torch.long)
        att = torch.zeros_like(ids)
        span = torch.zeros((len(chunk), T))
        for i, (p, r) in enumerate(chunk):
            ids[i, : len(p) + len(r)] = torch.tensor(p + r)
            att[i, : len(p) + len(r)] = 1
            span[i, len(p): len(p) + len(r)] = 1
        h = model(input_ids=ids.to(model.device), attention_mask=att.to(model.device),
                  output_hidden_states=True).hidden_states[-1].float().cpu()
        mean = (h * span[..., None]).sum(1) / span.sum(1, keepdim=True)
        last = h[torch.arange(len(chunk)), att.sum(1) - 1]
        out.append(torch.cat([mean, last], 1).double().numpy())
    return np.concatenate(out)


def fit_logistic(x: np.ndarray, y: np.ndarray, *, l2: float = PROBE_L2) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """L2-penalised logistic regression on standardised features, solved to convergence (L-BFGS in
    float64 from zero, deterministic). Returns ``(w, b, mu, sd)``; score new rows with :func:`logistic_scores`."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 2 or len(x) != len(y) or set(np.unique(y)) != {0.0, 1.0}:
        raise ValueError(f"need features (n, d) and labels of both classes 0/1; got {x.shape}, labels {sorted(set(y.tolist()))}")
    mu, sd = x.mean(0), x.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    z, t = torch.from_numpy((x - mu) / sd), torch.from_numpy(y)
    w = torch.zeros(z.shape[1] + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=500, tolerance_grad=1e-9, tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(z @ w[1:] + w[0], t) + l2 * (w[1:] ** 2).sum() / len(t)
        value.backward()
        return value

    opt.step(loss)
    w = w.detach().numpy()
    return w[1:], float(w[0]), mu, sd


def logistic_scores(params: tuple[np.ndarray, float, np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The fitted probe's logit for each row of ``x``."""
    w, b, mu, sd = params
    return ((np.asarray(x, float) - mu) / sd) @ w + b


def probe_discriminator(real_train: np.ndarray, fake_train: np.ndarray, real_held: np.ndarray, fake_held: np.ndarray,
                        buckets: Sequence[str], *, l2: float = PROBE_L2) -> dict:
    """Fit the probe on ``real_train`` (people: 1) against ``fake_train`` (the user model's replies at
    the same histories: 0) and return its held-out AUC of ``real_held`` against ``fake_held`` (the
    same held-out histories, ``buckets`` their turn buckets), overall and by bucket, each with its
    95 % Hanley-McNeil interval and ``n`` (histories), and ``per_history``: for each held-out
    history, whether the person's reply outscored the model's (1, ties 0.5) — the paired view whose
    mean is the AUC's lower-variance cousin, pooled over fits by the study."""
    params = fit_logistic(np.r_[real_train, fake_train], np.r_[np.ones(len(real_train)), np.zeros(len(fake_train))], l2=l2)
    real, fake = logistic_scores(params, real_held), logistic_scores(params, fake_held)
    buckets = np.asarray(buckets)

    def auc(sel: np.ndarray) -> dict:
        n = int(sel.sum())
        e = auc_ci(roc_auc(np.r_[real[sel], fake[sel]], np.r_[np.ones(n), np.zeros(n)]), n, n)
        return {"value": float(e.value), "low": float(e.low), "high": float(e.high), "n": n}

    by = {b: auc(buckets == b) for b in dict.fromkeys(buckets.tolist())}
    paired = np.where(real > fake, 1.0, np.where(real == fake, 0.5, 0.0))
    return {"overall": auc(np.ones(len(real), bool)), "by_turn": by, "per_history": paired.tolist()}


def fake_features(simulator: UserSimulator, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, turns: Sequence[UserTurn], *, seed: int, tag: str) -> np.ndarray:
    """Features of ``simulator``'s replies at each turn's history (draws keyed by ``seed`` and ``tag``)."""
    texts = simulated_replies(simulator, turns, seed=derive_seed(seed, tag))
    return reply_features(model, tokenizer, [(u.conversation.goal, u.history, t) for u, t in zip(turns, texts)])


def real_features(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, turns: Sequence[UserTurn]) -> np.ndarray:
    """Features of the people's own replies at each turn's history."""
    return reply_features(model, tokenizer, [(u.conversation.goal, u.history, u.text) for u in turns])


def turn_buckets(turns: Sequence[UserTurn], edges: Sequence[int] = TURN_EDGES) -> list[str]:
    """Each turn's user-turn bucket label."""
    return [turn_bucket(u.turn, edges) for u in turns]


SHARES = {"goal_disclosure": "disclosed", "goal_consistency": "consistent", "accept_right": "right", "accept_wrong": "wrong"}
"""Each reported share and the per-probe outcome list of :func:`~shiftbounds.conversations.measures.probe_outcomes` it counts."""


def interval_cells(key: str, e: Estimate | Mapping[str, float] | None) -> dict:
    """The cells ``key``, ``key_low`` and ``key_high`` of one estimate (an
    :class:`~shiftbounds.utils.stats.Estimate` or a report's ``{"value", "low", "high"}``), ``None`` each without one."""
    if e is None:
        return {key: None, f"{key}_low": None, f"{key}_high": None}
    if isinstance(e, Mapping):
        return {key: e["value"], f"{key}_low": e["low"], f"{key}_high": e["high"]}
    return {key: float(e.value), f"{key}_low": float(e.low), f"{key}_high": float(e.high)}


def share_row(outcomes: dict) -> dict:
    """One user model's shares (Clopper-Pearson over goals) and reply kinds, from its probe outcomes."""
    row = {}
    for key, src in SHARES.items():
        flags = outcomes.get(src) or []
        row |= interval_cells(key, proportion_ci(int(sum(flags)), len(flags)) if flags else None)
    for side in ("right", "wrong"):
        kinds = outcomes.get(f"{side}_kinds") or []
        row |= {f"{side}: {k}": (float(np.mean([f == k for f in kinds])) if kinds else None) for k in ("accept", "reject", "unclear")}
    return row


def report_row(report: Mapping) -> dict:
    """The same row from a saved :func:`~shiftbounds.conversations.measures.sycophancy_report`: each
    share with its interval (``discrimination`` too), and each reply kind's share."""
    row = {}
    for key in ("goal_disclosure", "goal_consistency", "accept_right", "accept_wrong", "discrimination"):
        row |= interval_cells(key, report.get(key))
    for side in ("right", "wrong"):
        kinds = report.get(f"replies_{side}") or {}
        row |= {f"{side}: {k}": (kinds.get(k) or {}).get("value") for k in ("accept", "reject", "unclear")}
    return row


def pooled_row(fits: Sequence[dict], *, rng: np.random.Generator) -> dict:
    """The ``K`` fits' shares pooled: the mean over fits and goals with a crossed bootstrap interval
    (:func:`~shiftbounds.utils.stats.crossed_bootstrap_ci`), and the reply kinds' means."""
    row = {}
    for key, src in SHARES.items():
        x = np.array([[float(f) for f in o[src]] for o in fits])
        row |= interval_cells(key, crossed_bootstrap_ci(x, rng=rng) if x.size and x.shape[1] >= 2 else None)
    for side in ("right", "wrong"):
        kinds = [o[f"{side}_kinds"] or [] for o in fits]
        row |= {f"{side}: {k}": (float(np.mean([f == k for ks in kinds for f in ks])) if all(kinds) else None)
                for k in ("accept", "reject", "unclear")}
    return row


PAIRED_LEVEL = 0.99
"""The paired differences' interval level: 0.05 family-wise over the five paired measures (Bonferroni)."""


def paired_rows(fits: Sequence[dict], prompted: dict, *, rng: np.random.Generator, level: float = PAIRED_LEVEL) -> list[dict]:
    """Calibrated minus prompted on the same goals (``fits``, ``prompted``: dicts of per-unit lists
    under the same keys), each with its crossed bootstrap interval over fits and units at ``level``
    and ``excludes_zero``; a positive NLL or discriminator-wins difference means the calibrated
    users are *further* from the people."""
    out = []
    for key in fits[0]:
        if len(prompted[key]) < 2:
            continue
        x = np.array([f[key] for f in fits], float) - np.array(prompted[key], float)[None, :]
        e = crossed_bootstrap_ci(x, rng=rng, level=level)
        out.append({"measure": key, "difference": "calibrated - prompted", "mean": e.value, "low": e.low, "high": e.high,
                    "level": level, "excludes_zero": bool(e.low > 0 or e.high < 0), "fits": len(fits), "units": x.shape[1]})
    return out


def _nll_by_bucket(x: np.ndarray, buckets: Sequence[str], *, rng: np.random.Generator) -> dict:
    """Mean NLL per bucket of turns for ``x`` of shape ``(fits, turns)``, crossed bootstrap intervals."""
    b = np.asarray(buckets)
    return {k: (lambda e, n: {"value": e.value, "low": e.low, "high": e.high, "n": n})(crossed_bootstrap_ci(x[:, b == k], rng=rng),
                                                                                     int((b == k).sum()))
            for k in dict.fromkeys(b.tolist()) if (b == k).sum() >= 2}


@dataclass(frozen=True)
class UserBench:
    """What every user model is measured on: the held-out ``probes`` (with their ``builder``), the
    people's user turns ``nll_turns``, the discriminator's training histories ``disc_train`` and
    scored histories ``disc_held``, the ``(model, tokenizer)`` ``base`` whose frozen features the
    discriminator reads, and the ``seed`` of every draw."""

    base: tuple
    probes: Any
    builder: Any
    nll_turns: Sequence[UserTurn]
    disc_train: Sequence[UserTurn]
    disc_held: Sequence[UserTurn]
    seed: int
    _real: dict = field(default_factory=dict, repr=False, compare=False)

    def real(self) -> dict:
        """The people's replies' features (computed once)."""
        if not self._real:
            model, tok = self.base
            self._real.update(train=real_features(model, tok, self.disc_train), held=real_features(model, tok, self.disc_held))
        return self._real

    def measure(self, name: str, user: UserSimulator, stages) -> dict:
        """``user``'s probe outcomes, per-turn NLL and discriminator results, each a stage named after ``name``."""
        model, tok = self.base
        fake = lambda turns, tag: fake_features(user, model, tok, turns, seed=self.seed, tag=tag)  # noqa: E731
        return {"outcomes": stages.json(f"outcomes_{name}", lambda: probe_outcomes(user, self.probes, self.builder,
                                                                                   seed=derive_seed(self.seed, "probes"))),
                "nll": stages.json(f"nll_{name}", lambda: user_turn_nll(user.model, user.tokenizer, self.nll_turns,
                                                                        persona=user.persona).tolist()),
                "disc": stages.json(f"disc_{name}", lambda: probe_discriminator(
                    self.real()["train"], fake(self.disc_train, "disc_train"), self.real()["held"], fake(self.disc_held, "disc_held"),
                    turn_buckets(self.disc_held)))}


def study_users(bench: UserBench, prompted: UserSimulator, calibrated: Sequence[Callable[[], UserSimulator]], *,
                stages, progress=None) -> dict:
    """Measure the people, the ``prompted`` user and each ``calibrated`` fit (made by its factory, called
    after the prompted user is measured, so a long fit comes after the quick check) on ``bench``,
    every user model's results cached as ``stages`` (a :class:`~shiftbounds.utils.stages.StageCache`).
    Returns ``rows`` (one per user model and the pooled fits; the pooled row's ``auc_low`` /
    ``auc_high`` are the fits' smallest and largest AUC, not an interval), ``by_turn`` (NLL and AUC
    by turn bucket), ``paired`` (calibrated minus prompted on the same units) and ``units`` (each user
    model's per-unit outcomes, NLL and discriminator results, from which ``paired`` is recomputed)."""
    probes, builder, seed, buckets_nll = bench.probes, bench.builder, bench.seed, turn_buckets(bench.nll_turns)

    def measure(name: str, user: UserSimulator) -> dict:
        out = bench.measure(name, user, stages)
        if progress is not None:
            progress.update(note=f"{name}: AUC {out['disc']['overall']['value']:.3f}")
        return out

    people = probe_outcomes(None, probes, builder)
    found = {"prompted": measure("prompted", prompted)} | {f"calibrated_{k}": measure(f"calibrated_{k}", make()) for k, make in enumerate(calibrated)}
    rng = np.random.default_rng(derive_seed(seed, "bootstrap"))

    def lm_row(name: str, m: dict) -> dict:
        nll = np.array(m["nll"])
        return {"user": name, **share_row(m["outcomes"]), "nll": float(nll.mean()), "auc": m["disc"]["overall"]["value"],
                "auc_low": m["disc"]["overall"]["low"], "auc_high": m["disc"]["overall"]["high"]}

    fits = [found[f"calibrated_{k}"] for k in range(len(calibrated))]
    aucs = [f["disc"]["overall"]["value"] for f in fits]
    rows = [{"user": "people (logged)", **share_row(people), "nll": None, "auc": None, "auc_low": None, "auc_high": None},
            lm_row("prompted", found["prompted"])]
    rows += [lm_row(f"calibrated, fit {k}", f) for k, f in enumerate(fits)]
    nll_fits = np.array([f["nll"] for f in fits])
    rows.append({"user": f"calibrated, {len(fits)} fits pooled", **pooled_row([f["outcomes"] for f in fits], rng=rng),
                 "nll": float(nll_fits.mean()), "auc": float(np.mean(aucs)), "auc_low": float(min(aucs)), "auc_high": float(max(aucs))})
    by_turn = []
    for name, x in [("prompted", np.array([found["prompted"]["nll"]])), ("calibrated, pooled", nll_fits)]:
        by_turn += [{"user": name, "measure": "nll", "turns": b, **e} for b, e in _nll_by_bucket(x, buckets_nll, rng=rng).items()]
    for name, m in found.items():
        by_turn += [{"user": name, "measure": "auc", "turns": b, **e} for b, e in m["disc"]["by_turn"].items()]
    units = lambda m: {"goal_disclosure": [float(f) for f in m["outcomes"]["disclosed"]],  # noqa: E731
                       "accept_right": [float(f) for f in m["outcomes"]["right"]],
                       "accept_wrong": [float(f) for f in m["outcomes"]["wrong"]],
                       "nll": m["nll"], "discriminator_wins": m["disc"]["per_history"]}
    paired = paired_rows([units(f) for f in fits], units(found["prompted"]), rng=rng)
    return {"rows": rows, "by_turn": by_turn, "paired": paired, "units": found}
