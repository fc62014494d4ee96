"""Batched autoregressive sampling with a key-value cache."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from shiftbounds.nn.transformer import KVCache, Transformer


@dataclass(frozen=True)
class Generation:
    """Sampled tokens and the logits they were drawn from.

    Attributes:
        tokens: ``[B, n_new]``.
        logits: ``[B, n_new, V]`` (float32 or the model's dtype; before temperature).
        cache: the key-value cache after the last sampled token has been fed.
    """

    tokens: torch.Tensor
    logits: torch.Tensor
    cache: KVCache


def multinomial(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One draw per row of ``probs [B, V]``. A generator on another device than ``probs`` (a CPU
    generator with CUDA probabilities) draws on its own device, so a run seeded on the CPU draws
    the same way whatever device the tensors live on."""
    if generator is not None and generator.device != probs.device:
        return torch.multinomial(probs.cpu(), 1, generator=generator)[:, 0].to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def sample_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """Greedy (``temperature == 0``) or softmax sampling at ``temperature`` from ``logits [B, V]``."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0; got {temperature}")
    if temperature == 0:
        return logits.argmax(-1)
    return multinomial(torch.softmax(logits.float() / temperature, dim=-1), generator)


@torch.no_grad()
def generate(model: Transformer, prompt: torch.Tensor, n_new: int, temperature: float = 1.0,
             generator: torch.Generator | None = None, cache: KVCache | None = None,
             logits_hook=None) -> Generation:
    """Sample ``n_new`` tokens after ``prompt [B, T0]`` (all rows the same length), feeding one
    token per step through the cache. ``logits_hook(step, logits) -> logits`` may restrict or
    shift the next-token logits (e.g. to a vocabulary subset); the stored logits are the hook's
    output."""
    logits, cache = model(prompt, cache)
    nxt_logits = logits[:, -1]
    toks, all_logits = [], []
    for step in range(n_new):
        if logits_hook is not None:
            nxt_logits = logits_hook(step, nxt_logits)
        tok = sample_tokens(nxt_logits, temperature, generator)
        toks.append(tok)
        all_logits.append(nxt_logits)
        logits, cache = model(tok[:, None], cache)
        nxt_logits = logits[:, -1]
    return Generation(torch.stack(toks, 1), torch.stack(all_logits, 1), cache)
