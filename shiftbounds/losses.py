"""Pure loss functions shared by every learner in the package (docs/theory.md §5; docs/pipeline.md "RL").

Conventions:

* inputs are logits or log-probabilities over the last axis ``V`` (vocabulary or actions) and a
  ``mask`` over the leading axes, e.g. ``[B, T, V]`` with ``mask [B, T]``; masked-out positions
  contribute nothing, and an all-zero mask gives a loss of exactly 0 (never NaN);
* directions are in the names: ``forward_kl(teacher, student) = KL(teacher || student)``,
  ``reverse_kl(teacher, student) = KL(student || teacher)``;
* reduction is stated: ``"token"`` averages over unmasked positions, ``"sum"`` adds them up;
* mixtures are computed in log space (``logsumexp``), so ``eta = 0`` and ``eta = 1`` are exact.

Every function returns a scalar tensor (or, for the named-parts functions, a frozen dataclass
with the total and its parts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

REDUCTIONS = ("token", "sum")


def _reduce(per_pos: torch.Tensor, mask: torch.Tensor | None, reduction: str) -> torch.Tensor:
    """Masked reduction of ``per_pos`` (shape = mask shape). Empty masks give 0."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}")
    if mask is None:
        mask = torch.ones_like(per_pos)
    mask = mask.to(per_pos.dtype)
    total = (per_pos * mask).sum()
    if reduction == "sum":
        return total
    return total / mask.sum().clamp(min=1.0)


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Log-probabilities over the last axis, ``log softmax(logits)``: the one place the package
    normalises logits (for exact divergences, which need the whole distribution)."""
    return torch.log_softmax(logits, dim=-1)


def gather_tokens(log_probs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``log_probs[..., index]``: the entries of chosen tokens from full log-probabilities
    ``[..., V]`` and integer ``index [...]`` (for callers that also need the full distribution)."""
    return log_probs.gather(-1, index[..., None])[..., 0]


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits, -1).gather(-1, index[..., None])[..., 0]`` without materialising the
    full log-softmax: ``logits[index] - logsumexp(logits)``. Shapes ``[..., V]``, ``[...]``."""
    return logits.gather(-1, index[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)


def token_log_probs(logits: torch.Tensor, index: torch.Tensor, *, shift: bool = False) -> torch.Tensor:
    """Log-probability of each chosen token, in float32 or wider (:func:`selective_log_softmax`).

    ``shift=True`` is the causal-LM convention: ``logits [B, T, V]`` of a model run on token ids
    ``index [B, T]`` score the next token, so the result is ``[B, T - 1]`` (position ``j`` is
    ``log p(index[:, j + 1] | index[:, :j + 1])``).
    """
    if shift:
        logits, index = logits[:, :-1], index[:, 1:]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    return selective_log_softmax(logits, index)


def noised_log_probs(logits: torch.Tensor, eta: float, noise_log_probs: torch.Tensor | None = None) -> torch.Tensor:
    """``log((1 - eta) softmax(logits) + eta * nu)`` in log space (docs/theory.md §5, the noised student
    ``pi_eta = (1-eta) pi + eta nu``). ``nu`` defaults to uniform over the last axis.

    ``eta = 0`` returns ``log_softmax(logits)`` exactly; ``eta = 1`` returns ``log nu`` exactly.
    """
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must lie in [0, 1]; got {eta!r}")
    logp = log_probs(logits)
    if eta == 0.0:
        return logp
    if noise_log_probs is None:
        noise_log_probs = torch.full_like(logp, -math.log(logits.shape[-1]))
    if eta == 1.0:
        return noise_log_probs.expand_as(logp)
    return torch.logaddexp(logp + math.log1p(-eta), noise_log_probs + math.log(eta))


def forward_kl(teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor,
               mask: torch.Tensor | None = None, reduction: str = "token") -> torch.Tensor:
    """``KL(teacher || student) = sum_v p_T (log p_T - log p_S)`` per position, then reduced.

    Shapes ``[..., V]`` (log-probabilities) and ``mask [...]``. Terms with ``p_T = 0`` are 0.
    Gradient w.r.t. the student equals that of the cross-entropy ``-sum_v p_T log p_S``.
    """
    p_t = teacher_log_probs.exp()
    support = p_t > 0
    # outside the teacher's support both logs are replaced by 0 before the product, so neither the
    # value nor the gradient of the discarded branch sees 0 * inf (which would be NaN)
    safe_t = torch.where(support, teacher_log_probs, torch.zeros_like(teacher_log_probs))
    safe_s = torch.where(support, student_log_probs, torch.zeros_like(student_log_probs))
    per = torch.where(support, p_t * (safe_t - safe_s), torch.zeros_like(p_t)).sum(-1)
    return _reduce(per, mask, reduction)


def reverse_kl(teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor,
               mask: torch.Tensor | None = None, reduction: str = "token") -> torch.Tensor:
    """``KL(student || teacher) = sum_v p_S (log p_S - log p_T)`` per position, then reduced
    (mode-seeking; exact over the vocabulary, no sampling)."""
    return forward_kl(student_log_probs, teacher_log_probs, mask, reduction)


def mixed_kl(teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, beta: float,
             mask: torch.Tensor | None = None, reduction: str = "token") -> torch.Tensor:
    """NAIL-Mixed: ``(1 - beta) KL(teacher || student) + beta KL(student || teacher)``, ``beta in [0, 1]``."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must lie in [0, 1]; got {beta!r}")
    return ((1 - beta) * forward_kl(teacher_log_probs, student_log_probs, mask, reduction)
            + beta * reverse_kl(teacher_log_probs, student_log_probs, mask, reduction))


