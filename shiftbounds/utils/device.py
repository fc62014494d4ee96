"""The one place a device is chosen."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> torch.device:
    """``cpu``, ``cuda``, or ``auto`` (CUDA when available). Every model of the package trains in
    float32 on either; a missing GPU is an error naming the option.

    Raises:
        ValueError: ``name`` is not one of :data:`DEVICES`, or ``cuda`` without a CUDA device.
    """
    if name not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}; got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available here")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")
