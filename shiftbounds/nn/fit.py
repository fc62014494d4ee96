"""The one gradient loop of the package's own trainers: AdamW on a loss per batch.

Every supervised or policy-gradient trainer that is not TRL's (the dialogue agent's and simulators'
SFT, the realism discriminator and fine-tuning, the modular-addition teacher and students, the
text-path classifiers) is :func:`fit` with its own ``batch_loss``; what differs between them is that
function, the learning-rate schedule, and whether gradients are clipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn


def fit(model: nn.Module, batch_loss: Callable[[nn.Module, Any], torch.Tensor], batches: Iterable, lr: float, *,
        clip: float | None = None, lr_at: Callable[[int], float] | None = None, progress: Callable | None = None,
        after_step: Callable[[int, nn.Module], None] | None = None) -> list[float]:
    """Train ``model`` in place: for each batch of ``batches`` (drawn lazily, so ``batch_loss`` may draw
    from the same generator between them), AdamW (no weight decay) on ``batch_loss(model, batch)``,
    gradients clipped to norm ``clip`` when given, the rate ``lr_at(step)`` when given (else ``lr``).
    ``progress(step, loss)`` after every step; ``after_step(steps_done, model)`` before the first and
    after each step (it may evaluate the model, then training mode is restored). Returns the losses;
    ``model`` is left in eval mode."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    losses: list[float] = []
    model.train()
    if after_step is not None:
        after_step(0, model)
        model.train()
    for step, batch in enumerate(batches):
        if lr_at is not None:
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
        loss = batch_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
        if progress:
            progress(step, losses[-1])
        if after_step is not None:
            after_step(step + 1, model)
            model.train()
    model.eval()
    return losses
