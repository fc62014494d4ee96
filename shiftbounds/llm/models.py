"""Causal LMs for the transformers path: load one from a local folder, or build a tiny one from a
config (random weights; no network at run time), with a tokenizer to match.

Device and dtype are decided in one place (:func:`resolve_device`): bf16 on a GPU, float32 on the
CPU. On a GPU the weights stay float32 (the optimiser's master copy) and the forward passes run in
bf16 under :func:`autocast`: stored in bf16, an AdamW update of ``lr = 1e-6`` on a weight of
``0.02`` is below half the format's spacing and would round away. A local folder must hold a model
(``config.json`` and weights); the error says so otherwise.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch

from shiftbounds.utils.seeding import torch_init_seed


class ByteTokenizer:
    """A byte-level tokenizer for models built from a config (no vocabulary file to download).

    Ids ``0..255`` are bytes; ``256`` is padding, ``257`` beginning of text, ``258`` end of text;
    ``259 + i`` are the extra special tokens given at construction (e.g. role markers).
    """

    def __init__(self, special_tokens: tuple[str, ...] = ()) -> None:
        self.pad_token_id, self.bos_token_id, self.eos_token_id = 256, 257, 258
        self.special = {tok: 259 + i for i, tok in enumerate(special_tokens)}
        self.inverse = {v: k for k, v in self.special.items()}

    @property
    def vocab_size(self) -> int:
        return 259 + len(self.special)

    def encode(self, text: str) -> list[int]:
        """Bytes of ``text``, with registered special tokens mapped to their own ids."""
        out: list[int] = []
        i = 0
        while i < len(text):
            for tok, idx in self.special.items():
                if text.startswith(tok, i):
                    out.append(idx)
                    i += len(tok)
                    break
            else:
                out.extend(text[i].encode("utf-8"))
                i += 1
        return out

    def decode(self, ids) -> str:
        """Text of ``ids`` (padding and beginning/end markers dropped; invalid bytes replaced)."""
        parts, buf = [], bytearray()
        for i in (int(x) for x in ids):
            if i < 256:
                buf.append(i)
            elif i in self.inverse:
                parts.append(buf.decode("utf-8", "replace") + self.inverse[i])
                buf = bytearray()
        parts.append(buf.decode("utf-8", "replace"))
        return "".join(parts)


@dataclass(frozen=True)
class TinyLM:
    """Shape of a model built from a config for tests and CPU runs.

    Attributes:
        family: ``"gpt2"`` or ``"llama"``.
        d_model, n_layer, n_head: width, depth, heads.
        max_len: positions.
    """

    family: str = "gpt2"
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4
    max_len: int = 512

    def __post_init__(self) -> None:
        if self.family not in ("gpt2", "llama"):
            raise ValueError(f"family must be 'gpt2' or 'llama'; got {self.family!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"n_head ({self.n_head}) must divide d_model ({self.d_model})")


def resolve_device(name: str = "auto") -> tuple[torch.device, torch.dtype]:
    """``(device, dtype)``: ``"auto"`` is CUDA with bf16 when a GPU is present, else CPU float32."""
    if name not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda; got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
    use_cuda = name == "cuda" or (name == "auto" and torch.cuda.is_available())
    return (torch.device("cuda"), torch.bfloat16) if use_cuda else (torch.device("cpu"), torch.float32)


def autocast(device: torch.device):
    """The context the models run in: bf16 autocast on a GPU (float32 weights, bf16 matrix
    products), nothing on the CPU. The experiments enter it once around a whole run."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=resolve_device("cuda")[1])
    return contextlib.nullcontext()


def check_model_folder(path: str, option: str) -> None:
    """Raise ``ValueError`` naming ``option`` unless ``path`` is empty (a tiny model from a config)
    or a folder holding a ``transformers`` model's ``config.json``."""
    if path and not (Path(path) / "config.json").exists():
        raise ValueError(f"{option} must be a local model folder holding config.json (or empty for a tiny model); got {path!r}")


