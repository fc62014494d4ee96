"""Modular addition with a noisy teacher: the paper's synthetic distillation task (docs/theory.md §5).

A prompt is ``m`` residues ``x_1..x_m`` modulo ``p``; the chain of thought is the running sums
``s_i = (s_{i-1} + x_i) mod p`` and the final answer is ``s_m``. Sequences are
``[x_1 .. x_m, SEP, s_1 .. s_m]`` (vocabulary: residues ``0..p-1`` and ``SEP = p``); the logits at
position ``m + i - 1`` predict ``s_i``.

* The **clean teacher** is a :class:`~shiftbounds.nn.transformer.Transformer` trained from scratch
  to continue *consistently* from any prefix it is given: trained on chains whose earlier steps are
  randomly corrupted, with target ``(previous chain token + x_i) mod p``.
* The **noisy teacher** follows one of two documented laws: ``"mixture"`` (the default of the
  paper's public code) — at every reasoning token ``(1 - eta)`` clean ``+ eta`` uniform over
  residues, continuing consistently from the given prefix; ``"absorbing"`` — once the prefix holds
  an error (its own, or in a student prefix it is asked to continue) the output is uniform.
* Students (same architecture) are trained with the learners of :mod:`shiftbounds.imitation`:
  ``bc`` (at the noisy teacher's own prefixes), ``opd-F/R`` (at the student's prefixes, sampled at
  temperature 1), ``nail-F/R/Mixed`` (at the student's prefixes, decoded greedily, as deployed).
  Losses come from :mod:`shiftbounds.losses`.
* **Teacher signal**, the same for every method (``teacher_signal``): ``"sampled"`` — one token
  drawn from the noisy teacher at every position of the prefixes (BC: the teacher's own sampled
  chain; online students: a teacher sample at each of their own prefixes), fitted by log-loss;
  ``"full"`` — the noisy teacher's whole next-token distribution at every position, fitted by the
  method's divergence (BC: forward KL at the teacher's prefixes); ``"paper"`` — the information
  structure paper 2 compares: offline BC learns from chains *sampled* from the noisy teacher, while
  the online students *query* it at their own prefixes and get its whole distribution (so
  ``"sampled"`` and ``"full"``, one signal for every method, are its equal-information controls).
  The reverse and mixed divergences need the full distribution.
* **Warm start** (``train_student(init=...)``): every method may start from the same student, e.g.
  a short shared BC phase (:func:`warm_start`), as the paper's students start from a pretrained
  model rather than from random weights.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import torch

from shiftbounds.losses import METHODS, distillation_loss, gather_tokens, log_probs, method_divergence, nll, noised_log_probs
from shiftbounds.nn.fit import fit
from shiftbounds.nn.generate import generate, multinomial, sample_tokens
from shiftbounds.nn.transformer import Transformer, TransformerConfig

LAWS = ("mixture", "absorbing")
TEACHER_SIGNALS = ("sampled", "full", "paper")


@dataclass(frozen=True)
class ModAddTask:
    """``p`` (modulus) and ``m`` (residues per prompt = chain length)."""

    p: int = 7
    m: int = 8

    def __post_init__(self) -> None:
        if self.p < 2 or self.m < 1:
            raise ValueError(f"need p >= 2 and m >= 1; got p={self.p}, m={self.m}")

    @property
    def sep(self) -> int:
        return self.p

    @property
    def vocab_size(self) -> int:
        return self.p + 1

    @property
    def seq_len(self) -> int:
        return 2 * self.m + 1

    def model_config(self, d_model: int = 64, n_layer: int = 2, n_head: int = 4) -> TransformerConfig:
        """A transformer shape for this task."""
        return TransformerConfig(vocab_size=self.vocab_size, max_len=self.seq_len, n_layer=n_layer,
                                 n_head=n_head, d_model=d_model)


def sample_prompts(task: ModAddTask, n: int, generator: torch.Generator, device: str | torch.device = "cpu") -> torch.Tensor:
    """``[n, m]`` uniform residues (drawn with a CPU generator, then moved to ``device``)."""
    return torch.randint(task.p, (n, task.m), generator=generator).to(device)


def running_sums(task: ModAddTask, prompts: torch.Tensor) -> torch.Tensor:
    """``[n, m]``: ``s_i = (x_1 + ... + x_i) mod p``."""
    return torch.cumsum(prompts, dim=1) % task.p


def with_chain(task: ModAddTask, prompts: torch.Tensor, chain: torch.Tensor) -> torch.Tensor:
    """``[n, 2m+1]`` sequences ``prompt, SEP, chain``."""
    sep = torch.full((prompts.shape[0], 1), task.sep, dtype=prompts.dtype, device=prompts.device)
    return torch.cat([prompts, sep, chain], dim=1)


def chain_logits(task: ModAddTask, model: Transformer, seqs: torch.Tensor) -> torch.Tensor:
    """Logits over residues for every chain step, ``[n, m, p]``, from one forward pass (teacher forcing)."""
    logits, _ = model(seqs[:, :-1])
    return logits[:, task.m:, : task.p]


def consistent_targets(task: ModAddTask, seqs: torch.Tensor) -> torch.Tensor:
    """``[n, m]``: the consistent continuation ``(previous chain token + x_i) mod p`` at each step
    (``x_1`` at the first), whatever the chain so far."""
    prompts, chain = seqs[:, : task.m], seqs[:, task.m + 1:]
    prev = torch.cat([torch.zeros_like(chain[:, :1]), chain[:, :-1]], dim=1)
    return (prev + prompts) % task.p


def prefix_has_error(task: ModAddTask, seqs: torch.Tensor) -> torch.Tensor:
    """``[n, m]`` bool: the chain *before* step ``i`` differs from the true running sums."""
    wrong = seqs[:, task.m + 1:] != running_sums(task, seqs[:, : task.m])
    before = torch.cumsum(wrong.int(), dim=1) - wrong.int()
    return before > 0


def noisy_teacher_log_probs(task: ModAddTask, clean_log_probs: torch.Tensor, seqs: torch.Tensor,
                            eta: float, law: str) -> torch.Tensor:
    """The noisy teacher's log-probabilities ``[n, m, p]`` at every chain step of ``seqs``."""
    if law not in LAWS:
        raise ValueError(f"law must be one of {LAWS}; got {law!r}")
    mixed = noised_log_probs(clean_log_probs, eta)  # log((1-eta) p_clean + eta / p)
    if law == "mixture":
        return mixed
    uniform = torch.full_like(mixed, -torch.log(torch.tensor(float(task.p))).item())
    return torch.where(prefix_has_error(task, seqs)[..., None], uniform, mixed)


