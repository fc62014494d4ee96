"""Training stages of the neural pipeline (docs/pipeline.md "Components"), each with a frozen config.

* :func:`sft` — supervised fine-tuning of the agent on the logs' agent turns (the shared
  initialisation of all three paradigms), or of the user simulator on the logs' user turns given
  goal and history (calibration). Loss on one side's tokens only.
* :func:`train_discriminator` — a realism classifier: real user turn versus a simulator's turn at
  the same logged history; its log-odds are the optional realism reward.
* :func:`realism_finetune` — the optional second calibration stage: policy gradient on the
  simulator's own turns at logged histories with the discriminator's log-odds as reward.
* :func:`train_agent` — one policy-gradient algorithm for every paradigm: REINFORCE with a group
  baseline (dialogues that share a goal, or samples at the same logged context) and an exact
  per-turn KL penalty to the SFT agent. Static Context RL samples one turn at logged contexts and
  is paid by the judge (or, ``static_reward="awr"``, regresses on the logged acts weighted by their
  judged return-to-go: the multi-turn logs-only baseline); Interactive and Calibrated Interactive
  RL roll out whole dialogues against their simulator and are paid by its acceptance. Same budget
  (agent tokens) and hyper-parameters.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from shiftbounds.dialogue.neural.rollout import (
    ExplicitUser,
    NeuralUser,
    agent_turn_logits,
    rollout,
    user_answer_probs,
    user_turn_logits,
)
from shiftbounds.dialogue.neural.tokens import Vocab
from shiftbounds.dialogue.tasks import judge_reward
from shiftbounds.losses import (
    PolicyGradientLoss,
    awr_weights,
    entropy,
    gather_tokens,
    group_advantages,
    log_probs,
    nll,
    policy_gradient_loss,
    returns_to_go,
)
from shiftbounds.nn.fit import fit
from shiftbounds.nn.generate import multinomial
from shiftbounds.nn.transformer import Transformer, TransformerConfig
from shiftbounds.theory import PARADIGMS
from shiftbounds.utils.io import atomic_torch_save

STATIC_REWARDS = ("myopic", "one_step", "awr")
ADVANTAGES = ("return", "togo")


@dataclass(frozen=True)
class ModelConfig:
    """Width and depth of every network of the pipeline (agent, simulator, discriminator)."""

    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4

    def build(self, vocab: Vocab, n_classes: int | None = None) -> Transformer:
        """A fresh network for ``vocab`` (positions for the goal-first view of ``H`` turns)."""
        return Transformer(TransformerConfig(vocab.size, 2 + 2 * vocab.task.horizon, self.n_layer, self.n_head,
                                             self.d_model, n_classes))


@dataclass(frozen=True)
class SFTConfig:
    """Supervised fine-tuning: ``steps`` minibatches of ``batch`` dialogues, AdamW at ``lr``."""

    steps: int = 400
    batch: int = 64
    lr: float = 3e-3

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch < 1 or self.lr <= 0:
            raise ValueError(f"SFT needs steps >= 0, batch >= 1, lr > 0; got {self.steps}, {self.batch}, {self.lr}")


def _device(net: torch.nn.Module) -> torch.device:
    return next(net.parameters()).device


def _batches(n: int, batch: int, steps: int, generator: torch.Generator, device: torch.device):
    """Minibatch indices drawn with ``generator`` (on its own device), moved to ``device``."""
    for _ in range(steps):
        yield torch.randint(n, (min(batch, n),), generator=generator).to(device)


def sft(vocab: Vocab, net: Transformer, data: dict, side: str, cfg: SFTConfig, generator: torch.Generator,
        progress: Callable | None = None) -> Transformer:
    """Maximum likelihood on one side's turns of encoded logs (:func:`~shiftbounds.dialogue.neural.tokens.encode`).

    ``side="agent"``: NLL of ``a_t`` given the agent view; ``side="user"``: NLL of ``u_t`` given the
    goal-first view (valid acts only). Returns the trained network (a copy).
    """
    if side not in ("agent", "user"):
        raise ValueError(f"side must be 'agent' or 'user'; got {side!r}")
    net = copy.deepcopy(net)

    def batch_loss(net: Transformer, idx: torch.Tensor) -> torch.Tensor:
        mask = data["turn_mask"][idx]
        if side == "agent":
            return nll(agent_turn_logits(vocab, net, data["agent_view"][idx]), data["actions"][idx].clamp_min(0), mask)
        logits = user_turn_logits(vocab, net, data["user_view"][idx], data["actions"][idx])
        return nll(logits, data["acts"][idx].clamp_min(0), mask)

    fit(net, batch_loss, _batches(data["goals"].shape[0], cfg.batch, cfg.steps, generator, _device(net)), cfg.lr, progress=progress)
    return net


@torch.no_grad()
def user_nll(vocab: Vocab, user: ExplicitUser | Transformer, data: dict) -> torch.Tensor:
    """Per-turn NLL of the logged user acts under a user model, ``[H]`` (mean over dialogues alive)."""
    mask = data["turn_mask"]
    acts = data["acts"].clamp_min(0)
    if isinstance(user, ExplicitUser):
        p = user.at_histories(data["goals"], data["actions"], data["acts"]).double()
        logp = torch.log(p.gather(-1, acts[..., None])[..., 0].clamp_min(1e-30))
    else:
        logits = user_turn_logits(vocab, user, data["user_view"], data["actions"])
        logp = gather_tokens(log_probs(logits), acts)
    return -(logp * mask).sum(0) / mask.sum(0).clamp_min(1.0)


# ----------------------------------------------------------------------------- realism discriminator
def _fake_views(vocab: Vocab, sim, data: dict, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of the user views with one random alive turn's user act replaced by a simulator sample;
    returns the views and the replaced turn index per dialogue."""
    with torch.no_grad():
        probs = user_answer_probs(vocab, sim, data)
    mask = data["turn_mask"]
    turn = multinomial(mask / mask.sum(1, keepdim=True), generator)
    rows = torch.arange(mask.shape[0], device=mask.device)
    fake = multinomial(probs[rows, turn], generator)
    views = data["user_view"].clone()
    views[rows, 3 + 2 * turn] = fake + vocab.user_offset
    return views, turn


