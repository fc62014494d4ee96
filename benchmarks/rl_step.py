"""Seconds per multi-turn GRPO step against a pretrained LM user, for the agents one can afford.

``python -m benchmarks.rl_step [--preset smoke|default] [--model DIR] [options]``

One process, one device, side by side: Interactive RL (TRL's ``GRPOTrainer`` with the package's
multi-turn rollouts) against the prompted ``--model`` as the simulated user, for each agent in
``--agents``:

* ``tiny``: a corpus-sized GPT-2 (``--tiny-d-model``, 2 layers) with its own small tokenizer, full fine-tuning;
* ``lora``: the pretrained ``--model`` itself as the agent, LoRA adapters of rank ``--lora-rank``;
* ``full``: the pretrained ``--model`` as the agent, full fine-tuning.

Each agent trains ``1 + --steps`` steps of ``--batch`` dialogues (``--turns`` agent turns of at most
``--new`` tokens; the user answers with at most ``--new`` tokens); the first step is a warm-up, and
the table gives the median seconds of the others, with the ratio to the first agent. Without
``--model`` (or with a folder that does not exist) the user and the pretrained agent are
SmolLM2-135M's architecture with random weights and a small tokenizer
(:func:`~shiftbounds.conversations.pretrained.random_smollm2`, ``--random-layers`` layers): its
speed and memory, not its behaviour, and the report says so.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import TrainerCallback

from benchmarks import write_report
from shiftbounds.conversations.models import build_tiny_chat_model
from shiftbounds.conversations.paradigms import ParadigmConfig, paradigm_trainer
from shiftbounds.conversations.pretrained import random_smollm2
from shiftbounds.conversations.records import Conversation, Message
from shiftbounds.conversations.simulators import LMUser
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.device import resolve_device

AGENTS = ("tiny", "lora", "full")
DRINKS = ("hot mocha", "iced latte", "cappuccino", "green tea", "flat white", "chai latte", "americano", "hot chocolate")


@dataclass(frozen=True)
class RLStepConfig:
    """Options of ``benchmarks.rl_step``."""

    model: str = field(default="", metadata={"help": "pretrained chat-model folder (e.g. from shiftbounds base-model); empty: SmolLM2's architecture, random weights"})
    agents: tuple[str, ...] = field(default=("tiny", "lora"), metadata={"help": f"agents, from {AGENTS}"})
    batch: int = field(default=8, metadata={"help": "dialogues per step"})
    num_generations: int = field(default=4, metadata={"help": "rollouts per goal"})
    turns: int = field(default=2, metadata={"help": "agent turns per dialogue"})
    new: int = field(default=32, metadata={"help": "new tokens per agent and per user turn"})
    steps: int = field(default=2, metadata={"help": "timed steps (after one warm-up step)"})
    lora_rank: int = field(default=16, metadata={"help": "LoRA rank of the lora agent"})
    tiny_d_model: int = field(default=128, metadata={"help": "width of the tiny agent"})
    random_layers: int = field(default=30, metadata={"help": "layers of the random-weights stand-in (SmolLM2 has 30)"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda or auto"})
    seed: int = field(default=0, metadata={"help": "seed of the models, rollouts and trainer"})
    out_dir: str = field(default="results/benchmarks/rl_step/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        if not self.agents or any(a not in AGENTS for a in self.agents):
            raise ValueError(f"--agents must name agents from {AGENTS}; got {self.agents}")
        if min(self.batch, self.turns, self.new, self.steps, self.lora_rank, self.random_layers) < 1 or self.num_generations < 2:
            raise ValueError(f"need --batch, --turns, --new, --steps, --lora-rank, --random-layers >= 1 and --num-generations >= 2; got {self}")


PRESETS = {"default": {}, "smoke": {"batch": 4, "num_generations": 2, "turns": 1, "new": 4, "steps": 1, "lora_rank": 2,
                                    "tiny_d_model": 32, "random_layers": 2, "agents": ("tiny", "lora", "full")}}


class StepClock(TrainerCallback):
    """Wall time at the end of every optimiser step."""

    def __init__(self) -> None:
        self.times = [time.perf_counter()]

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.times.append(time.perf_counter())


def goals(n: int) -> list[Conversation]:
    """``n`` coffee orders as goals (the agent's prompt is its system prompt alone)."""
    return [Conversation(f"g{i}", f"{1 + i % 3} {DRINKS[i % len(DRINKS)]}", (Message("user", "hi"),)) for i in range(n)]


def judge(goal: str, messages: list[dict]) -> float:
    """A share of the goal's words the agent said: any reward with spread, for timing."""
    said = " ".join(m["content"] for m in messages if m["role"] == "assistant").lower()
    words = goal.split()
    return sum(w in said for w in words) / len(words)


def step_seconds(agent: Path, user: LMUser, cfg: RLStepConfig, lora: int, out: Path) -> list[float]:
    pcfg = ParadigmConfig(steps=1 + cfg.steps, batch=cfg.batch, num_generations=cfg.num_generations, lr=1e-5,
                          max_turns=cfg.turns, max_new_tokens=cfg.new, seed=cfg.seed, user_first=True, lora_rank=lora)
    trainer = paradigm_trainer("interactive", agent, goals(cfg.batch), judge, pcfg, out, user.clone)
    clock = StepClock()
    trainer.add_callback(clock)
    trainer.train()
    return [b - a for a, b in zip(clock.times, clock.times[1:])][1:]


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(RLStepConfig, __doc__, PRESETS, argv, name="benchmarks.rl_step")
    device = resolve_device(cfg.device)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        real = bool(cfg.model) and Path(cfg.model).is_dir()
        texts = [f"can i get {g.goal} please" for g in goals(64)] * 4
        pretrained = Path(cfg.model) if real else random_smollm2(tmp / "smollm2", texts, seed=cfg.seed, n_layer=cfg.random_layers)
        user = LMUser.from_pretrained(pretrained, max_new_tokens=cfg.new)
        user.model.to(device)
        tiny = build_tiny_chat_model(tmp / "tiny", texts, vocab_size=512, d_model=cfg.tiny_d_model, n_layer=2, seed=cfg.seed)
        rows = []
        for name in cfg.agents:
            agent, lora = (tiny, 0) if name == "tiny" else (pretrained, cfg.lora_rank if name == "lora" else 0)
            secs = step_seconds(agent, user, cfg, lora, tmp / f"run_{name}")
            rows.append({"agent": name, "parameters": sum(p.numel() for p in user.model.parameters()) if name != "tiny" else None,
                         "lora_rank": lora or None, "median_step_seconds": statistics.median(secs),
                         "steps_timed": len(secs)})
        for r in rows:
            r["ratio_to_first"] = r["median_step_seconds"] / rows[0]["median_step_seconds"]
    what = (f"user and pretrained agent: {cfg.model}" if real else
            f"user and pretrained agent: SmolLM2-135M's architecture with random weights ({cfg.random_layers} layers, a small "
            "tokenizer): speed and memory only, not SmolLM2's behaviour or vocabulary")
    return write_report(cfg.out_dir, {**asdict(cfg), "device": str(device)}, "benchmarks.rl_step: seconds per multi-turn GRPO step", rows,
                        f"{what}; {torch.get_num_threads()} torch threads; {cfg.batch} dialogues of {cfg.turns} agent turns "
                        f"(at most {cfg.new} new tokens per turn) per step; median of {cfg.steps} steps after a warm-up step.")


if __name__ == "__main__":
    main()
