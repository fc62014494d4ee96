"""Device-memory arithmetic for the transformers runs: an estimate from the models' shapes, made
before any weights are loaded (``--estimate-only`` on ``experiments.real_dialogue`` and
``experiments.gsm8k_distill``), not a measurement.

A run is a sequence of :class:`Stage` s; each holds some models resident and trains at most one.
Per stage, in bytes, for one process:

* weights: 4 per parameter of every resident model (float32 everywhere, see
  :mod:`shiftbounds.conversations.models`); exact;
* gradients and AdamW's two moments of the trained model: 12 per parameter; exact;
* logits of one training step: about 14 bytes per (token, vocabulary entry) — bf16 logits (2), the
  float32 copy the losses take (4), its log-softmax kept for the backward pass (4), and that
  gradient (4); an approximation from the code of the losses;
* activations of one training step: with gradient checkpointing, each block's float32 input
  (``4 d`` per token and block) plus one block recomputed in full; without it every block in full,
  taken as ``34 d`` bytes per token and block (Korthikanti et al. 2022, 16-bit activations, with
  attention that does not store the score matrix, as PyTorch's SDPA does not); an approximation;
* key-value cache of one generation batch: ``2 (keys and values) x 2 (bf16) x layers x kv_dim`` per
  token of context; exact for the cache itself.

A training step and a generation batch never overlap (rollouts finish before the loss), so a
stage's peak is its resident weights and optimiser state plus the larger of the two. Allocator
fragmentation, the CUDA context (about 0.5 GiB) and ``transformers``' workspaces are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

GIB = 2**30


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a causal LM: parameters, blocks, width, key-value width
    (``num_key_value_heads x head_dim``) and vocabulary size."""

    n_params: int
    n_layer: int
    d_model: int
    kv_dim: int
    vocab: int


def model_shape(config) -> ModelShape:
    """The shape of a ``transformers`` config, or of a local model folder's ``config.json``;
    parameters are counted on the meta device (no memory is allocated, no weights read)."""
    if isinstance(config, (str, Path)):
        if not (Path(config) / "config.json").exists():
            raise ValueError(f"{config} holds no transformers model (no config.json)")
        config = AutoConfig.from_pretrained(config, local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return ModelShape(sum(p.numel() for p in model.parameters()), config.num_hidden_layers, config.hidden_size,
                      kv_heads * head_dim, config.vocab_size)


@dataclass(frozen=True)
class Stage:
    """One stage of a run: ``frozen`` models resident, ``trained`` (or ``None``) with a training
    step of ``train_batch`` sequences of ``train_len`` tokens, and a generation batch of
    ``gen_batch`` contexts of ``gen_len`` tokens on the ``gen`` model."""

    name: str
    frozen: tuple[ModelShape, ...] = ()
    trained: ModelShape | None = None
    train_batch: int = 0
    train_len: int = 0
    gen: ModelShape | None = None
    gen_batch: int = 0
    gen_len: int = 0
    checkpointing: bool = False

    def __post_init__(self) -> None:
        for k in ("train_batch", "train_len", "gen_batch", "gen_len"):
            if getattr(self, k) < 0:
                raise ValueError(f"{k} must be >= 0; got {getattr(self, k)}")


def stage_bytes(stage: Stage) -> dict[str, int]:
    """Bytes per part of ``stage`` (see the module docstring) and ``"peak"``."""
    models = stage.frozen + ((stage.trained,) if stage.trained else ())
    parts = {"weights": 4 * sum(m.n_params for m in models)}
    train = gen = 0
    if stage.trained:
        m, tokens = stage.trained, stage.train_batch * stage.train_len
        parts["gradients + AdamW moments"] = 12 * m.n_params
        parts["logits of a training step"] = 14 * tokens * m.vocab
        per_token = 4 * m.n_layer * m.d_model + 34 * m.d_model if stage.checkpointing else 34 * m.n_layer * m.d_model
        parts["activations of a training step"] = per_token * tokens
        train = parts["logits of a training step"] + parts["activations of a training step"]
    if stage.gen:
        gen = parts["key-value cache"] = 4 * stage.gen.n_layer * stage.gen.kv_dim * stage.gen_batch * stage.gen_len
    parts["peak"] = parts["weights"] + parts.get("gradients + AdamW moments", 0) + max(train, gen)
    return parts


def estimate(stages: list[Stage]) -> dict:
    """GiB per part of every stage, and the run's peak (the largest stage peak)."""
    if not stages:
        raise ValueError("estimate needs at least one stage")
    per = {s.name: {k: v / GIB for k, v in stage_bytes(s).items()} for s in stages}
    top = max(per, key=lambda k: per[k]["peak"])
    return {"stages": per, "peak_gib": per[top]["peak"], "peak_stage": top,
            "note": "estimate from the models' shapes (shiftbounds.utils.memory), not a measurement"}


def format_estimate(est: dict) -> str:
    """A Markdown table of an :func:`estimate` (GiB, one row a stage)."""
    cols = ["weights", "gradients + AdamW moments", "logits of a training step", "activations of a training step",
            "key-value cache", "peak"]
    lines = ["| stage | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, parts in est["stages"].items():
        lines.append(f"| {name} | " + " | ".join(f"{parts[c]:.1f}" if c in parts else "" for c in cols) + " |")
    return "\n".join(lines) + f"\n\nPeak: {est['peak_gib']:.1f} GiB ({est['peak_stage']}); {est['note']}.\n"