def _disc_logits(disc: Transformer, views: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    h, _ = disc.hidden(views)
    logits = disc.cls(h[torch.arange(views.shape[0], device=views.device), 3 + 2 * turn])
    return logits[:, 1] - logits[:, 0]


def train_discriminator(vocab: Vocab, disc: Transformer, sim, data: dict, cfg: SFTConfig,
                        generator: torch.Generator, progress: Callable | None = None) -> Transformer:
    """Classifier of real (label 1) versus simulated (label 0) user turns given goal and history,
    trained from the freshly built ``disc`` (:meth:`ModelConfig.build` with ``n_classes=2``)."""
    disc = copy.deepcopy(disc)

    def batch_loss(disc: Transformer, idx: torch.Tensor) -> torch.Tensor:
        sub = {k: v[idx] for k, v in data.items()}
        fake, turn = _fake_views(vocab, sim, sub, generator)
        views = torch.cat([sub["user_view"], fake])
        labels = torch.cat([torch.ones(len(idx)), torch.zeros(len(idx))]).to(views.device)
        return torch.nn.functional.binary_cross_entropy_with_logits(_disc_logits(disc, views, torch.cat([turn, turn])), labels)

    fit(disc, batch_loss, _batches(data["goals"].shape[0], cfg.batch, cfg.steps, generator, _device(disc)), cfg.lr, progress=progress)
    return disc


@torch.no_grad()
def discriminator_accuracy(vocab: Vocab, disc: Transformer, sim, data: dict, generator: torch.Generator) -> float:
    """Held-out accuracy of the realism discriminator (0.5 = the simulator is indistinguishable)."""
    fake, turn = _fake_views(vocab, sim, data, generator)
    real_ok = (_disc_logits(disc, data["user_view"], turn) > 0).float()
    fake_ok = (_disc_logits(disc, fake, turn) <= 0).float()
    return float(torch.cat([real_ok, fake_ok]).mean())


def realism_finetune(vocab: Vocab, sim: Transformer, disc: Transformer, data: dict, cfg: SFTConfig, kl_coef: float,
                     generator: torch.Generator, progress: Callable | None = None) -> Transformer:
    """Second calibration stage: REINFORCE on the simulator's own turns at logged histories with the
    discriminator's log-odds of "real" as reward, plus an exact KL penalty to the SFT simulator."""
    ref = sim

    def batch_loss(sim: Transformer, idx: torch.Tensor) -> torch.Tensor:
        sub = {k: v[idx] for k, v in data.items()}
        logits = user_turn_logits(vocab, sim, sub["user_view"], sub["actions"])
        with torch.no_grad():
            ref_logp = log_probs(user_turn_logits(vocab, ref, sub["user_view"], sub["actions"]))
            fake, turn = _fake_views(vocab, sim.eval(), sub, generator)
            reward = _disc_logits(disc, fake, turn)
        sim.train()
        logp = log_probs(logits)
        rows = torch.arange(len(idx), device=idx.device)
        taken = fake[rows, 3 + 2 * turn] - vocab.user_offset
        return policy_gradient_loss(logp[rows, turn, taken], reward - reward.mean(), None, kl_coef,
                                    dist=logp, ref_dist=ref_logp, kl_mask=sub["turn_mask"]).total

    sim = copy.deepcopy(ref)
    fit(sim, batch_loss, _batches(data["goals"].shape[0], cfg.batch, cfg.steps, generator, _device(sim)), cfg.lr, progress=progress)
    return sim


# ----------------------------------------------------------------------------- agent RL
@dataclass(frozen=True)
class RLConfig:
    """Policy-gradient training of the agent, identical for every paradigm (each field's help says
    what it is). ``static_reward`` is ``"myopic"`` (the judge's immediate reward), ``"one_step"`` (plus
    the logged return-to-go when the sampled act is the logged one) or ``"awr"`` (no sampling:
    advantage-weighted regression on the logged acts by their judged return-to-go, :func:`awr_baseline`)."""

    steps: int = field(default=300, metadata={"help": "policy-gradient steps per arm (the same for all)"})
    goals_per_step: int = field(default=16, metadata={"help": "distinct goals (interactive) or logged contexts (static) per step"})
    group: int = field(default=4, metadata={"help": "samples sharing a goal or context (the group baseline)"})
    lr: float = field(default=1e-3, metadata={"help": "AdamW learning rate"})
    kl_coef: float = field(default=0.05, metadata={"help": "weight of the exact per-turn KL(pi || pi_SFT) penalty"})
    static_reward: str = field(default="myopic", metadata={"help": f"Static Context RL's reward, from {STATIC_REWARDS}"})
    eval_every: int = field(default=50, metadata={"help": "steps between learning-curve evaluations"})
    entropy_coef: float = field(default=0.0, metadata={"help": "entropy bonus weight on the agent's turns (0 = none)"})
    advantage: str = field(default="return", metadata={"help": f"credit of the interactive arms' agent turns, from {ADVANTAGES}: "
                                                               "the dialogue's return or each turn's return-to-go, against "
                                                               "the group's mean"})
    normalise: bool = field(default=False, metadata={"help": "divide advantages by their group's standard deviation (GRPO's scaling)"})

    def __post_init__(self) -> None:
        if self.steps < 0 or self.goals_per_step < 1 or self.group < 2 or self.lr <= 0 or self.kl_coef < 0:
            raise ValueError("RL needs steps >= 0, goals_per_step >= 1, group >= 2, lr > 0, kl_coef >= 0; "
                             f"got {self.steps}, {self.goals_per_step}, {self.group}, {self.lr}, {self.kl_coef}")
        if self.static_reward not in STATIC_REWARDS:
            raise ValueError(f"static_reward must be one of {STATIC_REWARDS}; got {self.static_reward!r}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1; got {self.eval_every}")
        if self.entropy_coef < 0:
            raise ValueError(f"entropy_coef must be >= 0; got {self.entropy_coef}")
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"advantage must be one of {ADVANTAGES}; got {self.advantage!r}")

    @property
    def agent_tokens_per_step(self) -> int:
        """The budget unit: ``goals_per_step * group * H`` agent tokens per step for every paradigm."""
        return self.goals_per_step * self.group


