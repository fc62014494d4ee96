"""A small causal transformer (GPT-style) with a key-value cache, written for CPU-sized models.

Used for the modular-addition students and teacher (docs/theory.md §5) and for the dialogue agent,
user simulator and realism discriminator of the full pipeline (docs/pipeline.md). Pre-norm blocks,
learned positions, tied input/output embeddings; attention through
``torch.nn.functional.scaled_dot_product_attention``.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from shiftbounds.utils.io import atomic_torch_save


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of a :class:`Transformer`.

    Attributes:
        vocab_size: number of token ids.
        max_len: longest sequence (positions).
        n_layer: transformer blocks.
        n_head: attention heads (must divide ``d_model``).
        d_model: width.
        n_classes: if set, a classification head on the last position (the realism discriminator).
    """

    vocab_size: int
    max_len: int
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    n_classes: int | None = field(default=None)

    def __post_init__(self) -> None:
        for k in ("vocab_size", "max_len", "n_layer", "n_head", "d_model"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k} must be >= 1; got {getattr(self, k)}")
        if self.d_model % self.n_head:
            raise ValueError(f"n_head ({self.n_head}) must divide d_model ({self.d_model})")


KVCache = list  # per layer: (keys [B, nh, T, hd], values [B, nh, T, hd]) or None


class _Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, past: tuple | None) -> tuple[torch.Tensor, tuple]:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))  # [B, nh, T, hd]
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        if past is None or T > 1:
            # causal within the new block; earlier cached positions are all visible
            Tk = k.shape[2]
            mask = torch.ones(T, Tk, dtype=torch.bool, device=x.device).tril(Tk - T)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v)  # one new token sees everything cached
        y = y.transpose(1, 2).reshape(B, T, C)  # [B, T, C]
        return self.proj(y), (k, v)


class _Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model))

    def forward(self, x: torch.Tensor, past: tuple | None) -> tuple[torch.Tensor, tuple]:
        a, present = self.attn(self.ln1(x), past)
        x = x + a
        return x + self.mlp(self.ln2(x)), present


class Transformer(nn.Module):
    """Causal transformer: ``forward(idx [B, T], cache) -> (logits [B, T, V], new cache)``.

    With a cache from earlier calls, ``idx`` holds only the new tokens and positions continue
    from the cached length. With ``cfg.n_classes`` set, :meth:`classify` returns class logits
    from the last position instead.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied embeddings: fewer parameters for tiny vocabularies
        self.cls = nn.Linear(cfg.d_model, cfg.n_classes) if cfg.n_classes else None
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def hidden(self, idx: torch.Tensor, cache: KVCache | None = None) -> tuple[torch.Tensor, KVCache]:
        """Final hidden states ``[B, T, d_model]`` and the updated cache."""
        start = 0 if cache is None or cache[0] is None else cache[0][0].shape[2]
        T = idx.shape[1]
        if start + T > self.cfg.max_len:
            raise ValueError(f"sequence of length {start + T} exceeds max_len={self.cfg.max_len}")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.tok(idx) + self.pos(pos)[None]
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, present = block(x, None if cache is None else cache[i])
            new_cache.append(present)
        return self.ln_f(x), new_cache

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> tuple[torch.Tensor, KVCache]:
        h, new_cache = self.hidden(idx, cache)
        return self.head(h), new_cache

    def classify(self, idx: torch.Tensor) -> torch.Tensor:
        """Class logits ``[B, n_classes]`` from the last position (needs ``cfg.n_classes``)."""
        if self.cls is None:
            raise ValueError("this transformer has no classification head (n_classes is None)")
        h, _ = self.hidden(idx)
        return self.cls(h[:, -1])


@torch.no_grad()
def perturb_weights(model: nn.Module, generator: torch.Generator, scale: float = 1e-7) -> nn.Module:
    """Multiply every parameter of ``model`` in place by ``1 + scale * z``, ``z`` standard normal from
    ``generator`` (on the CPU, parameter by parameter in order): at ``1e-7`` a change of about one
    float32 rounding step, the size by which two CPUs' kernels can differ."""
    for p in model.parameters():
        z = torch.randn(p.shape, generator=generator, dtype=torch.float64)
        p.copy_((p.double() * (1 + scale * z.to(p.device))).to(p.dtype))
    return model


def empty_cache(model: Transformer) -> KVCache:
    """A cache for :meth:`Transformer.forward` with nothing in it yet."""
    return [None] * model.cfg.n_layer


def save_model(model: Transformer, path) -> None:
    """Save config and weights together (atomically)."""
    atomic_torch_save({"config": asdict(model.cfg), "state": model.state_dict()}, path)


def load_model(path) -> Transformer:
    """Load a model saved by :func:`save_model`; the error names the file if it holds none."""
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        model = Transformer(TransformerConfig(**blob["config"]))
        model.load_state_dict(blob["state"])
    except (KeyError, TypeError, RuntimeError, OSError, EOFError, pickle.UnpicklingError) as exc:
        raise ValueError(f"{path} does not hold a shiftbounds Transformer checkpoint ({exc})") from exc
    return model