# ----------------------------------------------------------------------------- teacher
@dataclass(frozen=True)
class TeacherConfig:
    """Training of the clean teacher: ``steps`` of batch ``batch`` at learning rate ``lr`` on chains
    whose tokens are corrupted with probability ``corrupt``."""

    steps: int = 1500
    batch: int = 128
    lr: float = 3e-3
    corrupt: float = 0.3
    d_model: int = 64
    n_layer: int = 2


def learning_rate(step: int, steps: int, lr: float, *, warmup: int, decay: bool) -> float:
    """The rate at ``step`` of ``steps``: linear warm-up over ``warmup`` steps, then constant or,
    with ``decay``, falling linearly to ``0.1 lr`` at the last step."""
    scale = min(1.0, (step + 1) / warmup)
    return lr * scale * ((0.1 + 0.9 * (1 - step / steps)) if decay else 1.0)


def train_teacher(task: ModAddTask, cfg: TeacherConfig, generator: torch.Generator, progress=None,
                  device: str | torch.device = "cpu") -> Transformer:
    """Train the clean, consistently continuing teacher from scratch."""
    model = Transformer(task.model_config(cfg.d_model, cfg.n_layer)).to(device)

    def batch_loss(model: Transformer, _step: int) -> torch.Tensor:
        prompts = sample_prompts(task, cfg.batch, generator)
        chain = running_sums(task, prompts)
        noise = torch.randint(task.p, chain.shape, generator=generator)
        flip = torch.rand(chain.shape, generator=generator) < cfg.corrupt
        seqs = with_chain(task, prompts, torch.where(flip, noise, chain)).to(device)
        return nll(chain_logits(task, model, seqs), consistent_targets(task, seqs))

    fit(model, batch_loss, range(cfg.steps), cfg.lr, progress=progress,
        lr_at=lambda step: learning_rate(step, cfg.steps, cfg.lr, warmup=100, decay=True))
    return model


@torch.no_grad()
def teacher_accuracy(task: ModAddTask, teacher: Transformer, n: int, generator: torch.Generator,
                     corrupt: float = 0.3) -> float:
    """Share of chain steps where the teacher's argmax is the consistent continuation."""
    prompts = sample_prompts(task, n, generator)
    chain = running_sums(task, prompts)
    flip = torch.rand(chain.shape, generator=generator) < corrupt
    seqs = with_chain(task, prompts, torch.where(flip, torch.randint(task.p, chain.shape, generator=generator), chain))
    seqs = seqs.to(next(teacher.parameters()).device)
    pred = chain_logits(task, teacher, seqs).argmax(-1)
    return float((pred == consistent_targets(task, seqs)).float().mean())