def _static_batch(vocab: Vocab, agent: Transformer, data: dict, cfg: RLConfig, generator: torch.Generator):
    """Logged contexts for Static Context RL: ``goals_per_step * H`` (dialogue, turn) pairs, each
    with ``group`` sampled acts (the same agent-token budget as ``goals_per_step * group`` dialogues)."""
    task = vocab.task
    H = task.horizon
    alive = data["turn_mask"].nonzero()  # [M, 2] (dialogue, turn)
    pick = alive[torch.randint(alive.shape[0], (cfg.goals_per_step * H,), generator=generator).to(alive.device)]
    d, t = pick[:, 0], pick[:, 1]
    return d, t


def awr_baseline(data: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The baseline and scale of advantage-weighted regression on logs: per turn, the mean judged
    return-to-go of the logged dialogues alive at that turn (``[H]``), and the standard deviation
    of ``togo - baseline`` over every alive (dialogue, turn) (floored at 1e-6)."""
    mask = data["turn_mask"].bool()
    togo = data["togo"]
    base = (togo * mask).sum(0) / mask.sum(0).clamp_min(1)
    adv = (togo - base)[mask]
    return base, adv.std(unbiased=False).clamp_min(1e-6) if adv.numel() > 1 else torch.ones(())


def _awr_loss(vocab: Vocab, agent: Transformer, ref: Transformer, logs: dict, cfg: RLConfig, generator: torch.Generator,
              baseline: tuple[float, float]) -> tuple[PolicyGradientLoss, torch.Tensor, torch.Tensor | None]:
    """One AWR batch: the interactive arms' budget in dialogues (``goals_per_step * group`` logged
    dialogues, one forward pass each), every alive turn weighted by its judged return-to-go."""
    d = torch.randint(logs["goals"].shape[0], (cfg.agent_tokens_per_step,), generator=generator).to(_device(agent))
    views, mask = logs["agent_view"][d], logs["turn_mask"][d]
    logp = log_probs(agent_turn_logits(vocab, agent, views))  # [B, H, A]
    with torch.no_grad():
        ref_logp = log_probs(agent_turn_logits(vocab, ref, views))
    weights = awr_weights(logs["togo"][d], *baseline) * mask  # [B, H]
    chosen = gather_tokens(logp, logs["actions"][d].clamp_min(0))
    return policy_gradient_loss(chosen, weights, mask, cfg.kl_coef, dist=logp, ref_dist=ref_logp), logp, mask


def _static_loss(vocab: Vocab, agent: Transformer, ref: Transformer, logs: dict, cfg: RLConfig,
                 generator: torch.Generator) -> tuple[PolicyGradientLoss, torch.Tensor, torch.Tensor | None]:
    """One Static Context RL batch: ``group`` acts sampled at each drawn logged context, paid by the
    judge (``one_step``: the logged return-to-go where the act is the logged one), against the group's mean."""
    d, t = _static_batch(vocab, agent, logs, cfg, generator)
    views = logs["agent_view"][d]
    rows = torch.arange(len(d), device=d.device)
    logits = agent_turn_logits(vocab, agent, views)[rows, t]  # [M, A]
    with torch.no_grad():
        ref_logits = agent_turn_logits(vocab, ref, views)[rows, t]
    logp = log_probs(logits)
    acts = multinomial(logp.exp().repeat_interleave(cfg.group, 0), generator)  # [M*G]
    goal = logs["goals"][d].repeat_interleave(cfg.group)
    reward = judge_reward(vocab.task, acts, goal)
    if cfg.static_reward == "one_step":
        logged = logs["actions"][d, t].repeat_interleave(cfg.group)
        togo = logs["togo"][d, t].repeat_interleave(cfg.group)
        reward = torch.where(acts == logged, togo, reward)
    chosen = gather_tokens(logp.repeat_interleave(cfg.group, 0), acts)
    loss = policy_gradient_loss(chosen, group_advantages(reward, cfg.group, cfg.normalise), None, cfg.kl_coef,
                                dist=logp, ref_dist=log_probs(ref_logits))
    return loss, logp, None