DIVERGENCES = ("forward", "reverse", "mixed")

METHODS = ("bc", "opd-F", "opd-R", "nail-F", "nail-R", "nail-Mixed")
"""Paper 2's students: behaviour cloning, and on-policy distillation at sampled (OPD) or greedy (NAIL)
prefixes with the forward (F), reverse (R) or mixed divergence."""


def method_divergence(method: str) -> str:
    """The divergence ``method`` (one of :data:`METHODS`) trains with; BC's is the forward KL."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    return "forward" if method == "bc" else {"F": "forward", "R": "reverse", "Mixed": "mixed"}[method.split("-")[1]]


def distillation_loss(teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, divergence: str,
                      beta: float = 0.5, mask: torch.Tensor | None = None, reduction: str = "token") -> torch.Tensor:
    """Dispatch on ``divergence`` in :data:`DIVERGENCES` (F, R or Mixed with ``beta``)."""
    if divergence == "forward":
        return forward_kl(teacher_log_probs, student_log_probs, mask, reduction)
    if divergence == "reverse":
        return reverse_kl(teacher_log_probs, student_log_probs, mask, reduction)
    if divergence == "mixed":
        return mixed_kl(teacher_log_probs, student_log_probs, beta, mask, reduction)
    raise ValueError(f"divergence must be one of {DIVERGENCES}; got {divergence!r}")


def nll(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
        reduction: str = "token") -> torch.Tensor:
    """Negative log-likelihood of integer ``targets [...]`` under ``logits [..., V]`` (LogLossBC, SFT)."""
    return _reduce(-selective_log_softmax(logits, targets), mask, reduction)


# ----------------------------------------------------------------------------- policy gradient
def group_advantages(rewards: torch.Tensor, group_size: int, normalise: bool = False) -> torch.Tensor:
    """GRPO-style group baseline: ``A_i = R_i - mean_{j in group(i)} R_j`` (optionally divided by
    the group's standard deviation). ``rewards [B]`` (or ``[B, T]``: per position, each position
    against the same position of its group) with ``B`` a multiple of ``group_size``; consecutive
    blocks of ``group_size`` share a prompt (goal)."""
    if group_size < 1 or rewards.shape[0] % group_size:
        raise ValueError(f"rewards of length {rewards.shape[0]} cannot be split into groups of {group_size}")
    g = rewards.reshape(-1, group_size, *rewards.shape[1:])  # [n_groups, group_size, ...]
    adv = g - g.mean(1, keepdim=True)
    if normalise:
        adv = adv / (g.std(1, keepdim=True, unbiased=False) + 1e-6)
    return adv.reshape(rewards.shape)


def returns_to_go(rewards: torch.Tensor) -> torch.Tensor:
    """``G_t = sum_{s >= t} r_s`` along the last dimension (undiscounted)."""
    return rewards.flip(-1).cumsum(-1).flip(-1)


def entropy(log_probs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The policy's entropy ``-sum_v p_v log p_v`` at every position of ``log_probs [..., V]``, averaged
    over the positions of ``mask`` (default: all)."""
    return _reduce(-(log_probs.exp() * log_probs).sum(-1), mask, "token")


