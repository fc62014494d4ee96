"""Chat models for simulators and agents: load any causal LM (a Hub id or a local folder) with its
tokenizer and chat template, or build a tiny one offline (tests, CPU examples).

A tiny model gets a byte-level BPE tokenizer trained on the given texts with the :data:`ROLE_MARKERS`
as special tokens and :data:`CHAT_TEMPLATE`, a GPT-2 of the given size from a config, and is saved
with ``save_pretrained`` so that every stage loads it like any other model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from shiftbounds.utils.io import atomic_write_text
from shiftbounds.utils.seeding import torch_init_seed

ROLE_MARKERS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|end|>{% endgeneration %}"
    "{% else %}{{ m['content'] }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""The chat template of tiny models: ``<|role|>content<|end|>`` per message; ``<|end|>`` is the EOS.
The assistant's content and its ``<|end|>`` sit in ``{% generation %}`` markers, so TRL's
``assistant_only_loss=True`` (``return_assistant_tokens_mask``) trains on the assistant's tokens only."""
METADATA = "shiftbounds.json"
"""The file a saved simulator or agent folder carries: kind, persona or paradigm, base, settings."""


CHATML_MARKERS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
"""The special tokens of a tiny model with a ChatML (Qwen-style) template: start, end (EOS), pad."""


def build_tiny_chat_model(folder: str | Path, texts: Iterable[str], *, vocab_size: int = 512, d_model: int = 64,
                          n_layer: int = 2, n_head: int = 4, max_len: int = 512, seed: int = 0,
                          chat_template: str | None = None) -> Path:
    """Train a byte-level BPE tokenizer on ``texts``, build a GPT-2 of this size with random weights
    (from ``seed``), save both (with :data:`CHAT_TEMPLATE`) to ``folder`` and return it. With a
    ``chat_template`` of the ChatML family (``<|im_start|>role ... <|im_end|>``, e.g. one that renders
    tool calls, :func:`~shiftbounds.conversations.environment.tool_calling_chat_template`), the
    tokenizer's special tokens are :data:`CHATML_MARKERS` and that template is saved instead."""
    markers = list(ROLE_MARKERS) if chat_template is None else list(CHATML_MARKERS)
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=markers,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(texts), trainer)
    if chat_template is None:
        tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|end|>", pad_token="<|pad|>", bos_token="<|system|>",
                                      additional_special_tokens=["<|user|>", "<|assistant|>"])
        tok.chat_template = CHAT_TEMPLATE
    else:
        start, end, pad = CHATML_MARKERS
        tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=end, pad_token=pad, bos_token=start)
        tok.chat_template = chat_template
    cfg = GPT2Config(vocab_size=len(tok), n_positions=max_len, n_embd=d_model, n_layer=n_layer, n_head=n_head,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    with torch_init_seed(seed, "tiny_chat_model"):
        model = GPT2LMHeadModel(cfg)
    folder = Path(folder)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def save_chat_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path, metadata: dict) -> Path:
    """Save a simulator or an agent: ``save_pretrained`` model and tokenizer, and ``metadata`` as
    ``shiftbounds.json`` (written last: a folder with it is complete)."""
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    atomic_write_text(folder / METADATA, json.dumps(metadata, indent=2) + "\n")
    return folder


def chat_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict], generation_prompt: bool) -> list[int]:
    """Token ids of ``messages`` rendered by the tokenizer's chat template (with the assistant's
    generation prompt when ``generation_prompt``)."""
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False))


_SENTINEL = "\x00reply\x00"