def _interactive_loss(vocab: Vocab, agent: Transformer, ref: Transformer, user: ExplicitUser | NeuralUser, cfg: RLConfig,
                      generator: torch.Generator) -> tuple[PolicyGradientLoss, torch.Tensor, torch.Tensor | None]:
    """One interactive batch: ``group`` dialogues with ``user`` per drawn goal, each agent turn credited
    with the dialogue's return (or its return-to-go) against its group's mean."""
    goals = torch.randint(vocab.task.n_goals, (cfg.goals_per_step,), generator=generator).repeat_interleave(cfg.group)
    ro = rollout(vocab, agent.eval(), user, goals.to(_device(agent)), temperature=1.0, generator=generator)
    agent.train()
    if cfg.advantage == "togo":  # [B, H]: each turn against its group's mean at that turn
        adv = group_advantages(returns_to_go(ro.accept_rewards), cfg.group, cfg.normalise)
    else:  # [B], broadcast over the dialogue's agent tokens
        adv = group_advantages(ro.accept_rewards.sum(1), cfg.group, cfg.normalise)
    logp = log_probs(agent_turn_logits(vocab, agent, ro.agent_view))
    with torch.no_grad():
        ref_logp = log_probs(agent_turn_logits(vocab, ref, ro.agent_view))
    chosen = gather_tokens(logp, ro.actions.clamp_min(0))  # [B, H]
    return policy_gradient_loss(chosen, adv, ro.turn_mask, cfg.kl_coef, dist=logp, ref_dist=ref_logp), logp, ro.turn_mask


