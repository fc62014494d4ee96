"""The hand-written reference path that ``benchmarks.llm`` times the library against (not part of the
package): a byte tokenizer and tiny causal LMs built from a config, text dialogues rolled out turn by
turn with ``model``-level sampling, a group-baseline policy-gradient step, and masked-span losses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, LlamaConfig

from shiftbounds.conversations.classifiers import SpanBatch
from shiftbounds.conversations.rule_user import RuleUser, is_acceptance
from shiftbounds.conversations.sampling import sample_batch
from shiftbounds.conversations.taskmaster import OrderItem, goal_text, order_success, parse_orders
from shiftbounds.losses import PolicyGradientLoss, group_advantages, nll, policy_gradient_loss, token_log_probs
from shiftbounds.utils.device import resolve_device
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


def tiny_config(spec: TinyLM, vocab_size: int):
    """The ``transformers`` config of a tiny model of shape ``spec`` (GPT-2 or Llama family)."""
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
    dev = resolve_device(device)
    if path is None:
        tok = ByteTokenizer(special_tokens)
        model = build_tiny(spec or TinyLM(), tok.vocab_size, seed=seed)
    else:
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


def user_prompt(goal: tuple[OrderItem, ...], history: str) -> str:
    """What an LM user model reads before its turn: the history, then ``<goal>`` and the goal. The
    goal comes last so that cutting a long history from the left never drops it (training pairs
    and rollouts use this one layout)."""
    return f"{history}<goal>{goal_text(goal)}"


def user_replies(user, tokenizer, goals: list[tuple[OrderItem, ...]], histories: list[list[int]], turns: list[int], *,
                 max_new: int, generator: torch.Generator, rng: np.random.Generator,
                 max_context: int | None = None) -> list[list[int]]:
    """One user turn per history (token ids after the beginning-of-text marker), starting with
    ``<user>``: from :class:`RuleUser` (which reads the orders in the history) or sampled at
    temperature 1 from an LM user model prompted with :func:`user_prompt`."""
    enc = tokenizer.encode
    user_id, agent_id = enc("<user>")[0], enc("<agent>")[0]
    if isinstance(user, RuleUser):
        return [enc("<user>" + user.reply(g, tokenizer.decode(h), t, rng=rng)) for g, h, t in zip(goals, histories, turns)]
    prompts = [[tokenizer.bos_token_id] + list(h) + enc(user_prompt(g, "")) + [user_id] for g, h in zip(goals, histories)]
    rows = sample_batch(user, prompts, max_new, stop_ids=[agent_id, tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id,
                        temperature=1.0, generator=generator, max_context=max_context)
    return [[user_id] + [x for x in r if x not in (agent_id, tokenizer.eos_token_id)] for r in rows]


@dataclass
class TextDialogue:
    """One rolled-out dialogue: token ids in the agent's view, which of them the agent wrote, and outcomes."""

    ids: list
    agent_mask: list
    success: float
    accepted: bool


def roll_out_batch(agent, tokenizer, goals: list[tuple[OrderItem, ...]], user, *, turns: int, max_new: int,
                   temperature: float, generator: torch.Generator, rng: np.random.Generator,
                   max_context: int | None = None) -> list[TextDialogue]:
    """Alternate user and agent turns for ``turns`` rounds, starting with the user, for every goal
    at once (each turn is one batched, cached sampling call over the dialogues still open). A
    dialogue ends when the user accepts an order; its success is the judge's verdict on the
    agent's ``add_order_item`` calls."""
    enc = tokenizer.encode
    user_id = enc("<user>")[0]
    ids = [[tokenizer.bos_token_id] for _ in goals]
    masks = [[0] for _ in goals]
    accepted = [False] * len(goals)
    for t in range(turns):
        open_ = [i for i in range(len(goals)) if not accepted[i]]
        if not open_:
            break
        replies = user_replies(user, tokenizer, [goals[i] for i in open_], [ids[i][1:] for i in open_], [t] * len(open_),
                               max_new=max_new, generator=generator, rng=rng, max_context=max_context)
        for i, r in zip(open_, replies):
            accepted[i] = bool(parse_orders(tokenizer.decode(ids[i]))) and is_acceptance(tokenizer.decode(r[1:]))
            ids[i] += r
            masks[i] += [0] * len(r)
        open_ = [i for i in open_ if not accepted[i]]
        if not open_:
            break
        rows = sample_batch(agent, [ids[i] for i in open_], max_new, stop_ids=[user_id, tokenizer.eos_token_id],
                            pad_id=tokenizer.pad_token_id, temperature=temperature, generator=generator, max_context=max_context)
        for i, r in zip(open_, rows):
            r = [x for x in r if x not in (user_id, tokenizer.eos_token_id)]
            ids[i] += r
            masks[i] += [1] * len(r)
    out = []
    for g, i, m, acc in zip(goals, ids, masks, accepted):
        orders = parse_orders(tokenizer.decode([x for x, a in zip(i, m) if a]))
        out.append(TextDialogue(i, m, order_success(g, orders) if orders else 0.0, acc))
    return out


def dialogue_pg_loss(policy, ref, dialogues: list[TextDialogue], rewards: torch.Tensor, group: int, kl_coef: float,
                     pad_id: int) -> PolicyGradientLoss:
    """Group-baseline policy gradient on the agent's own tokens, sampled KL to the reference (SFT)
    agent (:func:`shiftbounds.losses.policy_gradient_loss`, with its named parts); dialogues of a
    group share a goal."""
    device = next(policy.parameters()).device
    T = max(len(d.ids) for d in dialogues)
    ids = torch.full((len(dialogues), T), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(dialogues), T), device=device)
    att = torch.zeros((len(dialogues), T), dtype=torch.long, device=device)
    for i, d in enumerate(dialogues):
        ids[i, : len(d.ids)] = torch.tensor(d.ids)
        mask[i, : len(d.ids)] = torch.tensor(d.agent_mask, dtype=torch.float)
        att[i, : len(d.ids)] = 1
    logp = token_log_probs(policy(input_ids=ids, attention_mask=att).logits, ids, shift=True)
    with torch.no_grad():
        ref_logp = token_log_probs(ref(input_ids=ids, attention_mask=att).logits, ids, shift=True)
    adv = group_advantages(rewards.to(device), group)
    return policy_gradient_loss(logp, adv, mask[:, 1:], kl_coef, ref_log_probs=ref_logp)


def span_nll(model, batch: SpanBatch, reduction: str = "token") -> torch.Tensor:
    """NLL of the target tokens (:func:`shiftbounds.losses.nll` with the target mask)."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
    return nll(logits.float(), batch.input_ids[:, 1:], batch.target_mask, reduction)


@torch.no_grad()
def per_example_nll(model, batch: SpanBatch) -> torch.Tensor:
    """Mean NLL per target token for each example, ``[B]``."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    logp = token_log_probs(logits, batch.input_ids, shift=True)
    return -(logp * batch.target_mask).sum(1) / batch.target_mask.sum(1).clamp_min(1)
