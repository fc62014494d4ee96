"""Rollout engine throughput against re-encoding without a cache and against transformers' generate.

``python -m benchmarks.rollout [--preset smoke|default] [--batch 256 --horizon 6 --repeats 3]``

One run, side by side, on the same machine, with the same two networks (agent and neural user
simulator; width 64, 2 blocks) and the same dialogues (``guess_number``), counting agent + user
tokens per second:

* ``engine`` — :func:`shiftbounds.dialogue.neural.rollout.rollout`, both networks with key-value caches;
* ``no cache`` — the same loop, re-encoding each network's whole history for every new token;
* ``transformers generate`` — equivalent GPT-2 models built from a ``GPT2Config`` (random
  weights, no download), each turn a ``generate(max_new_tokens=1)`` call on the whole history,
  as a turn-by-turn dialogue loop is usually written with that API.

It writes tokens/s and the ratios to ``results.md`` / ``results.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from benchmarks import best_time, write_report
from shiftbounds.dialogue.neural.rollout import NeuralUser, rollout
from shiftbounds.dialogue.neural.tokens import BOS, Vocab
from shiftbounds.dialogue.neural.training import ModelConfig
from shiftbounds.dialogue.tasks import guess_number
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.seeding import torch_generator, torch_init_seed


@dataclass(frozen=True)
class RolloutBenchConfig:
    """Options of ``benchmarks.rollout``."""

    batch: int = field(default=256, metadata={"help": "dialogues per rollout"})
    horizon: int = field(default=6, metadata={"help": "turns per dialogue"})
    repeats: int = field(default=3, metadata={"help": "timing repeats (best kept)"})
    seed: int = field(default=0, metadata={"help": "seed of the networks and the dialogues"})
    out_dir: str = field(default="results/benchmarks/rollout/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        if min(self.batch, self.horizon, self.repeats) < 1:
            raise ValueError(f"--batch, --horizon and --repeats must be >= 1; got {self.batch}, {self.horizon}, {self.repeats}")


PRESETS = {"default": {}, "smoke": {"batch": 8, "horizon": 3, "repeats": 1}}


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


def main(argv: list[str] | None = None) -> dict:
    a = parse_config(RolloutBenchConfig, __doc__, PRESETS, argv, name="benchmarks.rollout")
    task = guess_number(5, horizon=a.horizon)
    vocab = Vocab(task)
    mcfg = ModelConfig(64, 2, 4)
    with torch_init_seed(a.seed, "networks"):
        agent, user_net = mcfg.build(vocab).eval(), mcfg.build(vocab).eval()
    user = NeuralUser(vocab, user_net)
    goals = torch.randint(task.n_goals, (a.batch,), generator=torch_generator(a.seed, "goals"))
    g = torch_generator(a.seed, "rollouts")
    n_tokens = 2 * a.horizon * a.batch
    seconds = {
        "engine (KV cache)": best_time(lambda: rollout(vocab, agent, user, goals, generator=g), a.repeats),
        "no cache": best_time(lambda: rollout_no_cache(vocab, agent, user_net, goals, g), a.repeats),
    }
    try:
        hf_cfg = GPT2Config(vocab_size=vocab.size, n_positions=2 + 2 * a.horizon, n_embd=64, n_layer=2, n_head=4,
                            bos_token_id=BOS, eos_token_id=None)
        with torch_init_seed(a.seed, "hf_networks"):
            hf_agent, hf_user = GPT2LMHeadModel(hf_cfg).eval(), GPT2LMHeadModel(hf_cfg).eval()
        seconds["transformers generate"] = best_time(lambda: rollout_hf_generate(vocab, hf_agent, hf_user, goals), a.repeats)
    except ImportError:
        print("transformers is not installed; skipping that comparison")
    base = seconds["engine (KV cache)"]
    rows = [{"implementation": name, "tokens_per_s": n_tokens / sec, "engine_speed_up": sec / base} for name, sec in seconds.items()]
    notes = f"Batch {a.batch}, {a.horizon} turns, {n_tokens} agent + user tokens per rollout, {torch.get_num_threads()} threads."
    return write_report(a.out_dir, asdict(a), "benchmarks.rollout: dialogue rollouts, tokens per second", rows, notes)


if __name__ == "__main__":
    main()
