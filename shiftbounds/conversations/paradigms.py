"""The three paradigms on TRL's ``GRPOTrainer`` with one configuration, and agents saved like
simulators.

* **static** — Static Context RL: the agent completes one turn at each logged history
  (:func:`~shiftbounds.conversations.rollouts.static_context_dataset`), paid by the judge on the
  history plus that turn; the contexts come from the logs, not from the agent (``Delta_t``);
* **interactive** — Interactive RL: whole dialogues against a prompted simulator
  (:func:`~shiftbounds.conversations.rollouts.make_rollout_func`), paid by the judge;
* **calibrated** — Calibrated Interactive RL: the same against a calibrated simulator.

Every paradigm gets the same :func:`grpo_config` (steps, batch, generations, learning rate, KL
weight, seeds); only the data and the rollout differ. :func:`train_paradigm` saves the trained agent
with ``save_pretrained`` (model and tokenizer) and ``shiftbounds.json`` (kind ``agent``, paradigm,
base, reward per step). Launched with ``accelerate launch``, the trainer runs data-parallel on
several processes, GPUs or machines; every dialogue's draws are keyed by its place in the global
batch, so two processes roll out the same dialogues as one.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import trl
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from shiftbounds.conversations.calibration import Reporting
from shiftbounds.conversations.models import load_chat_model, save_chat_model, trainer_counts_positions_from_mask
from shiftbounds.conversations.records import ConversationData, as_conversations
from shiftbounds.conversations.rollouts import (
    Judge,
    agent_prompt,
    credit_reward_func,
    judge_reward_func,
    make_rollout_func,
    rollout_dialogues,
    static_context_dataset,
    static_reward_func,
)
from shiftbounds.conversations.simulators import UserSimulator
from shiftbounds.theory import PARADIGMS
from shiftbounds.utils.device import resolve_device
from shiftbounds.utils.progress import attach_progress
from shiftbounds.utils.seeding import derive_seed
from shiftbounds.utils.stats import mean_ci

SYSTEM = "You are a helpful assistant."


@dataclass(frozen=True)
class ParadigmConfig:
    """One GRPO configuration for every paradigm (each field's help says what it is).

    ``system``: the agent's system prompt (it never contains the goal); ``None`` (the default): the one
    the starting agent was trained with (its ``shiftbounds.json``), else :data:`SYSTEM`. With
    ``lora_rank`` > 0 the adapters are merged into the saved agent, so the saved folder is an ordinary
    model (and the reference, with ``beta > 0``, is the starting agent with the adapters off, as TRL
    does). ``credit_weight > 0`` needs a ``credit`` judge; the judge's own reward per step is logged
    apart (``success``). ``reporting``: ``report_to`` and checkpointing passed to ``GRPOConfig``
    (:class:`~shiftbounds.conversations.calibration.Reporting`).
    """

    steps: int = field(default=50, metadata={"help": "GRPO steps"})
    batch: int = field(default=8, metadata={"help": "dialogues per device per GRPO step (a multiple of num_generations)"})
    num_generations: int = field(default=4, metadata={"help": "dialogues per goal (the group whose mean reward is the baseline)"})
    lr: float = field(default=1e-5, metadata={"help": "GRPO learning rate"})
    beta: float = field(default=0.0, metadata={"help": "KL weight to the starting agent (> 0 loads a reference model)"})
    max_turns: int = field(default=4, metadata={"help": "agent turns per dialogue (interactive paradigms; evaluation too)"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens per agent turn"})
    temperature: float = field(default=1.0, metadata={"help": "agent temperature in GRPO rollouts"})
    credit_weight: float = field(default=0.0, metadata={"help": "weight of the partial-credit reward beside goal success (weight 1)"})
    system: str | None = None
    user_first: bool = False
    seed: int = 0
    lora_rank: int = field(default=0, metadata={"help": "LoRA adapters of this rank (peft, merged into the saved agent); 0: full fine-tuning"})
    reporting: Reporting = Reporting()

    def __post_init__(self) -> None:
        if self.lora_rank < 0:
            raise ValueError(f"lora_rank must be >= 0 (0: full fine-tuning); got {self.lora_rank}")
        if min(self.steps, self.batch, self.max_turns, self.max_new_tokens) < 1 or self.num_generations < 2:
            raise ValueError(f"need steps, batch, max_turns, max_new_tokens >= 1 and num_generations >= 2; got {self}")
        if self.batch % self.num_generations:
            raise ValueError(f"batch ({self.batch}) must be a multiple of num_generations ({self.num_generations})")
        if self.credit_weight < 0:
            raise ValueError(f"credit_weight must be >= 0; got {self.credit_weight}")
        if self.lr <= 0 or self.beta < 0 or self.temperature <= 0:
            raise ValueError(f"need lr > 0, beta >= 0, temperature > 0; got {self.lr}, {self.beta}, {self.temperature}")


def agent_system(folder: str | Path | None) -> str | None:
    """The system prompt an agent saved by shiftbounds was trained with (``None``: not recorded, or
    not a shiftbounds folder)."""
    if folder is None or not (Path(folder) / "shiftbounds.json").is_file():
        return None
    meta = read_metadata(folder)
    return meta.get("system") or (meta.get("config") or {}).get("system")


def resolve_system(system: str | None, agent: str | Path | None) -> str:
    """The system prompt to use with ``agent``: the one given, else the agent's own
    (:func:`agent_system`), else :data:`SYSTEM`. A given prompt that differs from the agent's own
    warns: an agent met with another prompt than it was trained with is not the same agent."""
    own = agent_system(agent)
    if system is None:
        return own or SYSTEM
    if own is not None and system != own:
        warnings.warn(f"the agent in {agent} was trained with the system prompt {own!r}; using {system!r} instead",
                      UserWarning, stacklevel=3)
    return system


def grpo_config(cfg: ParadigmConfig, output_dir: str | Path):
    """The ``trl.GRPOConfig`` every paradigm trains with."""
    return GRPOConfig(output_dir=str(output_dir), max_steps=cfg.steps, per_device_train_batch_size=cfg.batch,
                      num_generations=cfg.num_generations, learning_rate=cfg.lr, beta=cfg.beta,
                      reward_weights=[1.0, cfg.credit_weight] if cfg.credit_weight > 0 else None,
                      max_completion_length=cfg.max_new_tokens, temperature=cfg.temperature, seed=cfg.seed,
                      data_seed=cfg.seed, logging_steps=1, **cfg.reporting.trainer_args(), bf16=False, fp16=False,
                      disable_tqdm=True, dataloader_num_workers=0, use_cpu=resolve_device().type == "cpu",
                      gradient_checkpointing=False)


def lora_config(rank: int):
    """The ``peft.LoraConfig`` of :attr:`ParadigmConfig.lora_rank` (``None`` for 0: full fine-tuning):
    rank ``r`` on every linear layer, ``lora_alpha = 2 r``, no dropout."""
    if rank == 0:
        return None
    try:
        from peft import LoraConfig  # optional: the lora extra
    except ImportError as e:
        raise ImportError(f"lora_rank {rank} needs peft: pip install -e '.[lora]'") from e
    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")


def paradigm_trainer(paradigm: str, agent: str | Path, convs: ConversationData, judge: Judge, cfg: ParadigmConfig,
                     output_dir: str | Path, simulator_factory: Callable[[], UserSimulator] | None = None,
                     credit: Judge | None = None):
    """The configured ``trl.GRPOTrainer`` (not yet trained) of one paradigm.

    Args:
        paradigm: one of :data:`PARADIGMS`.
        agent: the starting agent, a model folder or Hub id (TRL rebuilds the reference from it).
        convs: the logs (static: their histories; interactive: their goals).
        judge: ``judge(goal, messages) -> float``.
        simulator_factory: a fresh user simulator (interactive and calibrated paradigms).
        credit: a partial-credit judge, paid with weight ``cfg.credit_weight`` beside ``judge``.
    """
    convs = as_conversations(convs)

    if paradigm not in PARADIGMS:
        raise ValueError(f"paradigm must be one of {PARADIGMS}; got {paradigm!r}")
    if cfg.credit_weight > 0 and credit is None:
        raise ValueError(f"credit_weight {cfg.credit_weight} > 0 needs a credit judge")
    shaped = cfg.credit_weight > 0
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    _, tok = load_chat_model(agent)
    args = grpo_config(cfg, output_dir)
    system = resolve_system(cfg.system, agent)
    if paradigm == "static":
        ds, goals = static_context_dataset(convs, system)
        funcs = [static_reward_func(goals, judge)] + ([static_reward_func(goals, credit, "static_credit_reward")] if shaped else [])
        return trainer_counts_positions_from_mask(attach_progress(GRPOTrainer(
            model=str(agent), reward_funcs=funcs, args=args, train_dataset=ds, processing_class=tok,
            peft_config=lora_config(cfg.lora_rank)), paradigm), "model", "ref_model")
    if simulator_factory is None:
        raise ValueError(f"the {paradigm} paradigm needs a simulator_factory")
    goals = {c.id: c.goal for c in convs}
    rollout = make_rollout_func(goals, simulator_factory, judge, max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens,
                                temperature=cfg.temperature, seed=cfg.seed, user_first=cfg.user_first,
                                credit=credit if shaped else None)
    ds = Dataset.from_list([{"prompt": agent_prompt(system, c.id)} for c in convs])
    funcs = [judge_reward_func] + ([credit_reward_func] if shaped else [])
    return trainer_counts_positions_from_mask(attach_progress(GRPOTrainer(
        model=str(agent), reward_funcs=funcs, args=args, train_dataset=ds, processing_class=tok, rollout_func=rollout,
        peft_config=lora_config(cfg.lora_rank)), paradigm), "model", "ref_model")


def _fingerprint(model: PreTrainedModel) -> list[tuple[float, float]]:
    """Per parameter tensor, its sum and sum of squares in float64: two numbers that any update
    to the tensor moves (almost surely), without a second copy of the weights in memory."""
    with torch.no_grad():
        return [(float(p.double().sum()), float(p.double().square().sum())) for p in model.parameters()]


def training_signal(log_history: Sequence[dict], moved: bool) -> dict:
    """What a GRPO run learned from, from TRL's per-step logs: ``zero_variance_steps`` (steps whose
    every group had the same reward for all its generations: advantage 0, no policy gradient),
    ``steps`` logged, whether the weights ``moved``, and ``no_op`` — every step without reward
    variance, or weights that did not move."""
    zero = [h["frac_reward_zero_std"] for h in log_history if "frac_reward_zero_std" in h]
    n_zero = sum(1 for f in zero if f >= 1.0)
    return {"steps": len(zero), "zero_variance_steps": n_zero, "weights_moved": bool(moved),
            "no_op": (bool(zero) and n_zero == len(zero)) or not moved}


def signal_warning(signal: Mapping[str, Any], run: str, out_dir: str | Path) -> str | None:
    """What a run with :func:`training_signal` ``signal`` should warn, or ``None``: that it learned
    nothing (every step without reward variance, or weights that did not move), or that half its
    steps or more had no reward variance (it learned from the rest only)."""
    zero, steps = signal["zero_variance_steps"], signal["steps"]
    if signal["no_op"]:
        return (f"{run} learned nothing: {zero} of {steps} steps had no reward variance in any group; weights moved: "
                f"{signal['weights_moved']}. The agent saved to {out_dir} is the starting agent (check the simulator's and "
                "the judge's rewards)")
    if steps and 2 * zero >= steps:
        return (f"{run}: {zero} of {steps} steps had no reward variance in any group (no policy gradient there); the agent "
                "learned from the rest only. Larger groups (num_generations), a higher temperature or a partial-credit "
                "reward give more steps a signal")
    return None


Checkpoint = Callable[[Any, Any], Mapping[str, Sequence[float]]]
"""``checkpoint(model, tokenizer) -> {name: outcomes}``: what a training curve measures at a
checkpoint, per measure (e.g. each evaluation user) one outcome per evaluation unit (e.g. each
goal's success of the greedy agent)."""


def attach_curve(trainer, checkpoint: Checkpoint, every: int) -> dict[str, Any]:
    """Measure ``checkpoint`` on the trainer's model before the first step and after every
    ``every``-th step and the last; returns the curve it fills, ``{"steps": [...], "outcomes":
    {name: [[...], ...]}}`` (per measure, one row per checkpoint). The model is measured in eval mode
    and handed back in the mode it was in; a ``checkpoint`` that draws only from its own generators
    leaves the training run unchanged."""
    if every < 1:
        raise ValueError(f"a training curve needs every >= 1 steps; got {every}")
    curve: dict[str, Any] = {"steps": [], "outcomes": {}}

    def measure(step: int) -> None:
        model = trainer.model
        mode = model.training
        model.eval()
        try:
            for name, values in checkpoint(model, trainer.processing_class).items():
                curve["outcomes"].setdefault(name, []).append([float(v) for v in values])
        finally:
            model.train(mode)
        curve["steps"].append(step)

    class _CurveCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            measure(state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % every == 0 or state.global_step == state.max_steps:
                measure(state.global_step)

    trainer.add_callback(_CurveCallback())
    return curve


def train_paradigm(paradigm: str, agent: str | Path, convs: ConversationData, judge: Judge, cfg: ParadigmConfig,
                   out_dir: str | Path, simulator_factory: Callable[[], UserSimulator] | None = None,
                   credit: Judge | None = None, checkpoint: Checkpoint | None = None, curve_every: int = 0,
                   resume: bool = False) -> Path:
    """Train one paradigm (:func:`paradigm_trainer`) and save the agent to ``out_dir`` (model,
    tokenizer, ``shiftbounds.json`` with the reward per step, the judge's own reward per step
    (``success``: the goal success when a partial credit is paid beside it) and :func:`training_signal`); returns
    ``out_dir``. A run that learned nothing — no group with reward variance at any step, or weights
    that did not move — warns (``RuntimeWarning``) and says so in ``shiftbounds.json``
    (``training_signal.no_op``). With a ``checkpoint`` and ``curve_every`` >= 1, also the curve
    :func:`attach_curve` measures (``curve`` in ``shiftbounds.json``). ``resume``: continue from the
    last checkpoint in ``cfg.reporting.checkpoint_dir`` (saved with ``save_strategy="steps"``) to the
    same agent as an uninterrupted run (the rollouts' draws are keyed by the step)."""
    convs = as_conversations(convs)
    if checkpoint is not None and curve_every < 1:
        raise ValueError(f"a checkpoint measure needs curve_every >= 1; got {curve_every}")
    last = last_checkpoint(cfg.reporting.checkpoint_dir) if resume else None
    with tempfile.TemporaryDirectory() as tmp:
        trainer = paradigm_trainer(paradigm, agent, convs, judge, cfg, cfg.reporting.checkpoint_dir or tmp, simulator_factory, credit)
        curve = attach_curve(trainer, checkpoint, curve_every) if checkpoint is not None else None
        before = _fingerprint(trainer.model)
        trainer.train(resume_from_checkpoint=str(last) if last is not None else None)
    log = trainer.state.log_history
    judged = f"rewards/{trainer.reward_func_names[0]}/mean"
    signal = training_signal(log, _fingerprint(trainer.model) != before)
    if (message := signal_warning(signal, f"{paradigm} RL from {agent}", out_dir)) is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    meta = {"kind": "agent", "paradigm": paradigm, "base": str(agent), "system": cfg.system if cfg.system is not None else agent_system(agent) or SYSTEM,
            "n_conversations": len(convs),
            "reward": [float(h["reward"]) for h in log if "reward" in h],
            "success": [float(h[judged]) for h in log if judged in h],
            "loss": [float(h["loss"]) for h in log if "loss" in h], "training_signal": signal, "config": asdict(cfg),
            "trl": trl.__version__, **({"curve": curve} if curve is not None else {})}
    if trainer.accelerator.is_main_process:  # LoRA adapters merged: the saved agent is an ordinary model folder
        model = trainer.model.merge_and_unload() if cfg.lora_rank else trainer.model
        save_chat_model(model, trainer.processing_class, out_dir, meta)
    trainer.accelerator.wait_for_everyone()
    return Path(out_dir)


def last_checkpoint(folder: str | Path) -> Path:
    """The newest ``checkpoint-<step>`` folder a trainer saved in ``folder``.

    Raises:
        ValueError: ``folder`` is empty (no checkpointing configured) or holds no checkpoint.
    """
    if not folder:
        raise ValueError("resuming needs a checkpoint folder: train with checkpoints saved (save_strategy 'steps')")
    found = sorted(Path(folder).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1)
    if not found:
        raise ValueError(f"nothing to resume: {folder} holds no checkpoint-<step> folder")
    return found[-1]


def evaluate_agent(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, convs: ConversationData, simulator_factory: Callable[[], UserSimulator],
                   judge: Judge, *, max_turns: int, max_new_tokens: int, temperature: float = 1.0, system: str | None = None,
                   user_first: bool = False, batch: int = 32, seed: int = 0, return_transcripts: bool = False) -> dict:
    """The judge's mean reward over one dialogue per conversation goal against fresh simulators from
    ``simulator_factory``, with a 95 % interval. Each dialogue's draws come from (``seed``,
    conversation id), so two agents meet the same simulator draws; ``rewards`` lists the
    per-dialogue rewards in ``convs`` order (for paired comparisons); ``temperature`` 0 decodes the
    agent greedily. ``system=None`` uses the prompt the agent was trained with, read from the
    folder it was loaded from (:func:`resolve_system`; another one passed explicitly warns).
    ``return_transcripts``: also ``transcripts``, one record per dialogue in the format of the logs
    (``id``, ``goal``, ``messages`` with the system prompt first, and its ``reward``), ready for
    :func:`~shiftbounds.conversations.records.write_conversations` or reading."""
    convs = as_conversations(convs)
    system = resolve_system(system, getattr(model, "name_or_path", None))
    rewards, transcripts = [], []
    for j in range(0, len(convs), batch):
        chunk = convs[j: j + batch]
        outs = rollout_dialogues(model, tokenizer, [agent_prompt(system, c.id) for c in chunk], [c.goal for c in chunk],
                                 [simulator_factory() for _ in chunk], judge, max_turns=max_turns,
                                 max_new_tokens=max_new_tokens, temperature=temperature,
                                 seeds=[derive_seed(seed, c.id) for c in chunk], user_first=user_first)
        rewards += [o["judge_reward"] for o in outs]
        if return_transcripts:
            transcripts += [{"id": c.id, "goal": c.goal, "messages": [{"role": "system", "content": system}] + o["messages"],
                             "reward": o["judge_reward"]} for c, o in zip(chunk, outs)]
    e = mean_ci(np.array(rewards))
    out = {"mean": e.value, "low": e.low, "high": e.high, "n": len(rewards), "rewards": rewards}
    return out | {"transcripts": transcripts} if return_transcripts else out


def read_metadata(folder: str | Path) -> dict[str, Any]:
    """The ``shiftbounds.json`` of a saved simulator or agent."""
    path = Path(folder) / "shiftbounds.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no shiftbounds.json: not a folder saved by shiftbounds")
    return json.loads(path.read_text())
