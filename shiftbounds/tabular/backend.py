"""Array-library dispatch for the exact engine.

Every function in :mod:`shiftbounds.tabular` works on NumPy arrays and on torch tensors; the
library is chosen by the type of the arrays passed in (never by a global switch), so the same
code runs on CPU NumPy, CPU torch and CUDA torch. This module holds the few operations whose
spelling differs between the two libraries (``axis`` versus ``dim``, ``amax`` versus ``max``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

Array = Any  # numpy.ndarray or torch.Tensor


def is_torch(x: Array) -> bool:
    """True when ``x`` is a torch tensor."""
    return isinstance(x, torch.Tensor)


def push_forward(joint: Array, kernel: Array) -> Array:
    """``out[..., p] = sum_{s,a} joint[..., s, a] * kernel[..., s, a, p]`` (one forward step).

    NumPy: un-optimised ``einsum``, which streams the kernel about twice as fast as ``matmul``
    on stacked arrays; torch: a batched ``matmul`` over the flattened ``(s, a)`` axis, since
    ``torch.einsum`` copies the kernel for this pattern (both measured in benchmarks/tabular.py).
    """
    if is_torch(joint):
        S, A = kernel.shape[-3], kernel.shape[-2]
        row = joint.reshape(joint.shape[:-2] + (1, S * A))
        return (row @ kernel.reshape(kernel.shape[:-3] + (S * A, S)))[..., 0, :]
    return np.einsum("...sa,...sap->...p", joint, kernel)


def expect_next(kernel: Array, value: Array) -> Array:
    """``out[..., s, a] = sum_p kernel[..., s, a, p] * value[..., p]`` (one backward step)."""
    if is_torch(kernel):
        S, A = kernel.shape[-3], kernel.shape[-2]
        out = kernel.reshape(kernel.shape[:-3] + (S * A, S)) @ value[..., :, None]  # [..., S*A, 1]
        return out.reshape(out.shape[:-2] + (S, A))
    return np.einsum("...sap,...p->...sa", kernel, value)


def amax(x: Array, axis: int | tuple[int, ...]) -> Array:
    """Maximum over ``axis`` (NumPy ``np.max`` / torch ``torch.amax``)."""
    return torch.amax(x, dim=axis) if is_torch(x) else np.max(x, axis=axis)


def amin(x: Array, axis: int | tuple[int, ...]) -> Array:
    """Minimum over ``axis``."""
    return torch.amin(x, dim=axis) if is_torch(x) else np.min(x, axis=axis)


def argmax(x: Array, axis: int) -> Array:
    """Index of the first maximum along ``axis`` (both libraries return the first)."""
    return torch.argmax(x, dim=axis) if is_torch(x) else np.argmax(x, axis=axis)


def stack(xs: list[Array], axis: int) -> Array:
    """Stack arrays of one library along a new ``axis``, broadcasting them to a common shape
    first (the first turn of a recursion may carry fewer batch dimensions than the rest)."""
    if is_torch(xs[0]):
        return torch.stack(torch.broadcast_tensors(*xs), dim=axis)
    return np.stack(np.broadcast_arrays(*xs), axis=axis)


def zeros_like(x: Array) -> Array:
    """Zeros with the shape, dtype and device of ``x``."""
    return torch.zeros_like(x) if is_torch(x) else np.zeros_like(x)


def minimum(x: Array, value: float) -> Array:
    """Element-wise ``min(x, value)``."""
    return torch.clamp(x, max=value) if is_torch(x) else np.minimum(x, value)


def one_hot(index: Array, n: int, like: Array) -> Array:
    """One-hot encoding of integer ``index`` along a new last axis of size ``n``, dtype of ``like``."""
    if is_torch(index):
        return torch.nn.functional.one_hot(index, n).to(like.dtype)
    return (index[..., None] == np.arange(n)).astype(like.dtype)


def exclusive_cumsum(x: Array) -> Array:
    """``y[..., t] = sum_{k<t} x[..., k]`` along the last axis (``y[..., 0] = 0``)."""
    if is_torch(x):
        c = torch.cumsum(x, dim=-1)
        return torch.cat([torch.zeros_like(c[..., :1]), c[..., :-1]], dim=-1)
    c = np.cumsum(x, axis=-1)
    return np.concatenate([np.zeros_like(c[..., :1]), c[..., :-1]], axis=-1)


def to_numpy(x: Array) -> np.ndarray:
    """A NumPy copy (or view) of ``x``; torch tensors are detached and moved to the CPU."""
    return x.detach().cpu().numpy() if is_torch(x) else np.asarray(x)
