"""Two gloo processes on the CPU follow the single-process run: same averaged gradients, same weights."""

from __future__ import annotations

import os
import socket

import torch
import torch.multiprocessing as mp

from shiftbounds.llm.distributed import DistInfo, all_mean, shard, wrap

STEPS, BATCH = 3, 8


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()


def _data():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 5, generator=g, dtype=torch.float64), torch.randint(3, (BATCH,), generator=g)) for _ in range(STEPS)]


def _train(info: DistInfo):
    model = _model()
    net = wrap(model, info)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    grads = []
    for x, y in _data():
        xs, ys = shard(x, info), shard(y, info)
        loss = torch.nn.functional.cross_entropy(net(xs), ys)
        opt.zero_grad()
        loss.backward()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
        all_mean(loss.item(), info)
    return grads, [p.detach().clone() for p in model.parameters()]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    grads, weights = _train(DistInfo(rank, world, torch.device("cpu")))
    if rank == 0:
        torch.save({"grads": grads, "weights": weights}, out)
    torch.distributed.barrier()  # no rank tears the group down while another still uses it
    torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_equal_single_process(tmp_path):
    out = str(tmp_path / "ddp.pt")
    mp.spawn(_worker, args=(2, _free_port(), out), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=False)
    grads, weights = _train(DistInfo())
    for step in range(STEPS):
        for a, b in zip(ddp["grads"][step], grads[step]):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(ddp["weights"], weights):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
