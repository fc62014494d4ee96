"""The SFT stages on TRL's ``SFTTrainer``: calibrating a user simulator, the SFT agent, pretraining.

Every user turn of the logs becomes one prompt-completion example in the simulator's view
(:func:`~shiftbounds.conversations.simulators.simulator_view`): the prompt is the persona with
the goal and the dialogue before that turn with roles flipped, the completion the person's turn.
TRL's completion-only loss then trains on the user's tokens only (never the agent's, never the
prompt). The result is saved with ``save_pretrained`` (model and tokenizer) plus
``shiftbounds.json`` (kind, persona, base model, data and training settings), and loads back as a
simulator with :meth:`~shiftbounds.conversations.simulators.LMUser.from_pretrained`. The SFT agent
(:func:`sft_agent`: agent turns, loss on the agent's tokens) and a base model made for a corpus
(:func:`pretrain`: whole conversations, every token; optionally each goal-carrying conversation a
second time, led by its user's goal, so that the base model learns how a goal shapes what a person
says) go through the same trainer.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import trl
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig, SFTTrainer

from shiftbounds.conversations.models import chat_ids, load_chat_model, save_chat_model, text_ids, user_turn_text
from shiftbounds.conversations.records import ConversationData, as_conversations
from shiftbounds.conversations.rollouts import agent_prompt
from shiftbounds.conversations.simulators import PERSONA, VIEWS, goal_text, simulator_view
from shiftbounds.utils.progress import attach_progress

GOAL_HEADER = "The user's goal: {goal}."
"""The system message that leads a goal-annotated pretraining conversation (:func:`dialogue_examples`);
``{goal}`` is replaced by :func:`~shiftbounds.conversations.simulators.goal_text`. Its wording and its
roles (the user speaks as ``user``) differ from the simulator's persona prompt, so the base model
with a persona prompt stays a *prompted* simulator, not one trained on its own view of the logs."""


@dataclass(frozen=True)
class Reporting:
    """What a TRL trainer reports and keeps, passed through to its config (TRL's names):
    ``report_to`` (e.g. ``("tensorboard",)``; empty: nothing; transformers 5 reads TensorBoard's
    folder from ``TENSORBOARD_LOGGING_DIR``), ``save_strategy`` (``"no"``, ``"steps"`` or
    ``"epoch"``) every ``save_steps``, into ``checkpoint_dir`` (required when saving; else the
    trainer works in a temporary folder); ``logging_dir``: TensorBoard's folder (exported as
    ``TENSORBOARD_LOGGING_DIR``, the variable transformers 5 reads; empty: its default)."""

    report_to: tuple[str, ...] = ()
    save_strategy: str = "no"
    save_steps: int = 500
    checkpoint_dir: str = ""
    logging_dir: str = ""

    def __post_init__(self) -> None:
        if self.save_strategy not in ("no", "steps", "epoch") or self.save_steps < 1:
            raise ValueError(f"save_strategy must be no, steps or epoch and save_steps >= 1; got {self.save_strategy!r}, {self.save_steps}")
        if self.save_strategy != "no" and not self.checkpoint_dir:
            raise ValueError("saving checkpoints needs a checkpoint_dir (the trainer's output_dir)")

    def trainer_args(self) -> dict[str, Any]:
        """The keyword arguments of ``SFTConfig`` / ``GRPOConfig`` this carries (and, with a
        ``logging_dir``, ``TENSORBOARD_LOGGING_DIR`` set to it)."""
        if self.logging_dir:
            os.environ["TENSORBOARD_LOGGING_DIR"] = self.logging_dir
        return {"report_to": list(self.report_to), "save_strategy": self.save_strategy, "save_steps": self.save_steps}


@dataclass(frozen=True)
class TrainingConfig:
    """An SFT stage: ``steps`` optimiser steps of ``batch`` examples at ``lr``, sequences cut to
    ``max_length`` tokens, data order and initialisation from ``seed``."""

    steps: int = 200
    batch: int = 8
    lr: float = 5e-4
    max_length: int = 512
    seed: int = 0
    reporting: Reporting = Reporting()

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch < 1 or self.lr <= 0 or self.max_length < 8:
            raise ValueError(f"SFT needs steps >= 1, batch >= 1, lr > 0, max_length >= 8; got {self}")


RECIPES = ("turns", "conversation")
"""How a simulator is calibrated: ``turns`` — one prompt-completion example per user turn (the
history before it, then the turn); ``conversation`` — one example per conversation, roles flipped,
the loss on every user turn (TRL's ``assistant_only_loss``): every turn of a dialogue in one
sequence, so a step of ``batch`` examples sees ``batch`` whole conversations."""


@dataclass(frozen=True)
class CalibrationConfig(TrainingConfig):
    """SFT of a user simulator: :class:`TrainingConfig`, the ``persona`` prompt it is trained under,
    the ``view`` it reads the dialogue in (:data:`~shiftbounds.conversations.simulators.VIEWS`) and
    the ``recipe`` of its examples (:data:`RECIPES`)."""

    persona: str = PERSONA
    view: str = "flipped"
    recipe: str = "turns"

    def __post_init__(self) -> None:
        super().__post_init__()
        if "{goal}" not in self.persona:
            raise ValueError(f"persona must contain '{{goal}}'; got {self.persona!r}")
        if self.view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}; got {self.view!r}")
        if self.recipe not in RECIPES:
            raise ValueError(f"recipe must be one of {RECIPES}; got {self.recipe!r}")
        if self.recipe == "conversation" and self.view != "flipped":
            raise ValueError("the conversation recipe trains in the flipped view (the user's turns as the assistant's)")


def user_turn_examples(convs: ConversationData, persona: str = PERSONA, view: str = "flipped",
                       tokenizer=None) -> list[dict[str, Any]]:
    """One prompt-completion example per user turn of ``convs``, in the simulator's ``view``: TRL's
    conversational format (``{"prompt": [...], "completion": [...]}``, the user's turn as the
    assistant's) in the flipped view; in the ``as_user`` view the template-rendered text up to the
    opened user turn and the turn's text (TRL's standard format; needs the ``tokenizer``)."""
    if view == "as_user" and tokenizer is None:
        raise ValueError("the as_user view renders its examples with the chat template: pass the tokenizer")
    out = []
    for c in convs:
        msgs = [m.as_dict() for m in c.messages]
        for j in c.turns("user"):
            history = simulator_view(msgs[:j], c.goal, persona, view)
            if view == "flipped":
                out.append({"prompt": history, "completion": [{"role": "assistant", "content": msgs[j]["content"]}]})
            else:
                prefix, turn = user_turn_text(tokenizer, history, msgs[j]["content"])
                out.append({"prompt": prefix, "completion": turn})
    if not out:
        raise ValueError("the conversations hold no user turn to calibrate on")
    return out


def conversation_examples(convs: ConversationData, persona: str = PERSONA) -> list[dict[str, Any]]:
    """One ``{"messages": [...]}`` example per conversation with a user turn: the persona with the
    goal as system message, then the dialogue with roles flipped (the user's turns as the
    assistant's), for training with ``assistant_only_loss`` on every user turn at once."""
    out = []
    for c in convs:
        msgs = [m.as_dict() for m in c.messages]
        if any(m["role"] == "user" for m in msgs):
            out.append({"messages": simulator_view(msgs, c.goal, persona, "flipped")})
    if not out:
        raise ValueError("the conversations hold no user turn to calibrate on")
    return out


def agent_turn_examples(convs: ConversationData, system: str) -> list[dict[str, Any]]:
    """One prompt-completion example per agent turn of ``convs``: the agent's tagged system prompt
    (:func:`~shiftbounds.conversations.rollouts.agent_prompt`) and the history before the turn, then
    the turn; tool messages must first be folded into the agent's turns
    (:func:`~shiftbounds.conversations.records.fold_tool_calls`)."""
    out = []
    for c in convs:
        msgs = [m.as_dict() for m in c.messages]
        if any(m["role"] == "tool" for m in msgs):
            raise ValueError(f"conversation {c.id!r} has tool messages; fold them into the agent's turns first (fold_tool_calls)")
        for j in c.turns("assistant"):
            out.append({"prompt": agent_prompt(system, c.id) + msgs[:j], "completion": [msgs[j]]})
    if not out:
        raise ValueError("the conversations hold no agent turn to train on")
    return out


def dialogue_examples(convs: ConversationData, goal_header: str | None = None) -> list[dict[str, Any]]:
    """Whole conversations (every role, every token trained) for pretraining a base model; with
    ``goal_header`` (containing ``{goal}``), every conversation with a goal appears a second time led
    by a system message stating that goal."""
    if goal_header is not None and "{goal}" not in goal_header:
        raise ValueError(f"goal_header must contain '{{goal}}' where the goal goes; got {goal_header!r}")
    out = [{"messages": [m.as_dict() for m in c.messages]} for c in convs]
    if goal_header is not None:
        out += [{"messages": [{"role": "system", "content": goal_header.format(goal=goal_text(c.goal))},
                              *(m.as_dict() for m in c.messages)]} for c in convs if c.goal is not None]
    if any(m["role"] == "tool" for ex in out for m in ex["messages"]):
        raise ValueError("fold tool messages into the agent's turns before pretraining (fold_tool_calls)")
    return out


def sft_trainer(examples: list[dict[str, Any]], model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, cfg: TrainingConfig, output_dir: str | Path,
                label: str = "SFT", assistant_only: bool = False):
    """The configured ``trl.SFTTrainer`` (not yet trained): prompt-completion examples are trained on
    their completions only, ``messages`` examples on every token, or with ``assistant_only`` on the
    assistant's tokens only (the template's ``{% generation %}`` markers); progress lines are named
    ``label``."""
    args = SFTConfig(output_dir=str(output_dir), max_steps=cfg.steps, per_device_train_batch_size=cfg.batch,
                     learning_rate=cfg.lr, max_length=cfg.max_length, completion_only_loss=True,
                     **({"assistant_only_loss": True} if assistant_only else {}), seed=cfg.seed,
                     data_seed=cfg.seed, logging_steps=max(cfg.steps // 10, 1), **cfg.reporting.trainer_args(),
                     disable_tqdm=True, bf16=False, fp16=False, dataloader_num_workers=0, gradient_checkpointing=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(examples), processing_class=tokenizer)
    return attach_progress(trainer, label)


def warn_long_examples(examples: list[dict[str, Any]], tokenizer: PreTrainedTokenizerBase, max_length: int) -> int:
    """Warn (``UserWarning``) when examples are longer than ``max_length`` tokens, which the trainer
    cuts; returns how many are."""
    def n_tokens(ex: dict[str, Any]) -> int:
        if "messages" in ex:
            return len(chat_ids(tokenizer, ex["messages"], False))
        if isinstance(ex["prompt"], str):
            return len(text_ids(tokenizer, ex["prompt"] + ex["completion"]))
        return len(chat_ids(tokenizer, ex["prompt"] + ex["completion"], False))

    lengths = [n_tokens(ex) for ex in examples]
    long = sum(n > max_length for n in lengths)
    if long:
        warnings.warn(f"{long} of {len(examples)} training examples are longer than max_length={max_length} tokens "
                      f"(longest {max(lengths)}) and are cut; raise max_length or shorten them", UserWarning, stacklevel=3)
    return long


def train_sft(examples: list[dict[str, Any]], base: str | Path, out_dir: str | Path, cfg: TrainingConfig,
              metadata: dict[str, Any], assistant_only: bool = False) -> Path:
    """SFT the model ``base`` (a Hub id or folder) on ``examples`` and save it at ``out_dir`` with
    ``metadata`` (plus the training loss, settings and TRL version)."""
    model, tok = load_chat_model(base)
    warn_long_examples(examples, tok, cfg.max_length)
    model.train()
    label = {"calibrated": "calibrate", "agent": "SFT agent", "base": "pretrain"}.get(metadata.get("kind"), "SFT")
    with tempfile.TemporaryDirectory() as tmp:
        trainer = sft_trainer(examples, model, tok, cfg, cfg.reporting.checkpoint_dir or tmp, label, assistant_only)
        result = trainer.train()
    meta = {**metadata, "base": str(base), "n_examples": len(examples), "training_loss": float(result.training_loss),
            "config": asdict(cfg), "trl": trl.__version__}
    if trainer.accelerator.is_main_process:
        save_chat_model(model, tok, out_dir, meta)
    trainer.accelerator.wait_for_everyone()
    return Path(out_dir)


def calibrate(convs: ConversationData, base: str | Path, out_dir: str | Path, cfg: CalibrationConfig = CalibrationConfig()) -> Path:
    """SFT the model ``base`` (a Hub id or folder) into a calibrated simulator saved at ``out_dir``."""
    convs = as_conversations(convs)
    tokenizer = load_chat_model(base)[1] if cfg.view == "as_user" else None
    whole = cfg.recipe == "conversation"
    examples = conversation_examples(convs, cfg.persona) if whole else user_turn_examples(convs, cfg.persona, cfg.view, tokenizer)
    n_turns = sum(len(c.turns("user")) for c in convs)
    return train_sft(examples, base, out_dir, cfg, {"kind": "calibrated", "persona": cfg.persona, "view": cfg.view,
                                                    "recipe": cfg.recipe, "n_conversations": len(convs),
                                                    "n_user_turns": n_turns}, assistant_only=whole)


def sft_agent(convs: ConversationData, base: str | Path, out_dir: str | Path, cfg: TrainingConfig, system: str) -> Path:
    """SFT the model ``base`` on the agent turns of ``convs`` (the shared starting point of the
    paradigms), saved at ``out_dir`` as an agent folder."""
    convs = as_conversations(convs)
    examples = agent_turn_examples(convs, system)
    return train_sft(examples, base, out_dir, cfg, {"kind": "agent", "paradigm": "sft", "system": system,
                                                    "n_conversations": len(convs)})


def pretrain(convs: ConversationData, base: str | Path, out_dir: str | Path, cfg: TrainingConfig,
             goal_header: str | None = None) -> Path:
    """Language-model ``base`` on whole conversations (both roles; with ``goal_header``, also each
    goal-carrying conversation led by its goal, :func:`dialogue_examples`), saved at ``out_dir``: a
    base model made for the corpus, from which simulators and agents start."""
    convs = as_conversations(convs)
    examples = dialogue_examples(convs, goal_header)
    return train_sft(examples, base, out_dir, cfg, {"kind": "base", "n_conversations": len(convs),
                                                    "goal_header": goal_header})