@torch.no_grad()
def sample_noisy_teacher(task: ModAddTask, teacher: Transformer, prompts: torch.Tensor, eta: float, law: str,
                         generator: torch.Generator) -> torch.Tensor:
    """Chains sampled from the noisy teacher itself (its own prefix at every step): ``[n, m]``."""
    sums = running_sums(task, prompts)
    in_error = torch.zeros(prompts.shape[0], dtype=torch.bool, device=prompts.device)
    uniform = -float(torch.log(torch.tensor(float(task.p))))
    # sample step by step so that the absorbing law sees the errors made so far
    seqs = torch.cat([prompts, torch.full((prompts.shape[0], 1), task.sep, device=prompts.device)], dim=1)
    logits, cache = teacher(seqs)
    nxt = logits[:, -1]
    chain = []
    for i in range(task.m):
        logp = noised_log_probs(nxt[:, : task.p], eta)
        if law == "absorbing":
            logp = torch.where(in_error[:, None], torch.full_like(logp, uniform), logp)
        tok = sample_tokens(logp, 1.0, generator)
        chain.append(tok)
        in_error = in_error | (tok != sums[:, i])
        logits, cache = teacher(tok[:, None], cache)
        nxt = logits[:, -1]
    return torch.stack(chain, 1)


# ----------------------------------------------------------------------------- students
@dataclass(frozen=True)
class StudentConfig:
    """Training budget and options of a student (identical across methods).

    Attributes:
        method: one of :data:`METHODS`.
        eta: teacher noise.
        law: noisy-teacher law, one of :data:`LAWS`.
        steps, batch, lr: optimisation budget (``steps * batch`` teacher-labelled chains for every method).
        mixed_beta: ``beta`` of NAIL-Mixed.
        noised_student: fit ``(1 - eta) pi_hat + eta nu`` to the teacher (known-noise form).
        teacher_signal: ``"sampled"`` (one noisy-teacher token per position), ``"full"`` (its
            whole distribution) or ``"paper"`` (BC sampled, the online methods full), one of
            :data:`TEACHER_SIGNALS`; :attr:`signal` is what this method gets.
        lr_decay: fall linearly to ``0.1 lr`` over the steps (after a 50-step warm-up), as the
            teacher's schedule does; else constant after the warm-up.
        corrupt: BC only: each chain token of the teacher-sampled prefixes is replaced by a
            uniform residue with this probability before the noisy teacher labels every position
            (the teacher's own training recipe, whose targets at a corrupted prefix are the
            consistent continuation); 0 = plain BC.
    """

    method: str = "nail-F"
    eta: float = 0.1
    law: str = "mixture"
    steps: int = 600
    batch: int = 64
    lr: float = 3e-3
    mixed_beta: float = 0.5
    noised_student: bool = False
    d_model: int = 64
    n_layer: int = 2
    teacher_signal: str = "full"
    lr_decay: bool = False
    corrupt: float = 0.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        if self.teacher_signal not in TEACHER_SIGNALS:
            raise ValueError(f"teacher_signal must be one of {TEACHER_SIGNALS}; got {self.teacher_signal!r}")
        if self.signal == "sampled" and self.method.endswith(("-R", "-Mixed")):
            raise ValueError(f"{self.method} needs the teacher's full distribution (teacher_signal='full'); "
                             "a sampled teacher token only supports the forward divergence (log-loss)")
        if self.law not in LAWS:
            raise ValueError(f"law must be one of {LAWS}; got {self.law!r}")
        if not 0 <= self.eta < 1:
            raise ValueError(f"eta must lie in [0, 1); got {self.eta}")
        if not 0 <= self.corrupt < 1 or (self.corrupt and self.method != "bc"):
            raise ValueError(f"corrupt must lie in [0, 1) and is for BC only; got {self.corrupt} for {self.method}")
        if self.steps < 1 or self.batch < 1 or self.lr <= 0:
            raise ValueError(f"need steps >= 1, batch >= 1, lr > 0; got {self.steps}, {self.batch}, {self.lr}")

    @property
    def signal(self) -> str:
        """The signal this method gets: ``"sampled"`` or ``"full"`` (``"paper"`` resolves by method)."""
        if self.teacher_signal == "paper":
            return "sampled" if self.method == "bc" else "full"
        return self.teacher_signal


@torch.no_grad()
def student_prefixes(task: ModAddTask, cfg: StudentConfig, student: Transformer, prompts: torch.Tensor,
                     generator: torch.Generator) -> torch.Tensor:
    """The sequences (prompt, separator, chain) at whose prefixes an online student is taught: its own
    chains, sampled at temperature 1 for OPD, decoded greedily (as deployed) for NAIL."""
    temperature = 1.0 if cfg.method.startswith("opd") else 0.0
    student.eval()
    prefix = torch.cat([prompts, torch.full((prompts.shape[0], 1), task.sep, device=prompts.device)], dim=1)
    gen = generate(student, prefix, task.m, temperature, generator, logits_hook=lambda _step, logits: logits[:, : task.p])
    student.train()
    return with_chain(task, prompts, gen.tokens)


