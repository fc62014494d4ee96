"""The one gradient loop (:func:`shiftbounds.nn.fit.fit`)."""

from __future__ import annotations

import torch
from torch import nn

from shiftbounds.nn.fit import fit


def _problem(seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 3, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(64, generator=g)
    torch.manual_seed(seed)
    return nn.Linear(3, 1), x, y


def test_fit_trains_in_place_and_reports_every_step():
    model, x, y = _problem()
    seen, evaluated = [], []
    losses = fit(model, lambda m, _: ((m(x)[:, 0] - y) ** 2).mean(), range(200), 0.05,
                 progress=lambda step, loss: seen.append(step), after_step=lambda done, m: evaluated.append((done, m.training)))
    assert losses[-1] < 0.05 < losses[0] and seen == list(range(200)) and not model.training
    assert [d for d, _ in evaluated] == list(range(201)) and all(t for _, t in evaluated)  # in training mode between steps


def test_schedule_and_clip_change_the_steps_and_only_when_asked():
    runs = {}
    for name, kwargs in {"plain": {}, "same": {"lr_at": lambda step: 0.05}, "clip": {"clip": 1e-3}, "decay": {"lr_at": lambda step: 0.05 / (1 + step)}}.items():
        model, x, y = _problem()
        fit(model, lambda m, _: ((m(x)[:, 0] - y) ** 2).mean(), range(20), 0.05, **kwargs)
        runs[name] = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(runs["plain"], runs["same"])
    assert not torch.allclose(runs["plain"], runs["clip"]) and not torch.allclose(runs["plain"], runs["decay"])


def test_frozen_parameters_stay_put():
    model, x, y = _problem()
    model.bias.requires_grad_(False)
    before = model.bias.detach().clone()
    fit(model, lambda m, _: ((m(x)[:, 0] - y) ** 2).mean(), range(5), 0.1)
    assert torch.equal(model.bias, before)
