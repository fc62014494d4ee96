"""Calibrating a user simulator to logged conversations with TRL's ``SFTTrainer``.

Every user turn of the logs becomes one prompt-completion example in the simulator's view
(:func:`~shiftbounds.conversations.simulators.simulator_view`): the prompt is the persona with
the goal and the dialogue before that turn with roles flipped, the completion the person's turn.
TRL's completion-only loss then trains on the user's tokens only (never the agent's, never the
prompt). The result is saved with ``save_pretrained`` (model and tokenizer) plus
``shiftbounds.json`` (kind, persona, base model, data and training settings), and loads back as a
simulator with :meth:`~shiftbounds.conversations.simulators.LMUser.from_pretrained`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shiftbounds.conversations.records import Conversation
from shiftbounds.conversations.simulators import PERSONA, simulator_view


@dataclass(frozen=True)
class CalibrationConfig:
    """SFT of a user simulator: ``steps`` optimiser steps of ``batch`` user turns at ``lr``."""

    steps: int = 200
    batch: int = 8
    lr: float = 5e-4
    max_length: int = 512
    persona: str = PERSONA
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch < 1 or self.lr <= 0 or self.max_length < 8:
            raise ValueError(f"calibration needs steps >= 1, batch >= 1, lr > 0, max_length >= 8; got {self}")
        if "{goal}" not in self.persona:
            raise ValueError(f"persona must contain '{{goal}}'; got {self.persona!r}")


def user_turn_examples(convs: Sequence[Conversation], persona: str = PERSONA) -> list[dict[str, Any]]:
    """One ``{"prompt": [...], "completion": [...]}`` example (TRL's conversational prompt-completion
    format) per user turn of ``convs``, in the simulator's view."""
    out = []
    for c in convs:
        msgs = [m.as_dict() for m in c.messages]
        for j in c.turns("user"):
            out.append({"prompt": simulator_view(msgs[:j], c.goal, persona),
                        "completion": [{"role": "assistant", "content": msgs[j]["content"]}]})
    if not out:
        raise ValueError("the conversations hold no user turn to calibrate on")
    return out


def sft_trainer(convs: Sequence[Conversation], model, tokenizer, cfg: CalibrationConfig, output_dir: str | Path):
    """The configured ``trl.SFTTrainer`` (not yet trained) on the user turns of ``convs``."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=str(output_dir), max_steps=cfg.steps, per_device_train_batch_size=cfg.batch,
                     learning_rate=cfg.lr, max_length=cfg.max_length, completion_only_loss=True, seed=cfg.seed,
                     data_seed=cfg.seed, save_strategy="no", report_to=[], logging_steps=max(cfg.steps // 10, 1),
                     disable_tqdm=True, bf16=False, fp16=False, dataloader_num_workers=0)
    return SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(user_turn_examples(convs, cfg.persona)),
                      processing_class=tokenizer)


def calibrate(convs: Sequence[Conversation], base: str | Path, out_dir: str | Path, cfg: CalibrationConfig = CalibrationConfig()) -> Path:
    """SFT the model ``base`` (a Hub id or folder) into a calibrated simulator saved at ``out_dir``."""
    import trl

    from shiftbounds.conversations.models import load_chat_model, save_chat_model

    model, tok = load_chat_model(base)
    model.train()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = sft_trainer(convs, model, tok, cfg, tmp)
        result = trainer.train()
    meta = {"kind": "calibrated", "persona": cfg.persona, "base": str(base), "n_conversations": len(convs),
            "n_user_turns": len(trainer.train_dataset), "training_loss": float(result.training_loss),
            "config": asdict(cfg), "trl": trl.__version__}
    if trainer.accelerator.is_main_process:
        save_chat_model(model, tok, out_dir, meta)
    trainer.accelerator.wait_for_everyone()
    return Path(out_dir)
