"""Data-parallel training with ``torch.distributed`` (launch with ``torchrun``; NCCL on GPUs, gloo on CPU).

Each rank takes its shard of every batch (:func:`shard`), ``DistributedDataParallel`` averages the
gradients, and only rank 0 logs and writes checkpoints (:func:`is_main`). With equal shards, the
averaged gradient of per-shard mean losses equals the full-batch mean-loss gradient, so a run on
``W`` processes follows the single-process run step for step (tested with 2 gloo processes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """This process's place: ``rank`` of ``world_size``, and its device."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_from_env(backend: str | None = None) -> DistInfo:
    """Join the process group that ``torchrun`` describes in the environment (``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``); a plain ``python`` run is a group of one."""
    if "RANK" not in os.environ:
        return DistInfo(device=torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    use_cuda = torch.cuda.is_available() and backend != "gloo"
    backend = backend or ("nccl" if use_cuda else "gloo")
    if not dist.is_initialized():
        dist.init_process_group(backend)
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    return DistInfo(dist.get_rank(), dist.get_world_size(), device)


def shard(items, info: DistInfo):
    """This rank's share of a batch: every ``world_size``-th item from ``rank`` on."""
    return items[info.rank:: info.world_size]


def is_main(info: DistInfo) -> bool:
    """Only rank 0 logs, evaluates and writes files."""
    return info.is_main


def wrap(model: torch.nn.Module, info: DistInfo) -> torch.nn.Module:
    """``DistributedDataParallel`` when there is more than one process, else the model itself."""
    if info.world_size == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[info.device.index] if info.device.type == "cuda" else None)


def all_mean(x: float, info: DistInfo) -> float:
    """Mean of a scalar over ranks (for logging)."""
    if info.world_size == 1:
        return x
    t = torch.tensor([x], dtype=torch.float64, device=info.device)
    dist.all_reduce(t)
    return float(t) / info.world_size
