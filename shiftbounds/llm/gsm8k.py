"""Noisy-teacher distillation on GSM8K with ``transformers`` causal LMs (docs/theory.md §5).

GSM8K (MIT; Cobbe et al. 2021): ``{"question", "answer"}`` per line, the answer a worked solution
ending in ``#### <number>``. Prompts are ``<q>question<a>``; completions the worked answers.

The noisy teacher is the teacher's next-token law made noisy either by a sampling temperature
``t`` (``softmax(logits / t)``; the paper uses ``t`` in {1, 4}) or by an ``eta`` mixture with the
uniform law over the vocabulary. Students (:data:`METHODS`) use the losses of
:mod:`shiftbounds.losses`: LogLossBC on teacher samples; OPD-F/R on the student's own samples at
temperature 1; NAIL-F/R/Mixed on the student's greedy prefixes, with the noised-student loss when
the noise is an ``eta`` mixture.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from shiftbounds.llm.sampling import sample_batch
from shiftbounds.llm.taskmaster import default_data_dir
from shiftbounds.losses import distillation_loss, log_probs, nll, noised_log_probs

METHODS = ("bc", "opd-F", "opd-R", "nail-F", "nail-R", "nail-Mixed")
SPECIALS = ("<q>", "<a>")


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


def prompt_text(p: Problem) -> str:
    return f"<q>{p.question}<a>"


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


def _encode_prompts(tokenizer, problems: list[Problem], device) -> list[torch.Tensor]:
    return [torch.tensor([tokenizer.bos_token_id] + list(tokenizer.encode(prompt_text(p))), device=device) for p in problems]


def _pad(seqs: list[torch.Tensor], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad, dtype=torch.long, device=seqs[0].device)
    att = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        att[i, : len(s)] = 1
    return ids, att


def sample_completions(model, tokenizer, problems: list[Problem], max_new: int, *, temperature: float,
                       teacher_noise: NoisyTeacher | None = None, generator: torch.Generator | None = None,
                       device=None) -> list[torch.Tensor]:
    """Completions of the whole batch (:func:`shiftbounds.llm.sampling.sample_batch`: left-padded
    prompts, KV cache): greedy when ``temperature == 0``, sampled at ``temperature`` otherwise, or
    from the noisy teacher's law with ``teacher_noise``. Each completion stops after its first
    end-of-text."""
    device = device or next(model.parameters()).device
    prompts = [p.tolist() for p in _encode_prompts(tokenizer, problems, "cpu")]
    rows = sample_batch(model, prompts, max_new, stop_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id,
                        temperature=1.0 if teacher_noise is not None else temperature,
                        log_probs=teacher_noise.log_probs if teacher_noise is not None else None, generator=generator)
    return [torch.tensor(r, dtype=torch.long, device=device) for r in rows]


def _completion_batch(tokenizer, problems, completions, device):
    prompts = _encode_prompts(tokenizer, problems, device)
    seqs = [torch.cat([p, c]) for p, c in zip(prompts, completions)]
    ids, att = _pad(seqs, tokenizer.pad_token_id)
    mask = torch.zeros(ids.shape[0], ids.shape[1] - 1, device=device)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        mask[i, len(p) - 1: len(p) - 1 + len(c)] = 1.0  # positions predicting completion tokens
    return ids, att, mask


def student_loss(method: str, student, teacher, tokenizer, problems: list[Problem], noise: NoisyTeacher,
                 max_new: int, generator: torch.Generator, mixed_beta: float = 0.5) -> torch.Tensor:
    """One batch's loss for ``method`` (the algorithmic core; see the module docstring)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    device = next(student.parameters()).device
    if method == "bc":
        comps = sample_completions(teacher, tokenizer, problems, max_new, temperature=1.0, teacher_noise=noise,
                                   generator=generator)
        ids, att, mask = _completion_batch(tokenizer, problems, comps, device)
        return nll(student(input_ids=ids, attention_mask=att).logits[:, :-1].float(), ids[:, 1:], mask)
    student.eval()
    comps = sample_completions(student, tokenizer, problems, max_new, temperature=1.0 if method.startswith("opd") else 0.0,
                               generator=generator)
    student.train()
    ids, att, mask = _completion_batch(tokenizer, problems, comps, device)
    with torch.no_grad():
        t_logp = noise.log_probs(teacher(input_ids=ids, attention_mask=att).logits[:, :-1])
    s_logits = student(input_ids=ids, attention_mask=att).logits[:, :-1].float()
    noised = method.startswith("nail") and noise.eta > 0  # the known-noise (noised student) form
    s_logp = noised_log_probs(s_logits, noise.eta) if noised else log_probs(s_logits)
    div = {"F": "forward", "R": "reverse", "Mixed": "mixed"}[method.split("-")[1]]
    return distillation_loss(t_logp, s_logp, div, beta=mixed_beta, mask=mask)


@torch.no_grad()
def exact_match(model, tokenizer, problems: list[Problem], max_new: int, batch: int = 64) -> float:
    """Share of problems whose greedy completion's ``#### <number>`` equals the reference, decoded
    ``batch`` problems at a time (the key-value cache grows with the batch)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1; got {batch}")
    model.eval()
    comps = [c for j in range(0, len(problems), batch)
             for c in sample_completions(model, tokenizer, problems[j: j + batch], max_new, temperature=0.0)]
    hits = [extract_final(tokenizer.decode(c.tolist())) == p.final for c, p in zip(comps, problems)]
    return sum(hits) / max(1, len(hits))