def tiny_config(spec: TinyLM, vocab_size: int):
    """The ``transformers`` config of a tiny model of shape ``spec`` (GPT-2 or Llama family)."""
    from transformers import GPT2Config, LlamaConfig

    if spec.family == "gpt2":
        return GPT2Config(vocab_size=vocab_size, n_positions=spec.max_len, n_embd=spec.d_model, n_layer=spec.n_layer,
                          n_head=spec.n_head, bos_token_id=257, eos_token_id=258, pad_token_id=256,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout: RL needs one policy
    return LlamaConfig(vocab_size=vocab_size, hidden_size=spec.d_model, intermediate_size=4 * spec.d_model,
                       num_hidden_layers=spec.n_layer, num_attention_heads=spec.n_head,
                       num_key_value_heads=spec.n_head, max_position_embeddings=spec.max_len,
                       bos_token_id=257, eos_token_id=258, pad_token_id=256)


def build_tiny(spec: TinyLM, vocab_size: int, *, seed: int = 0):
    """A randomly initialised ``transformers`` causal LM of the given shape."""
    from transformers import AutoModelForCausalLM

    with torch_init_seed(seed, "tiny_lm"):  # layer initialisation, global generator untouched
        return AutoModelForCausalLM.from_config(tiny_config(spec, vocab_size))


def load_causal_lm(path: str | Path | None, spec: TinyLM | None = None, *, special_tokens: tuple[str, ...] = (),
                   device: str = "auto", gradient_checkpointing: bool = False, seed: int = 0):
    """``(model, tokenizer, device)``: from a local folder, or (``path=None``) a tiny model built
    from ``spec`` with a :class:`ByteTokenizer`. Special tokens are added to a pretrained tokenizer
    and the embeddings resized. Weights are float32 on every device; run the model under
    :func:`autocast` for bf16 compute on a GPU.

    Raises:
        ValueError: ``path`` is not a folder holding a ``transformers`` model.
    """
    dev, _ = resolve_device(device)
    if path is None:
        tok = ByteTokenizer(special_tokens)
        model = build_tiny(spec or TinyLM(), tok.vocab_size, seed=seed)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        p = Path(path)
        if not (p / "config.json").exists():
            raise ValueError(f"{p} holds no transformers model (no config.json); give a local model folder or omit the path")
        tok = AutoTokenizer.from_pretrained(p, local_files_only=True)
        if special_tokens:
            tok.add_special_tokens({"additional_special_tokens": list(special_tokens)})
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        model = AutoModelForCausalLM.from_pretrained(p, local_files_only=True, torch_dtype=torch.float32)
        if len(tok) > model.get_input_embeddings().num_embeddings:
            model.resize_token_embeddings(len(tok))
    if gradient_checkpointing:  # renamed activation_checkpointing_enable in transformers 5
        getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
    return model.to(device=dev, dtype=torch.float32), tok, dev


def forward_with_cache(model, input_ids: torch.Tensor, cache=None, *, last_only: bool = False, **inputs):
    """``(logits, cache)`` for ``input_ids`` after ``cache`` (further ``inputs`` such as
    ``attention_mask`` and ``position_ids`` are passed on): the key-value cache of ``transformers``
    (the keyword is ``cache`` from version 5 on, ``past_key_values`` before).

    ``last_only``: logits of the last position alone (``[B, 1, V]``), all a sampler reads. A prefill
    then never holds ``[B, T, V]`` logits (by arithmetic, 19.9 GB in bf16 for 64 prompts of 1,024
    tokens at a 151,936-entry vocabulary); a ``transformers`` without ``logits_to_keep`` returns every position.
    """
    keep = {"logits_to_keep": 1} if last_only else {}
    attempts = [("cache", keep), ("past_key_values", keep)] + ([("past_key_values", {})] if keep else [])
    for n, (name, extra) in enumerate(attempts):
        kw = {**inputs, **extra, "use_cache": True, **({name: cache} if cache is not None else {})}
        try:
            out = model(input_ids=input_ids, **kw)
            break
        except TypeError:
            if n == len(attempts) - 1:
                raise
    new_cache = out["cache"] if "cache" in out else out["past_key_values"]
    return out.logits, new_cache