def train_agent(vocab: Vocab, sft_agent: Transformer, paradigm: str, cfg: RLConfig, generator: torch.Generator, *,
                logs: dict | None = None, user: ExplicitUser | NeuralUser | None = None,
                evaluate: Callable[[Transformer, int], dict] | None = None,
                progress: Callable | None = None, checkpoint: Path | None = None) -> tuple[Transformer, list[dict]]:
    """RL of the agent from its SFT initialisation; returns the agent and the learning curve
    (``evaluate(agent, step)`` every ``eval_every`` steps, with ``step``, ``agent_tokens`` and the
    mean policy-gradient and KL terms ``pg`` / ``kl`` of the steps since the previous point added; it should draw from a generator of its own, derived from ``step``, so that a resumed
    run's curve equals the uninterrupted one's). Each step is one batch of the paradigm's loss
    (:func:`_awr_loss`, :func:`_static_loss`, :func:`_interactive_loss`), an entropy bonus, and a clipped AdamW step.

    With ``checkpoint``, the agent, optimiser, generator state and curve are saved there
    (atomically) at every evaluation, and a rerun resumes from the last one: a killed run loses
    at most ``eval_every`` steps.
    """
    if paradigm not in PARADIGMS:
        raise ValueError(f"paradigm must be one of {PARADIGMS}; got {paradigm!r}")
    if paradigm == "static" and logs is None:
        raise ValueError("Static Context RL needs logs")
    if paradigm != "static" and user is None:
        raise ValueError(f"{paradigm} RL needs a user simulator")
    agent, ref = copy.deepcopy(sft_agent).train(), sft_agent.eval()
    opt = torch.optim.AdamW(agent.parameters(), lr=cfg.lr, weight_decay=0.0)
    if paradigm == "static" and cfg.static_reward == "awr":
        batch_loss = functools.partial(_awr_loss, vocab, agent, ref, logs, cfg, generator, awr_baseline(logs))
    elif paradigm == "static":
        batch_loss = functools.partial(_static_loss, vocab, agent, ref, logs, cfg, generator)
    else:
        batch_loss = functools.partial(_interactive_loss, vocab, agent, ref, user, cfg, generator)
    curve: list[dict] = []
    window = {"pg": 0.0, "kl": 0.0, "steps": 0}  # loss parts since the last curve point
    start = 0
    if checkpoint is not None and Path(checkpoint).exists():
        blob = torch.load(checkpoint, map_location=_device(agent), weights_only=True)
        agent.load_state_dict(blob["agent"])
        opt.load_state_dict(blob["opt"])
        generator.set_state(blob["generator"].cpu())
        curve, start = blob["curve"], blob["step"] + 1

    def record(step: int) -> None:
        if evaluate is not None:
            parts = {k: window[k] / window["steps"] for k in ("pg", "kl")} if window["steps"] else {}
            curve.append({"step": step, "agent_tokens": step * cfg.agent_tokens_per_step * vocab.task.horizon, **parts,
                          **evaluate(agent.eval(), step)})
            agent.train()
        window.update(pg=0.0, kl=0.0, steps=0)
        if checkpoint is not None:
            atomic_torch_save({"agent": agent.state_dict(), "opt": opt.state_dict(), "generator": generator.get_state(),
                               "curve": curve, "step": step}, checkpoint)

    if start == 0:
        record(0)
        start = 1
    for step in range(start, cfg.steps + 1):
        loss, dist, dist_mask = batch_loss()
        total = loss.total - cfg.entropy_coef * entropy(dist, dist_mask) if cfg.entropy_coef else loss.total
        opt.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
        opt.step()
        window.update(pg=window["pg"] + loss.pg.item(), kl=window["kl"] + loss.kl.item(), steps=window["steps"] + 1)
        if progress:
            progress(step, loss.total.item())
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)
    return agent.eval(), curve