def user_turn_prefix(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> str:
    """The text of ``messages`` rendered by the tokenizer's chat template, followed by an opened
    ``user`` turn (whatever the template writes before a user message's content): what a model reads
    before it speaks *as the user*. Found by rendering a user message with a sentinel and cutting at
    it, so any template works."""
    text = tokenizer.apply_chat_template(messages + [{"role": "user", "content": _SENTINEL}], tokenize=False)
    if text.count(_SENTINEL) != 1:
        raise ValueError("the chat template does not render a user message's content verbatim; a user-role view needs one that does")
    return text[: text.index(_SENTINEL)]


def user_turn_text(tokenizer: PreTrainedTokenizerBase, messages: list[dict], content: str) -> tuple[str, str]:
    """``(prefix, turn)``: :func:`user_turn_prefix` of ``messages`` and the text the template writes
    for a user message ``content`` after it (the content and its end marker)."""
    prefix = user_turn_prefix(tokenizer, messages)
    full = tokenizer.apply_chat_template(messages + [{"role": "user", "content": content}], tokenize=False)
    if not full.startswith(prefix):
        raise ValueError("the chat template does not render a conversation's prefix as a prefix of the whole")
    return prefix, full[len(prefix):]


def text_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Token ids of template-rendered ``text`` (its markers as special tokens; nothing added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def model_positions(model: PreTrainedModel) -> int | None:
    """How many positions the model can read (``max_position_embeddings`` or ``n_positions`` of its
    config); ``None`` when the config states no limit."""
    cfg = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions"):
        n = getattr(cfg, key, None)
        if isinstance(n, int) and n > 0:
            return n
    return None


def count_positions_from_mask(model: PreTrainedModel):
    """Make ``model``'s forward count each row's positions from its attention mask when it is called
    with a mask and no ``position_ids`` (a forward pre-hook; idempotent; returns ``model``).

    TRL's ``GRPOTrainer`` left-pads prompts and scores completions with ``model(input_ids,
    attention_mask)`` alone; ``transformers`` then numbers positions from the first column, pads
    included. A model with learned absolute positions (GPT-2) scores a left-padded row as if it sat
    further right: its log-probabilities, hence the policy gradient and the KL, are those of another
    sequence. Counting from the mask gives every row the positions it had when it was sampled
    (``generate`` and :func:`~shiftbounds.conversations.sampling.sample_batch` do); for rotary models
    it changes nothing (a common shift of every position cancels)."""
    if getattr(model, "_positions_from_mask", False):
        return model

    def hook(module, args, kwargs):
        mask, ids = kwargs.get("attention_mask"), kwargs.get("input_ids", args[0] if args else None)
        if kwargs.get("position_ids") is not None or mask is None or ids is None or mask.dim() != 2:
            return None
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)[:, -ids.shape[1]:]
        return args, {**kwargs, "position_ids": positions}

    model.register_forward_pre_hook(hook, with_kwargs=True)
    model._positions_from_mask = True
    return model


def trainer_counts_positions_from_mask(trainer, *names: str):
    """``trainer`` with each of its models named in ``names`` (e.g. ``"model"``, ``"ref_model"``;
    absent or ``None`` ones skipped) passed through :func:`count_positions_from_mask`: TRL's GRPO and
    distillation trainers left-pad prompts."""
    for name in names:
        if (model := getattr(trainer, name, None)) is not None:
            count_positions_from_mask(model)
    return trainer


def load_chat_model(name_or_path: str | Path, *, device: str | torch.device = "cpu"):
    """``(model, tokenizer)`` from a Hub id or a local folder (``from_pretrained``); the tokenizer
    must carry a chat template, and gets a pad token (its EOS) when it has none.

    Raises:
        ValueError: naming the model when its tokenizer has no chat template.
    """
    tok = AutoTokenizer.from_pretrained(str(name_or_path))
    if not tok.chat_template:
        raise ValueError(f"the tokenizer of {name_or_path} has no chat template; set tokenizer.chat_template and save it")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=torch.float32).to(device)
    return model.eval(), tok


def check_model_source(spec: str | Path, option: str) -> str:
    """``spec`` when it can name a model: a local folder holding a ``transformers`` model's
    ``config.json``, or a Hub id (``owner/name``, not found locally). Anything else, a mistyped
    folder above all, is a ``ValueError`` naming ``option`` at once, before any download is tried.

    Raises:
        ValueError: ``spec`` is an existing path that is no model folder, or a missing path that
            cannot be a Hub id (no ``owner/name`` form, or its parent folder exists here).
    """
    text = str(spec)
    path = Path(text).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(f"{option} {text!r} is no model folder: it holds no config.json")
        return text
    parts = text.split("/")
    hub_like = len(parts) == 2 and all(parts) and not text.startswith((".", "~")) and not path.parent.is_dir()
    if not hub_like:
        raise ValueError(f"{option} {text!r}: no such model folder (a Hub id has the form owner/name)")
    return text


def check_model_folder(path: str, option: str) -> None:
    """Raise ``ValueError`` naming ``option`` unless ``path`` is empty (a tiny model from a config)
    or a folder holding a ``transformers`` model's ``config.json``."""
    if path and not (Path(path) / "config.json").exists():
        raise ValueError(f"{option} must be a local model folder holding config.json (or empty for a tiny model); got {path!r}")