def student_step_loss(task: ModAddTask, cfg: StudentConfig, student: Transformer, teacher: Transformer,
                      prompts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One batch's loss for ``cfg.method`` and ``cfg.teacher_signal`` (the algorithmic core; see
    the module docstring)."""
    if cfg.method == "bc":
        chain = sample_noisy_teacher(task, teacher, prompts, cfg.eta, cfg.law, generator)
        if cfg.corrupt:  # corrupted prefixes, labelled below by the noisy teacher
            flip = torch.rand(chain.shape, generator=generator).to(chain.device) < cfg.corrupt
            chain = torch.where(flip, torch.randint(task.p, chain.shape, generator=generator).to(chain.device), chain)
        seqs = with_chain(task, prompts, chain)
        if cfg.signal == "sampled" and not cfg.corrupt:  # LogLossBC on the sampled chain
            return nll(chain_logits(task, student, seqs), seqs[:, task.m + 1:])
    else:
        seqs = student_prefixes(task, cfg, student, prompts, generator)
    with torch.no_grad():
        teacher_logp = noisy_teacher_log_probs(task, log_probs(chain_logits(task, teacher, seqs)),
                                               seqs, cfg.eta, cfg.law)
    logits = chain_logits(task, student, seqs)
    noised = cfg.noised_student and cfg.method != "bc"
    student_logp = noised_log_probs(logits, cfg.eta) if noised else log_probs(logits)
    if cfg.signal == "sampled":  # one noisy-teacher token at each of the student's prefixes
        labels = multinomial(teacher_logp.exp().reshape(-1, task.p), generator).reshape(teacher_logp.shape[:-1])
        return -gather_tokens(student_logp, labels).mean()
    divergence = method_divergence(cfg.method)
    return distillation_loss(teacher_logp, student_logp, divergence, beta=cfg.mixed_beta)


@dataclass(frozen=True)
class ModAddEval:
    """Greedy-decoding accuracy on held-out prompts.

    Attributes:
        chain_exact: share of prompts whose whole chain is right.
        answer_exact: share whose final answer ``s_m`` is right.
        per_position: accuracy of each chain step, ``[m]``.
    """

    chain_exact: float
    answer_exact: float
    per_position: list = field(default_factory=list)


@torch.no_grad()
def evaluate(task: ModAddTask, model: Transformer, prompts: torch.Tensor) -> ModAddEval:
    """Greedy decoding (with the cache) on ``prompts``."""
    model.eval()
    prompts = prompts.to(next(model.parameters()).device)
    prefix = torch.cat([prompts, torch.full((prompts.shape[0], 1), task.sep, device=prompts.device)], dim=1)
    chain = generate(model, prefix, task.m, 0.0, logits_hook=lambda _s, lg: lg[:, : task.p]).tokens
    right = chain == running_sums(task, prompts)
    return ModAddEval(float(right.all(1).float().mean()), float(right[:, -1].float().mean()),
                      right.float().mean(0).tolist())


def train_student(task: ModAddTask, cfg: StudentConfig, teacher: Transformer, generator: torch.Generator,
                  progress=None, init: Transformer | None = None, after_step=None) -> Transformer:
    """Train a student with ``cfg`` on the teacher's device, from random weights or from a copy of
    ``init`` (a warm start shared by every method); ``progress(step, loss)`` is called every step and
    ``after_step(steps_done, student)`` before the first step and after each one (it may evaluate the
    student; it must not train it or draw from ``generator``)."""
    device = next(teacher.parameters()).device
    if init is None:
        student = Transformer(task.model_config(cfg.d_model, cfg.n_layer)).to(device)
    else:
        student = copy.deepcopy(init).to(device).train()

    def batch_loss(model: Transformer, _step: int) -> torch.Tensor:
        return student_step_loss(task, cfg, model, teacher, sample_prompts(task, cfg.batch, generator, device), generator)

    fit(student, batch_loss, range(cfg.steps), cfg.lr, clip=1.0, progress=progress, after_step=after_step,
        lr_at=lambda step: learning_rate(step, cfg.steps, cfg.lr, warmup=50, decay=cfg.lr_decay))
    return student


def warm_start(task: ModAddTask, cfg: StudentConfig, teacher: Transformer, steps: int, generator: torch.Generator,
               progress=None, corrupt: float = 0.0) -> Transformer:
    """The shared warm start: ``steps`` of BC from random weights with ``cfg``'s teacher noise, law,
    teacher signal and optimiser (and prefix corruption ``corrupt``); every method of a comparison
    then starts from a copy of it."""
    return train_student(task, replace(cfg, method="bc", steps=steps, corrupt=corrupt), teacher, generator, progress)
