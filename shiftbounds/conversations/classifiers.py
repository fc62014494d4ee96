"""Batches and losses for ``transformers`` causal LMs: masked span likelihood, a sequence
reward model, and single-step optimisation helpers shared by the real-data runs.

A training example is ``(context, target)`` text: the loss covers the target's tokens only (user
tokens for a user simulator, agent tokens for an agent). Sequences are right-padded; the mask is
``[B, T]`` over the positions whose next token is a target token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from transformers import PreTrainedTokenizerBase

from shiftbounds.nn.fit import fit


@dataclass(frozen=True)
class SpanBatch:
    """``input_ids [B, T]``, ``attention_mask [B, T]`` and ``target_mask [B, T-1]`` (1 where
    position ``i`` predicts a target token ``input_ids[:, i+1]``)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    target_mask: torch.Tensor

    def to(self, device: torch.device | str) -> SpanBatch:
        return SpanBatch(self.input_ids.to(device), self.attention_mask.to(device), self.target_mask.to(device))


def make_batch(tokenizer: PreTrainedTokenizerBase, pairs: list[tuple[str, str]], max_len: int) -> SpanBatch:
    """Tokenise ``(context, target)`` pairs; contexts are cut from the left to fit ``max_len``."""
    if max_len < 4:
        raise ValueError(f"max_len must be >= 4; got {max_len}")
    rows, masks = [], []
    for ctx, tgt in pairs:
        c = ([] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]) + list(tokenizer.encode(ctx))
        t = list(tokenizer.encode(tgt)) + [tokenizer.eos_token_id]
        t = t[: max_len - 1]
        c = c[-(max_len - len(t)):]
        rows.append(c + t)
        masks.append([0] * (len(c) - 1) + [1] * len(t))
    T = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(rows), T), pad, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    tm = torch.zeros((len(rows), T - 1))
    for i, (r, m) in enumerate(zip(rows, masks)):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
        tm[i, : len(m)] = torch.tensor(m, dtype=torch.float)
    return SpanBatch(ids, att, tm)


class RewardModel(nn.Module):
    """A sequence classifier on a causal LM backbone: a linear head on the last real token's
    final hidden state, trained with a logistic loss on human reward labels."""

    def __init__(self, lm) -> None:
        super().__init__()
        self.lm = lm
        hidden = lm.config.hidden_size if hasattr(lm.config, "hidden_size") else lm.config.n_embd
        self.head = nn.Linear(hidden, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Logit of "good" per sequence, ``[B]``."""
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        h = out.hidden_states[-1]  # [B, T, d]
        last = attention_mask.sum(1) - 1
        return self.head(h[torch.arange(h.shape[0]), last].float())[:, 0]


def classifier_batch(tokenizer: PreTrainedTokenizerBase, examples: list[tuple[str, str, float]], max_len: int, device: torch.device | str) -> tuple[SpanBatch, torch.Tensor]:
    """A batch of ``(context, text, label)`` for a :class:`RewardModel`-style classifier."""
    b = make_batch(tokenizer, [(c, t) for c, t, _ in examples], max_len).to(device)
    return b, torch.tensor([float(y) for _, _, y in examples], device=device)


def classifier_loss(model: RewardModel, batch: tuple[SpanBatch, torch.Tensor]) -> torch.Tensor:
    """Logistic loss of the classifier's logits against the 0/1 labels."""
    b, y = batch
    return nn.functional.binary_cross_entropy_with_logits(model(b.input_ids, b.attention_mask), y)


def fit_classifier(model: RewardModel, tokenizer, train: list[tuple[str, str, float]], *, steps: int, batch: int, lr: float,
                   max_len: int, rng, device) -> list[float]:
    """``steps`` AdamW steps on batches of ``train`` drawn with replacement by ``rng``."""
    if not train:
        raise ValueError("a classifier needs at least one training example")
    batches = (classifier_batch(tokenizer, [train[j] for j in rng.integers(len(train), size=batch)], max_len, device)
               for _ in range(steps))
    return fit(model, classifier_loss, batches, lr, clip=1.0)


@torch.no_grad()
def classifier_scores(model: RewardModel, tokenizer, examples: list[tuple[str, str, float]], *, batch: int, max_len: int,
                      device) -> torch.Tensor:
    """The classifier's logit for every example, ``[N]`` on the CPU."""
    model.eval()
    out = []
    for j in range(0, len(examples), batch):
        b, _ = classifier_batch(tokenizer, examples[j: j + batch], max_len, device)
        out.append(model(b.input_ids, b.attention_mask).float().cpu())
    return torch.cat(out) if out else torch.zeros(0)
