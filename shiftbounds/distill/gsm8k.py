"""Noisy-teacher distillation on GSM8K with ``transformers`` causal LMs (docs/theory.md §5).

GSM8K (MIT; Cobbe et al. 2021): ``{"question", "answer"}`` per line, the answer a worked solution
ending in ``#### <number>``. A prompt is the question as a user message, rendered by the model's
chat template (:func:`prompt_messages`); a completion is the worked answer as the assistant's turn.

The noisy teacher is the teacher's next-token law made noisy either by a sampling temperature
``t`` (``softmax(logits / t)``; the paper uses ``t`` in {1, 4}) or by an ``eta`` mixture with the
uniform law over the vocabulary. Students (:data:`METHODS`): LogLossBC on teacher samples (TRL's
``SFTTrainer``); OPD-F/R on the student's own samples at temperature 1 and NAIL-F/R/Mixed on the
student's greedy prefixes, with the noised-student loss when the noise is an ``eta`` mixture (TRL's
``DistillationTrainer`` with :func:`on_policy_loss`, :mod:`shiftbounds.distill.trainers`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.models import chat_ids
from shiftbounds.conversations.sampling import sample_batch
from shiftbounds.conversations.taskmaster import default_data_dir
from shiftbounds.losses import METHODS, distillation_loss, log_probs, method_divergence, noised_log_probs


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str
    final: str


def extract_final(text: str) -> str | None:
    """The number after the last ``####`` (commas and a trailing period removed), or ``None``."""
    m = re.findall(r"####\s*([-\d,\.]+)", text)
    return m[-1].replace(",", "").rstrip(".") if m else None


def load_gsm8k(split: str, data_dir: str | Path | None = None, limit: int | None = None) -> list[Problem]:
    """GSM8K ``train`` or ``test``; the error names the file and line of a bad record."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
    path = Path(data_dir or default_data_dir()) / "gsm8k" / f"{split}.jsonl"
    if not path.exists():
        raise ValueError(f"{path} not found; download GSM8K (see the README) and pass --data-dir")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            q, a = rec["question"], rec["answer"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise ValueError(f"{path}:{i}: not a GSM8K record ({exc})") from exc
        final = extract_final(a)
        if final is None:
            raise ValueError(f"{path}:{i}: answer has no '#### <number>'")
        out.append(Problem(q, a, final))
        if limit and len(out) >= limit:
            break
    return out


def prompt_messages(p: Problem) -> list[dict]:
    """The prompt of a problem: its question as a user message."""
    return [{"role": "user", "content": p.question}]


@dataclass(frozen=True)
class NoisyTeacher:
    """How the teacher's law is made noisy: ``temperature`` (> 0) or an ``eta`` mixture with uniform."""

    temperature: float = 1.0
    eta: float = 0.0

    def __post_init__(self) -> None:
        if self.temperature <= 0 or not 0 <= self.eta < 1:
            raise ValueError(f"need temperature > 0 and eta in [0, 1); got {self.temperature}, {self.eta}")

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The noisy teacher's next-token log-probabilities from its logits ``[..., V]``."""
        return noised_log_probs(logits.float() / self.temperature, self.eta)


def on_policy_loss(method: str, student_logits: torch.Tensor, teacher_logits: torch.Tensor, noise: NoisyTeacher,
                   mask: torch.Tensor, *, mixed_beta: float = 0.5, reduction: str = "token") -> torch.Tensor:
    """The divergence of an on-policy student (OPD-F/R, NAIL-F/R/Mixed) from the noisy teacher at the
    prefixes it was given: ``[B, T, V]`` logits, ``mask [B, T]`` over the completion positions. NAIL
    with an ``eta`` mixture uses the noised student (the known-noise form), OPD the plain student."""
    if method not in METHODS or method == "bc":
        raise ValueError(f"method must be an on-policy one of {METHODS[1:]}; got {method!r}")
    t_logp = noise.log_probs(teacher_logits)
    s_logits = student_logits.float()
    noised = method.startswith("nail") and noise.eta > 0
    s_logp = noised_log_probs(s_logits, noise.eta) if noised else log_probs(s_logits)
    return distillation_loss(t_logp, s_logp, method_divergence(method), beta=mixed_beta, mask=mask, reduction=reduction)


def prompt_ids(tokenizer: PreTrainedTokenizerBase, problems: list[Problem]) -> list[list[int]]:
    """Each problem's chat-templated prompt, ready for the assistant's answer."""
    return [chat_ids(tokenizer, prompt_messages(p), True) for p in problems]


def sample_completions(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, problems: list[Problem], max_new: int, *, temperature: float,
                       teacher_noise: NoisyTeacher | None = None, generator: torch.Generator | None = None) -> list[list[int]]:
    """Completions of the whole batch (:func:`shiftbounds.conversations.sampling.sample_batch`: left-padded
    prompts, KV cache): greedy when ``temperature == 0``, sampled at ``temperature`` otherwise, or
    from the noisy teacher's law with ``teacher_noise``. Each completion stops after its first
    end-of-text."""
    return sample_batch(model, prompt_ids(tokenizer, problems), max_new, stop_ids=[tokenizer.eos_token_id],
                        pad_id=tokenizer.pad_token_id, temperature=1.0 if teacher_noise is not None else temperature,
                        log_probs=teacher_noise.log_probs if teacher_noise is not None else None, generator=generator)


@torch.no_grad()
def exact_match(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, problems: list[Problem], max_new: int, batch: int = 64) -> float:
    """Share of problems whose greedy completion's ``#### <number>`` equals the reference, decoded
    ``batch`` problems at a time (the key-value cache grows with the batch)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1; got {batch}")
    model.eval()
    comps = [c for j in range(0, len(problems), batch)
             for c in sample_completions(model, tokenizer, problems[j: j + batch], max_new, temperature=0.0)]
    hits = [extract_final(tokenizer.decode(c, skip_special_tokens=True)) == p.final for c, p in zip(comps, problems)]
    return sum(hits) / max(1, len(hits))
