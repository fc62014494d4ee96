"""Per-turn realism of a text user simulator against held-out human turns (the real-data view of
``delta_t``, docs/theory.md §3).

A real-vs-simulated **discriminator** is a sequence classifier
(:class:`~shiftbounds.llm.training.RewardModel` on a causal LM) trained on human user turns
(label 1) and the simulator's turns at the same histories (label 0). Its held-out ROC AUC, by
turn index, says how far the simulator's turn-``t`` law is from people's: 0.5 when a classifier of
this size cannot tell them apart, towards 1 as they separate. Unlike a likelihood score, it sees
context and turn together, as the discriminator realism reward of Calibrated Interactive RL does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from shiftbounds.llm.sampling import sample_batch
from shiftbounds.llm.training import RewardModel, classifier_scores, fit_classifier
from shiftbounds.utils.stats import Estimate, auc_ci, roc_auc

TURN_BUCKETS = ("0-4", "5-9", "10-19", "20+")


def turn_bucket(t: int) -> str:
    """The turn-index bucket of the per-turn tables: 0-4, 5-9, 10-19, 20+."""
    return "0-4" if t < 5 else "5-9" if t < 10 else "10-19" if t < 20 else "20+"


def discriminator_auc_ci(disc: dict, bucket: str) -> Estimate | None:
    """A discriminator's AUC in turn bucket ``bucket`` with its 95 % interval, from a result of
    :func:`discriminator_auc_by_turn` saved as ``{"by_turn": ..., "n_held_out": ...}`` (real and
    simulated turns at the same held-out contexts: as many of each); ``None`` for an empty bucket."""
    auc, n = disc["by_turn"].get(bucket), disc["n_held_out"].get(bucket, 0)
    return auc_ci(auc, n, n) if auc is not None and n > 0 else None


def simulate_user_turns(sim, tokenizer, examples: list[tuple[str, str, int]], *, batch: int, max_new: int,
                        generator: torch.Generator, max_context: int | None = None) -> list[str]:
    """The simulator's user turn (``"<user>..."``) after each example's context, sampled at
    temperature 1 in batches; it ends at the next ``<agent>``, ``<api>`` or end-of-text."""
    enc = tokenizer.encode
    user_id = enc("<user>")[0]
    stops = [enc("<agent>")[0], enc("<api>")[0], tokenizer.eos_token_id]
    out = []
    for j in range(0, len(examples), batch):
        prompts = [[tokenizer.bos_token_id] + enc(c) + [user_id] for c, _, _ in examples[j: j + batch]]
        rows = sample_batch(sim, prompts, max_new, stop_ids=stops, pad_id=tokenizer.pad_token_id, temperature=1.0,
                            generator=generator, max_context=max_context)
        out += ["<user>" + tokenizer.decode([x for x in r if x not in stops]) for r in rows]
    return out


def discriminator_auc_by_turn(make_classifier: Callable[[], RewardModel], sim, tokenizer,
                              train: list[tuple[str, str, int]], held: list[tuple[str, str, int]], *, steps: int,
                              batch: int, lr: float, max_len: int, max_new: int, generator: torch.Generator,
                              rng: np.random.Generator, device) -> dict:
    """Train a real-vs-``sim`` discriminator on ``train`` histories and return its held-out AUC
    overall and by turn bucket (``None`` where a bucket has no held-out turn), with the counts.

    Args:
        make_classifier: a fresh classifier (on ``device``).
        train, held: ``(context, human user turn, turn index)`` examples.
    """
    kw = dict(batch=batch, max_new=max_new, generator=generator, max_context=max_len - max_new)
    fake_train = simulate_user_turns(sim, tokenizer, train, **kw)
    fake_held = simulate_user_turns(sim, tokenizer, held, **kw)
    data = [(c, t, 1.0) for c, t, _ in train] + [(c, f, 0.0) for (c, _, _), f in zip(train, fake_train)]
    disc = make_classifier()
    fit_classifier(disc, tokenizer, data, steps=steps, batch=batch, lr=lr, max_len=max_len, rng=rng, device=device)
    real = classifier_scores(disc, tokenizer, [(c, t, 1.0) for c, t, _ in held], batch=batch, max_len=max_len, device=device)
    fake = classifier_scores(disc, tokenizer, [(c, f, 0.0) for (c, _, _), f in zip(held, fake_held)], batch=batch,
                             max_len=max_len, device=device)
    buckets = np.array([turn_bucket(t) for _, _, t in held])
    out = {"overall": roc_auc(np.r_[real.numpy(), fake.numpy()], np.r_[np.ones(len(held)), np.zeros(len(held))]),
           "by_turn": {}, "n_held_out": {}}
    for b in TURN_BUCKETS:
        sel = buckets == b
        out["n_held_out"][b] = int(sel.sum())
        out["by_turn"][b] = (roc_auc(np.r_[real.numpy()[sel], fake.numpy()[sel]], np.r_[np.ones(sel.sum()), np.zeros(sel.sum())])
                             if sel.any() else None)
    return out