def awr_weights(returns: torch.Tensor, baseline: torch.Tensor, scale: float | torch.Tensor, beta: float = 1.0,
                max_weight: float = 20.0) -> torch.Tensor:
    """Advantage-weighted regression's weights ``min(exp((R - b) / (scale * beta)), max_weight)``
    for logged returns ``R`` with baseline ``b`` (broadcast) and advantage scale ``scale > 0``
    (e.g. the returns' standard deviation): the weight of each logged action in a weighted
    likelihood, ``-w log pi(a)`` (:func:`policy_gradient_loss` with ``w`` as the advantages)."""
    if beta <= 0 or max_weight <= 0 or float(scale) <= 0:
        raise ValueError(f"awr_weights needs beta > 0, max_weight > 0 and scale > 0; got {beta}, {max_weight}, {float(scale)}")
    return torch.exp((returns - baseline) / (scale * beta)).clamp(max=max_weight)


KL_ESTIMATORS = ("exact", "sampled")


@dataclass(frozen=True)
class PolicyGradientLoss:
    """Total loss and its named parts (per token, averaged over unmasked tokens).

    Attributes:
        total: ``pg + kl_coef * kl``.
        pg: REINFORCE term ``-A * log pi(a)``.
        kl: ``KL(pi || pi_ref)``: exact over the whole distribution at every position
            (``kl_estimator = "exact"``), or estimated on the sampled tokens with the ``k3``
            estimator ``exp(r) - 1 - r``, ``r = log pi_ref(a) - log pi(a)`` (non-negative,
            unbiased; ``"sampled"``).
        kl_estimator: which of the two.
    """

    total: torch.Tensor
    pg: torch.Tensor
    kl: torch.Tensor
    kl_estimator: str

    def parts(self) -> dict[str, float]:
        """The parts as floats, for logging: ``{"loss", "pg", "kl"}``."""
        return {"loss": self.total.item(), "pg": self.pg.item(), "kl": self.kl.item()}


def policy_gradient_loss(log_probs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor | None,
                         kl_coef: float, *, ref_log_probs: torch.Tensor | None = None,
                         dist: torch.Tensor | None = None, ref_dist: torch.Tensor | None = None,
                         kl_mask: torch.Tensor | None = None) -> PolicyGradientLoss:
    """REINFORCE with a baseline and a KL penalty to a reference (SFT) policy: the one
    policy-gradient loss of the package.

    Args:
        log_probs: ``[B, T]`` log-probabilities of the sampled tokens under the current policy
            (:func:`token_log_probs` or :func:`gather_tokens`).
        advantages: ``[B]`` per sequence (broadcast over its tokens) or ``[B, T]`` per token.
        mask: ``[B, T]``, 1 on the policy's own tokens (user tokens never enter the loss); ``None``
            = every position.
        kl_coef: weight of the KL penalty, ``>= 0``.
        ref_log_probs: ``[B, T]`` the sampled tokens' log-probabilities under the reference: the
            sampled (``k3``) KL estimate.
        dist, ref_dist: full log-probabilities ``[..., V]`` of the policy and the reference at
            every position: the exact KL (:func:`reverse_kl`), averaged under ``kl_mask``
            (default ``mask``). Give either ``ref_log_probs`` or both of these.
    """
    if kl_coef < 0:
        raise ValueError(f"kl_coef must be >= 0; got {kl_coef}")
    exact = dist is not None or ref_dist is not None
    if exact == (ref_log_probs is not None) or (exact and (dist is None or ref_dist is None)):
        raise ValueError("give either ref_log_probs (sampled KL) or both dist and ref_dist (exact KL)")
    adv = advantages[:, None] if advantages.dim() == 1 and log_probs.dim() == 2 else advantages
    pg = _reduce(-(adv.detach() * log_probs), mask, "token")
    if exact:
        kl = reverse_kl(ref_dist.detach(), dist, mask if kl_mask is None else kl_mask)
    else:
        r = ref_log_probs.detach() - log_probs
        kl = _reduce(torch.exp(r) - 1 - r, mask, "token")
    return PolicyGradientLoss(total=pg + kl_coef * kl, pg=pg, kl=kl, kl_estimator="exact" if exact else "sampled")
