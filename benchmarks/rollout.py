"""Rollout engine throughput against re-encoding without a cache and against transformers' generate.

``python -m benchmarks.rollout [--batch 256 --horizon 6 --repeats 3]``

One run, side by side, on the same machine, with the same two networks (agent and neural user
simulator; width 64, 2 blocks) and the same dialogues (``guess_number``), counting agent + user
tokens per second:

* ``engine`` — :func:`shiftbounds.dialogue.rollout.rollout`, both networks with key-value caches;
* ``no cache`` — the same loop, re-encoding each network's whole history for every new token;
* ``transformers generate`` — equivalent GPT-2 models built from a ``GPT2Config`` (random
  weights, no download), each turn a ``generate(max_new_tokens=1)`` call on the whole history,
  as a turn-by-turn dialogue loop is usually written with that API.

It prints tokens/s and the ratios. With ``--stage-times RESULTS_DIR`` it also prints the wall time
per (task, seed) recorded by ``experiments.full_pipeline`` in that folder.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from shiftbounds.dialogue.rollout import NeuralUser, rollout
from shiftbounds.dialogue.stages import ModelConfig
from shiftbounds.dialogue.tasks import guess_number
from shiftbounds.dialogue.tokens import BOS, Vocab


@torch.no_grad()
def rollout_no_cache(vocab: Vocab, agent, user_net, goals: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The naive loop: every new token re-encodes the whole history of the network that emits it."""
    H, B = vocab.task.horizon, goals.shape[0]
    a_view = torch.full((B, 1), BOS)
    u_view = torch.stack([goals + vocab.goal_offset, torch.full_like(goals, BOS)], 1)
    valid = vocab.valid_user_acts()
    for _ in range(H):
        la = agent(a_view)[0][:, -1, vocab.agent_offset: vocab.agent_offset + vocab.n_agent]
        a = torch.multinomial(torch.softmax(la, -1), 1, generator=generator)[:, 0]
        u_view = torch.cat([u_view, (a + vocab.agent_offset)[:, None]], 1)
        lu = user_net(u_view)[0][:, -1, vocab.user_offset: vocab.user_offset + vocab.n_user].masked_fill(~valid[a], float("-inf"))
        u = torch.multinomial(torch.softmax(lu, -1), 1, generator=generator)[:, 0]
        toks = torch.stack([a + vocab.agent_offset, u + vocab.user_offset], 1)
        a_view = torch.cat([a_view, toks], 1)
        u_view = torch.cat([u_view, (u + vocab.user_offset)[:, None]], 1)
    return a_view


@torch.no_grad()
def rollout_hf_generate(vocab: Vocab, agent, user, goals: torch.Tensor) -> torch.Tensor:
    """Turn by turn with ``transformers`` ``generate`` (one new token per call, whole history each time)."""
    H, B = vocab.task.horizon, goals.shape[0]
    a_view = torch.full((B, 1), BOS)
    u_view = torch.stack([goals + vocab.goal_offset, torch.full_like(goals, BOS)], 1)
    ones = lambda x: torch.ones_like(x)  # noqa: E731
    for _ in range(H):
        a_view = agent.generate(a_view, attention_mask=ones(a_view), max_new_tokens=1, do_sample=True, pad_token_id=0)
        u_view = torch.cat([u_view, a_view[:, -1:]], 1)
        u_view = user.generate(u_view, attention_mask=ones(u_view), max_new_tokens=1, do_sample=True, pad_token_id=0)
        a_view = torch.cat([a_view, u_view[:, -1:]], 1)
    return a_view


def timed(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256, help="dialogues per rollout")
    p.add_argument("--horizon", type=int, default=6, help="turns per dialogue")
    p.add_argument("--repeats", type=int, default=3, help="timing repeats (best kept)")
    p.add_argument("--stage-times", type=str, default=None, help="a full_pipeline results folder to report wall times from")
    a = p.parse_args(argv)
    torch.manual_seed(0)
    task = guess_number(5, horizon=a.horizon)
    vocab = Vocab(task)
    mcfg = ModelConfig(64, 2, 4)
    agent, user_net = mcfg.build(vocab).eval(), mcfg.build(vocab).eval()
    user = NeuralUser(vocab, user_net)
    goals = torch.randint(task.n_goals, (a.batch,))
    g = torch.Generator().manual_seed(0)
    n_tokens = 2 * a.horizon * a.batch
    rows = {
        "engine (KV cache)": timed(lambda: rollout(vocab, agent, user, goals, generator=g), a.repeats),
        "no cache": timed(lambda: rollout_no_cache(vocab, agent, user_net, goals, g), a.repeats),
    }
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        hf_cfg = GPT2Config(vocab_size=vocab.size, n_positions=2 + 2 * a.horizon, n_embd=64, n_layer=2, n_head=4,
                            bos_token_id=BOS, eos_token_id=None)
        hf_agent, hf_user = GPT2LMHeadModel(hf_cfg).eval(), GPT2LMHeadModel(hf_cfg).eval()
        rows["transformers generate"] = timed(lambda: rollout_hf_generate(vocab, hf_agent, hf_user, goals), a.repeats)
    except ImportError:
        print("transformers is not installed; skipping that comparison")
    base = rows["engine (KV cache)"]
    print(f"batch {a.batch}, {a.horizon} turns, {n_tokens} agent+user tokens per rollout, {torch.get_num_threads()} threads\n")
    print(f"{'implementation':24s} {'tokens/s':>12s} {'engine speed-up':>16s}")
    for name, sec in rows.items():
        print(f"{name:24s} {n_tokens / sec:12.0f} {sec / base:15.2f}x")
    if a.stage_times:
        res = json.loads((Path(a.stage_times) / "results.json").read_text())
        print("\nfull_pipeline wall time per (task, seed):")
        for k, v in res["wall_seconds"].items():
            print(f"  {k}: {v:.1f} s")
    return {name: n_tokens / sec for name, sec in rows.items()}


if __name__ == "__main__":
    main()
