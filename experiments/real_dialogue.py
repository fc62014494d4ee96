"""Calibrated interactive RL on real human dialogues (Taskmaster-4; Taskmaster-3 for per-turn realism).

``python -m experiments.real_dialogue [--preset smoke|cpu|gpu] [options]``

Stages (each saved under ``--out-dir`` and skipped on a rerun):

1. **data** — Taskmaster-4 dialogues with their goals (the ``add_order_item`` requests), split by
   dialogue into train / calibration / held-out;
2. **reward models** — sequence classifiers on the human reward labels (Taskmaster-4 and -3), with
   held-out accuracy and AUC; the Taskmaster-4 one pays Static Context RL on logged contexts;
3. **user models** — the calibrated simulator (SFT on the train split's human user turns, goal and
   history as input, loss on user tokens only), the "real user" used for evaluation (the same SFT
   on the *held-out* split: a held-out model of human behaviour, since no live humans are
   available), and the prompt-based simulator (the base model prompted with the goal, plus the
   rule-based sycophantic :class:`~shiftbounds.llm.dialogue.RuleUser` with explicit knobs);
4. **realism** — per-turn NLL of held-out human user turns under each user model; on Taskmaster-3
   (long dialogues) NLL and, per simulator, a trained real-vs-simulated discriminator's held-out AUC
   against the turn index (:mod:`shiftbounds.llm.realism`): the real-data view of ``delta_t``;
   **sycophancy** — on Taskmaster-4 histories of the calibration split, how often each user model
   (and the logged people) accepts the right order and an order with one drink swapped, and how
   often its opening turn names the whole goal (:mod:`shiftbounds.llm.sycophancy`);
5. **agent** — SFT on the train split's agent turns, then one policy-gradient algorithm (group
   baseline, KL to SFT) for Static Context RL (logged contexts, reward model), Interactive RL (the
   rule-based prompted simulator) and Calibrated Interactive RL (the calibrated simulator), paid by
   goal success; evaluation: goal success against the held-out user model, and the sim-to-real gap.

The smoke preset runs tiny random models on a handful of dialogues (about a minute on a CPU; its
numbers check the machinery only). The cpu preset is the largest run that fits two CPU cores in
under an hour (byte-level GPT-2 of width 128 and 4 blocks, all Taskmaster-4 dialogues; 53 minutes
measured). The gpu preset documents a 0.5-1.5B run: ``--policy-model`` and
``--user-model`` local folders, bf16, 2000 dialogues, 200 RL steps of 8 goals x 4 rollouts, 256 new
tokens per turn. ``--estimate-only`` prints the device memory each stage needs, from the
model folders' configs, before any weights are loaded (:mod:`shiftbounds.llm.memory`).
"""

from __future__ import annotations

import copy
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from shiftbounds.figures.text import plot_text_realism, plot_text_sycophancy
from shiftbounds.llm.dialogue import RuleUser, dialogue_pg_loss, roll_out_batch, user_prompt
from shiftbounds.llm.distributed import all_mean, init_from_env, shard, wrap
from shiftbounds.llm.memory import Stage, estimate, format_estimate, model_shape
from shiftbounds.llm.models import ByteTokenizer, TinyLM, check_model_folder, load_causal_lm, tiny_config
from shiftbounds.llm.realism import TURN_BUCKETS, discriminator_auc_by_turn, discriminator_auc_ci, turn_bucket
from shiftbounds.llm.sampling import sample_batch
from shiftbounds.llm.sycophancy import confirmation_probes, disclosure_probes, sycophancy_metrics
from shiftbounds.llm.taskmaster import (
    ROLE_TOKENS,
    load_reward_labels,
    load_tm4,
    render_tm4,
    split_by_dialogue,
    user_turn_examples,
)
from shiftbounds.llm.training import (
    RewardModel,
    classifier_scores,
    fit,
    fit_classifier,
    make_batch,
    per_example_nll,
    span_nll,
)
from shiftbounds.losses import group_advantages, policy_gradient_loss, token_log_probs
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import (
    atomic_torch_save,
    atomic_write_text,
    guard_resume,
    markdown_table,
    read_json,
    write_csv,
    write_json,
)
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng, torch_generator
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import roc_auc


@dataclass(frozen=True)
class RealDialogueConfig:
    """Options of ``experiments.real_dialogue``."""

    data_dir: str = field(default="", metadata={"help": "folder holding taskmaster4/ and taskmaster3/ (default: ../shared/data)"})
    policy_model: str = field(default="", metadata={"help": "local agent model folder (empty: tiny model from a config)"})
    user_model: str = field(default="", metadata={"help": "local user-model folder (empty: tiny model from a config)"})
    n_dialogues: int = field(default=2760, metadata={"help": "Taskmaster-4 dialogues used"})
    n_labels: int = field(default=0, metadata={"help": "reward labels per corpus (0: all; 3,228 on Taskmaster-4, 3,667 on Taskmaster-3)"})
    n_tm3_turns: int = field(default=14759, metadata={"help": "Taskmaster-3 user turns for per-turn realism"})
    max_len: int = field(default=512, metadata={"help": "tokens per training sequence"})
    sft_steps: int = field(default=200, metadata={"help": "SFT steps (agent and user models)"})
    classifier_steps: int = field(default=200, metadata={"help": "steps of each reward model and discriminator"})
    batch: int = field(default=8, metadata={"help": "sequences per step"})
    lr: float = field(default=1e-3, metadata={"help": "learning rate (SFT, reward models)"})
    rl_steps: int = field(default=20, metadata={"help": "policy-gradient steps per paradigm"})
    goals_per_step: int = field(default=2, metadata={"help": "goals per RL step"})
    group: int = field(default=2, metadata={"help": "rollouts per goal (group baseline)"})
    rl_lr: float = field(default=1e-4, metadata={"help": "RL learning rate"})
    kl_coef: float = field(default=0.05, metadata={"help": "KL to the SFT agent"})
    turns: int = field(default=3, metadata={"help": "user+agent rounds per rollout"})
    max_new: int = field(default=64, metadata={"help": "new tokens per turn"})
    n_eval: int = field(default=16, metadata={"help": "goals per evaluation"})
    n_probe: int = field(default=200, metadata={"help": "calibration dialogues probed for sycophancy and disclosure"})
    n_disc: int = field(default=1000, metadata={"help": "Taskmaster-3 user turns per discriminator (train; as many held out)"})
    gen_batch: int = field(default=32, metadata={"help": "rows per batched sampling call"})
    accept_wrong: float = field(default=0.3, metadata={"help": "rule-based prompted simulator: accept-wrong rate"})
    leak: float = field(default=0.2, metadata={"help": "rule-based prompted simulator: leak rate"})
    d_model: int = field(default=64, metadata={"help": "tiny model width"})
    n_layer: int = field(default=2, metadata={"help": "tiny model depth"})
    device: str = field(default="auto", metadata={"help": "auto, cpu or cuda", "resume": False})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "recompute activations in the backward pass (less memory)", "resume": False})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/real_dialogue/default", metadata={"help": "results folder", "resume": False})
    estimate_only: bool = field(default=False, metadata={"help": "print the device-memory estimate and exit (loads no weights)", "resume": False})

    def __post_init__(self) -> None:
        check_model_folder(self.policy_model, "--policy-model")
        check_model_folder(self.user_model, "--user-model")
        if self.n_labels < 0:
            raise ValueError(f"--n-labels must be >= 0 (0: all); got {self.n_labels}")
        for k in ("n_dialogues", "n_tm3_turns", "sft_steps", "classifier_steps", "batch", "rl_steps", "goals_per_step", "turns",
                  "max_new", "n_eval", "n_probe", "n_disc", "gen_batch"):
            if getattr(self, k) < 1:
                raise ValueError(f"--{k.replace('_', '-')} must be >= 1; got {getattr(self, k)}")
        if self.max_len - self.max_new < 16:
            raise ValueError(f"--max-len ({self.max_len}) must exceed --max-new ({self.max_new}) by at least 16 tokens of context")
        if self.group < 2:
            raise ValueError(f"--group must be >= 2 (group baseline); got {self.group}")
        if not (0 <= self.accept_wrong <= 1 and 0 <= self.leak <= 1):
            raise ValueError(f"--accept-wrong and --leak must lie in [0, 1]; got {self.accept_wrong}, {self.leak}")


PRESETS = {
    "smoke": {"n_dialogues": 40, "n_labels": 64, "n_tm3_turns": 64, "max_len": 256, "sft_steps": 4, "classifier_steps": 4, "batch": 4,
              "rl_steps": 2, "goals_per_step": 1, "group": 2, "turns": 2, "max_new": 24, "n_eval": 3, "d_model": 32,
              "n_layer": 1, "n_probe": 4, "n_disc": 8, "gen_batch": 8},
    "cpu": {"max_len": 384, "d_model": 128, "n_layer": 4, "batch": 16, "lr": 2e-3, "sft_steps": 800, "classifier_steps": 200,
            "n_tm3_turns": 4000, "rl_steps": 40, "goals_per_step": 4, "group": 4, "turns": 2, "max_new": 192, "n_eval": 64,
            "n_probe": 552, "n_disc": 300, "gen_batch": 64},
    "gpu": {"n_dialogues": 2000, "max_len": 1024, "sft_steps": 2000, "classifier_steps": 1000, "batch": 16, "lr": 2e-5, "rl_steps": 200,
            "goals_per_step": 8, "group": 4, "turns": 4, "max_new": 256, "n_eval": 200, "rl_lr": 1e-6,
            "n_probe": 552, "n_disc": 2000, "gen_batch": 64, "gradient_checkpointing": True},
}


def _spec(cfg: RealDialogueConfig) -> TinyLM:
    return TinyLM("gpt2", cfg.d_model, cfg.n_layer, 4, max(1024, cfg.max_len))


def memory_estimate(cfg: RealDialogueConfig) -> dict:
    """Device memory per stage for one process (:mod:`shiftbounds.llm.memory`), from the model
    folders' configs (or the tiny models'), counting the models each stage keeps resident."""
    tiny = tiny_config(_spec(cfg), ByteTokenizer(ROLE_TOKENS).vocab_size)
    pol, usr = (model_shape(path or tiny) for path in (cfg.policy_model, cfg.user_model))
    ck, rl = cfg.gradient_checkpointing, cfg.goals_per_step * cfg.group
    gen = max((pol, usr), key=lambda m: m.n_layer * m.kv_dim)
    train = dict(train_batch=cfg.batch, train_len=cfg.max_len, checkpointing=ck)
    return estimate([
        Stage("reward models", (pol,), pol, **train),
        Stage("user-model SFT", (pol, usr, usr, usr), usr, **train),
        Stage("discriminators", (pol,) + (usr,) * 4, usr, gen=usr, gen_batch=cfg.batch, gen_len=cfg.max_len, **train),
        Stage("sycophancy probes", (pol,) + (usr,) * 4, gen=usr, gen_batch=cfg.gen_batch, gen_len=cfg.max_len),
        Stage("agent SFT", (pol,) + (usr,) * 4, pol, **train),
        Stage("RL (policy, reference, reward model, 4 user models)", (pol, pol) + (usr,) * 4, pol, train_batch=rl,
              train_len=cfg.max_len, gen=gen, gen_batch=max(rl, cfg.gen_batch), gen_len=cfg.max_len, checkpointing=ck),
    ])


def _lm(path: str, cfg: RealDialogueConfig, seed: int):
    return load_causal_lm(path or None, _spec(cfg),
                          special_tokens=ROLE_TOKENS, device=cfg.device,
                          gradient_checkpointing=cfg.gradient_checkpointing, seed=seed)


def _pairs_agent(dialogues) -> list[tuple[str, str]]:
    """``(history, agent turn)`` with the API calls that precede the agent's text."""
    out = []
    for d in dialogues:
        for i, (role, text) in enumerate(d.turns):
            if role == "agent" and i > 0:
                full_prev = render_tm4(d, upto=i)
                ctx = render_tm4(d, upto=i - 1) + f"<{d.turns[i - 1][0]}>{d.turns[i - 1][1]}"
                out.append((ctx, full_prev[len(ctx):] + f"<agent>{text}"))
    return out


def _pairs_user(dialogues) -> list[tuple[str, str, int]]:
    """``(goal + history, user turn, turn index)`` for every human user turn."""
    out = []
    for d in dialogues:
        for i, (role, text) in enumerate(d.turns):
            if role == "user":
                out.append((user_prompt(d.goal, render_tm4(d, upto=i)), f"<user>{text}", i))
    return out


def _sft(model, tok, pairs, cfg, dev, label: str = "sft", *, rng: np.random.Generator):
    """SFT for ``cfg.sft_steps`` steps, with per-step progress (and ETA) on the main process."""
    prog = Progress(cfg.sft_steps, f"real_dialogue {label}", min_interval=10.0, enabled=init_from_env().is_main)

    def batches():
        for _ in range(cfg.sft_steps):
            yield make_batch(tok, [pairs[j][:2] for j in rng.integers(len(pairs), size=cfg.batch)], cfg.max_len).to(dev)
            prog.update()

    fit(model, span_nll, batches(), cfg.lr)
    return model.eval()


def _nll_by_turn(model, tok, pairs, cfg, dev) -> dict:
    out: dict[int, list[float]] = {}
    for j in range(0, len(pairs), cfg.batch):
        chunk = pairs[j: j + cfg.batch]
        nll = per_example_nll(model, make_batch(tok, [p[:2] for p in chunk], cfg.max_len).to(dev)).tolist()
        for (_, _, turn), v in zip(chunk, nll):
            out.setdefault(turn, []).append(v)
    return out


def reward_model_stage(corpus: str, cfg: RealDialogueConfig, *, rng: np.random.Generator) -> tuple[dict, RewardModel]:
    """Train a reward model on 80 % of the labels (split by conversation); held-out accuracy and AUC."""
    labels = load_reward_labels(corpus, cfg.data_dir or None, cfg.n_labels or None)
    ids = sorted({x.dialogue_id for x in labels})
    held = set(rng.permutation(ids)[: max(1, len(ids) // 5)].tolist())
    train = [x for x in labels if x.dialogue_id not in held]
    test = [x for x in labels if x.dialogue_id in held]
    lm, tok, dev = _lm(cfg.policy_model, cfg, cfg.seed + 11)
    rm = RewardModel(lm).to(dev)
    kw = dict(batch=cfg.batch, max_len=cfg.max_len, device=dev)
    fit_classifier(rm, tok, [(x.context, x.generation, x.reward) for x in train], steps=cfg.classifier_steps, lr=cfg.lr, rng=rng, **kw)
    scores = classifier_scores(rm, tok, [(x.context, x.generation, x.reward) for x in test], **kw).numpy()
    ys = np.array([x.reward for x in test])
    auc = roc_auc(scores, ys) if 0 < ys.sum() < len(ys) else float("nan")
    return ({"corpus": corpus, "train_labels": len(train), "held_out_labels": len(test),
             "accuracy": float(((scores > 0) == (ys > 0.5)).mean()), "majority_baseline": float(max(ys.mean(), 1 - ys.mean())),
             "auc": auc}, rm)


def _load_state(template, path: Path):
    m = template()
    m.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return m


def _save_state(model, path: Path) -> None:
    atomic_torch_save(model.state_dict(), path)


def run(cfg: RealDialogueConfig, stream=sys.stderr) -> dict:
    """Run (resuming finished stages), write every output, return the results dict."""
    info = init_from_env()
    out = Path(cfg.out_dir)
    st = StageCache(out / "stages", save=info.is_main)  # a finished stage is loaded, not rerun
    stage_rng = lambda *key: numpy_rng(cfg.seed, *key)  # noqa: E731 - one generator per stage key
    stage_gen = lambda *key: torch_generator(cfg.seed, *key)  # noqa: E731

    def model_stage(name: str, template, make):
        return st.torch(name, make, load=lambda path: _load_state(template, path), save=_save_state).eval()

    memory = memory_estimate(cfg)
    if info.is_main:
        guard_resume(out, cfg)
        print(f"[real_dialogue] estimated device memory per process: {memory['peak_gib']:.2f} GiB ({memory['peak_stage']})",
              file=stream)
    prog = Progress(9, "real_dialogue", stream=stream, enabled=info.is_main)
    # 1. data
    dialogues = load_tm4(cfg.data_dir or None, cfg.n_dialogues)
    train, calib, held = split_by_dialogue(dialogues, rng=stage_rng(1))
    prog.update(note=f"{len(dialogues)} Taskmaster-4 dialogues: {len(train)}/{len(calib)}/{len(held)}")
    # 2. reward models
    rms, reward_model = {}, None
    for i, corpus in enumerate(("taskmaster4", "taskmaster3")):
        path = st.folder / f"reward_{corpus}.pt"
        if path.exists() and (st.folder / f"reward_{corpus}.json").exists():
            rms[corpus] = read_json(st.folder / f"reward_{corpus}.json")
            rm = RewardModel(_lm(cfg.policy_model, cfg, cfg.seed + 11)[0])
            rm.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        else:
            rms[corpus], rm = reward_model_stage(corpus, cfg, rng=stage_rng(2, i))
            if info.is_main:
                write_json(st.folder / f"reward_{corpus}.json", rms[corpus])
                atomic_torch_save(rm.state_dict(), path)
        if corpus == "taskmaster4":
            reward_model = rm.eval()
    del rm  # only the Taskmaster-4 reward model stays resident (it pays Static Context RL)
    prog.update(note="reward models")
    # 3. user models
    base, tok, dev = _lm(cfg.user_model, cfg, cfg.seed + 1)
    base.eval()
    fresh_user = lambda: _lm(cfg.user_model, cfg, cfg.seed + 1)[0]  # noqa: E731
    calibrated = model_stage("user_calibrated", fresh_user, lambda: _sft(copy.deepcopy(base), tok, _pairs_user(train), cfg, dev, "user_calibrated", rng=stage_rng(3)))
    real_model = model_stage("user_heldout", fresh_user, lambda: _sft(copy.deepcopy(base), tok, _pairs_user(held), cfg, dev, "user_heldout", rng=stage_rng(4)))
    prog.update(note="user models")
    # 4. realism on held-out human user turns (the calibration split: unseen by both user models)
    tm3 = user_turn_examples("taskmaster3", cfg.data_dir or None, cfg.n_tm3_turns)
    tm3_train, _, tm3_held = split_by_dialogue(tm3, rng=stage_rng(5))
    tm3_cal = model_stage("user_calibrated_tm3", fresh_user, lambda: _sft(copy.deepcopy(base), tok, tm3_train, cfg, dev, "user_calibrated_tm3", rng=stage_rng(6)))

    def realism_stage() -> dict:
        eval_pairs = _pairs_user(calib)
        tm4 = {}
        for name, model in (("prompted (base model)", base), ("calibrated (SFT on train)", calibrated)):
            by_turn = _nll_by_turn(model, tok, eval_pairs, cfg, dev)
            tm4[name] = {"nll": float(np.mean([v for vs in by_turn.values() for v in vs])),
                         "nll_by_turn": {str(k): float(np.mean(v)) for k, v in sorted(by_turn.items())}}
        tm3_nll = {}
        for name, model in (("prompted (base model)", base), ("calibrated (SFT on TM-3 train)", tm3_cal)):
            agg: dict[str, list[float]] = {}
            for t, vs in _nll_by_turn(model, tok, tm3_held, cfg, dev).items():
                agg.setdefault(turn_bucket(t), []).extend(vs)
            tm3_nll[name] = {b: float(np.mean(agg[b])) for b in TURN_BUCKETS if b in agg}
        return {"tm4": tm4, "tm3": tm3_nll}

    def discriminator_stage() -> dict:
        """Real-vs-simulated classifiers on Taskmaster-3, one per simulator, AUC by turn index."""
        make = lambda: RewardModel(_lm(cfg.user_model, cfg, cfg.seed + 13)[0]).to(dev)  # noqa: E731
        d_train = [tm3_train[j] for j in stage_rng(9, 0).permutation(len(tm3_train))[: cfg.n_disc]]
        d_held = tm3_held[: cfg.n_disc]
        return {name: discriminator_auc_by_turn(make, sim, tok, d_train, d_held, steps=cfg.classifier_steps, batch=cfg.batch,
                                                lr=cfg.lr, max_len=cfg.max_len, max_new=cfg.max_new,
                                                generator=stage_gen(9, i + 1), rng=stage_rng(9, i + 1), device=dev)
                for i, (name, sim) in enumerate((("prompted (base model)", base), ("calibrated (SFT on TM-3 train)", tm3_cal)))}

    def sycophancy_stage() -> dict:
        """Confirmation and disclosure probes on the calibration split (unseen by every user model)."""
        probes = calib[: cfg.n_probe]
        right, wrong = confirmation_probes(probes, rng=stage_rng(10, 0))
        disc = disclosure_probes(probes)
        who = (("people (logged replies)", None), ("prompted (rule-based)", RuleUser(cfg.accept_wrong, cfg.leak)),
               ("prompted (base model)", base), ("calibrated (SFT on train)", calibrated),
               ("held-out user model", real_model))
        return {name: sycophancy_metrics(u, tok, right, wrong, disc, batch=cfg.gen_batch, max_new=cfg.max_new,
                                         generator=stage_gen(10, i + 1), rng=stage_rng(10, i + 1),
                                         max_context=cfg.max_len - cfg.max_new)
                for i, (name, u) in enumerate(who)}

    realism = st.json("realism", realism_stage)
    discriminator = st.json("discriminator", discriminator_stage)
    sycophancy = st.json("sycophancy", sycophancy_stage)
    prog.update(note="realism, discriminators, sycophancy")
    # 5. agent: SFT, then the three paradigms (goals sharded over ranks, DDP-averaged gradients)
    agent_tmpl = lambda: _lm(cfg.policy_model, cfg, cfg.seed + 2)[0]  # noqa: E731
    _, atok, adev = _lm(cfg.policy_model, cfg, cfg.seed + 2)
    agent0 = model_stage("agent_sft", agent_tmpl, lambda: _sft(agent_tmpl(), atok, _pairs_agent(train), cfg, adev, "agent_sft", rng=stage_rng(7)))
    prog.update(note="SFT agent")
    goals = [d.goal for d in train]
    eval_goals = shard([d.goal for d in held][: cfg.n_eval], info)
    users = {"interactive": RuleUser(cfg.accept_wrong, cfg.leak), "calibrated": calibrated}
    user_id = atok.encode("<user>")[0]

    def success_vs(policy, user, key: int) -> float:
        """Goal success over the evaluation goals (the same random numbers for every agent)."""
        vals = [d.success for j in range(0, len(eval_goals), cfg.gen_batch)
                for d in roll_out_batch(policy, atok, eval_goals[j: j + cfg.gen_batch], user, turns=cfg.turns,
                                        max_new=cfg.max_new, temperature=1.0, generator=stage_gen(11, key, j),
                                        rng=stage_rng(11, key, j), max_context=cfg.max_len - cfg.max_new)]
        return all_mean(float(np.mean(vals)) if vals else 0.0, info)

    # the shared starting point of the paradigms, for reference
    sft_agent = st.json("agent_sft_eval", lambda: {"success_vs_heldout_user_model": success_vs(agent0, real_model, 0)})
    results_p, curves = {}, []
    for p_idx, paradigm in enumerate(("static", "interactive", "calibrated")):
        cached = st.folder / f"paradigm_{paradigm}.json"
        if cached.exists():
            saved = read_json(cached)
            results_p[paradigm], curves = saved["result"], curves + saved["curve"]
            prog.update(note=f"RL {paradigm} (resumed)")
            continue
        rng, pgen = stage_rng(8, p_idx), stage_gen(8, p_idx)
        policy = copy.deepcopy(agent0).train()
        net = wrap(policy, info)
        opt = torch.optim.AdamW(net.parameters(), lr=cfg.rl_lr, weight_decay=0.0)
        curve = []
        rl_prog = Progress(cfg.rl_steps, f"real_dialogue rl_{paradigm}", min_interval=10.0, enabled=info.is_main)
        for step in range(cfg.rl_steps):
            rl_prog.update(note=f"step {step + 1}")
            # ---------------------------------------------------------------- ALGO LOGIC
            if paradigm == "static":
                pairs = _pairs_agent([train[j] for j in rng.integers(len(train), size=cfg.goals_per_step)])[: cfg.goals_per_step]
                ctxs = [c for c, _ in shard(pairs, info) for _ in range(cfg.group)]
                policy.eval()
                rows = sample_batch(policy, [[atok.bos_token_id] + atok.encode(c) for c in ctxs], cfg.max_new,
                                    stop_ids=[user_id, atok.eos_token_id], pad_id=atok.pad_token_id, temperature=1.0,
                                    generator=pgen, max_context=cfg.max_len - cfg.max_new)
                gens = [atok.decode([x for x in r if x not in (user_id, atok.eos_token_id)]) for r in rows]
                policy.train()
                b = make_batch(atok, list(zip(ctxs, gens)), cfg.max_len).to(adev)
                with torch.no_grad():
                    reward = torch.sigmoid(reward_model(b.input_ids, b.attention_mask))
                    ref = token_log_probs(agent0(input_ids=b.input_ids, attention_mask=b.attention_mask).logits,
                                          b.input_ids, shift=True)
                logp = token_log_probs(net(input_ids=b.input_ids, attention_mask=b.attention_mask).logits, b.input_ids,
                                       shift=True)
                loss = policy_gradient_loss(logp, group_advantages(reward, cfg.group), b.target_mask, cfg.kl_coef,
                                            ref_log_probs=ref)
            else:
                chosen = shard([goals[j] for j in rng.integers(len(goals), size=cfg.goals_per_step)], info)
                policy.eval()
                rolls = roll_out_batch(policy, atok, [g for g in chosen for _ in range(cfg.group)], users[paradigm],
                                       turns=cfg.turns, max_new=cfg.max_new, temperature=1.0, generator=pgen, rng=rng,
                                       max_context=cfg.max_len - cfg.max_new)
                policy.train()
                reward = torch.tensor([r.success for r in rolls], dtype=torch.float)
                loss = dialogue_pg_loss(net, agent0, rolls, reward, cfg.group, cfg.kl_coef, atok.pad_token_id)
            # ---------------------------------------------------------------- end ALGO LOGIC
            opt.zero_grad()
            loss.total.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            curve.append({"paradigm": paradigm, "step": step, **{k: all_mean(v, info) for k, v in loss.parts().items()},
                          "mean_reward": all_mean(float(reward.mean()), info)})
        policy.eval()

        res = {"success_vs_heldout_user_model": success_vs(policy, real_model, 0)}
        if paradigm in users:
            res["success_vs_training_simulator"] = success_vs(policy, users[paradigm], 1 + list(users).index(paradigm))
            res["sim_to_real_gap"] = res["success_vs_training_simulator"] - res["success_vs_heldout_user_model"]
        results_p[paradigm] = res
        curves += curve
        if info.is_main:
            write_json(cached, {"result": res, "curve": curve})
        prog.update(note=f"RL {paradigm}")
    results = {"config": asdict(cfg), "splits": {"train": len(train), "calibration": len(calib), "held_out": len(held)},
               "reward_models": rms, "realism_tm4": realism["tm4"], "realism_tm3_by_turn": realism["tm3"],
               "discriminator_auc_tm3": discriminator, "sycophancy_tm4": sycophancy, "sft_agent": sft_agent,
               "paradigms": results_p, "memory_estimate": memory,
               "note": "The 'real user' is a user model trained on the held-out split of human dialogues "
                       "(cross-simulator evaluation); no live humans were involved."}
    if info.is_main:
        write_outputs(out, cfg, results, curves)
    prog.update(note="done")
    return results


def write_outputs(out: Path, cfg: RealDialogueConfig, results: dict, curves: list[dict]) -> None:
    """``results.json``, ``results.md``, ``config.json``, ``per_turn.csv`` (realism by turn index),
    ``curves.csv`` (RL loss, its policy-gradient and KL parts, and reward per step) and ``realism_by_turn.{png,pdf}``, as the full pipeline."""
    write_json(out / "results.json", results)
    disc = results["discriminator_auc_tm3"]
    ci = {name: {b: discriminator_auc_ci(d, b) for b in d["by_turn"]} for name, d in disc.items()}
    per_turn = [{"corpus": "taskmaster3", "user_model": name, "turns": b, "nll_per_token": v,
                 **({"discriminator_auc": e.value, "discriminator_auc_low": e.low, "discriminator_auc_high": e.high}
                    if (e := ci.get(name, {}).get(b)) else {})}
                for name, by in results["realism_tm3_by_turn"].items() for b, v in by.items()]
    per_turn += [{"corpus": "taskmaster4", "user_model": name, "turns": t, "nll_per_token": v}
                 for name, r in results["realism_tm4"].items() for t, v in r["nll_by_turn"].items()]
    write_csv(out / "per_turn.csv", per_turn)
    write_csv(out / "curves.csv", curves or [{"paradigm": "", "step": 0}])
    rm_rows = list(results["reward_models"].values())
    par_rows = [{"paradigm": "SFT agent (before RL)", **results["sft_agent"]}]
    par_rows += [{"paradigm": p, **r} for p, r in results["paradigms"].items()]
    syc_rows = [{"user model": k, **{c: v[c] for c in ("accept_right", "accept_wrong", "discrimination", "goal_disclosure")}}
                for k, v in results["sycophancy_tm4"].items()]
    disc_rows = [{"simulator": k, "overall": v["overall"], **{b: str(e) if e else None for b, e in ci[k].items()}}
                 for k, v in disc.items()]
    md = ("# Real dialogues (Taskmaster-4 / Taskmaster-3)\n\n" + results["note"] + "\n\n## Reward models (held-out labels)\n\n"
          + markdown_table(rm_rows) + "\n## Simulator realism on held-out human user turns (Taskmaster-4, NLL per token)\n\n"
          + markdown_table([{"user model": k, "nll": v["nll"]} for k, v in results["realism_tm4"].items()])
          + "\n## Sycophancy and disclosure (Taskmaster-4 calibration split)\n\n"
          "Shares of replies that accept the right order / an order with one drink swapped, their difference, and "
          "opening turns that name the whole goal.\n\n" + markdown_table(syc_rows)
          + "\n## Taskmaster-3: NLL of held-out human user turns by turn index\n\n"
          + markdown_table([{"user model": k, **v} for k, v in results["realism_tm3_by_turn"].items()])
          + "\n## Taskmaster-3: real-vs-simulated discriminator AUC by turn index (0.5: indistinguishable)\n\n"
          "Held-out AUC [95 % Hanley-McNeil interval] per bucket of turn indices.\n\n"
          + markdown_table(disc_rows)
          + "\n## Paradigms (goal success)\n\n"
          + markdown_table(par_rows, ["paradigm", "success_vs_heldout_user_model", "success_vs_training_simulator", "sim_to_real_gap"]))
    atomic_write_text(out / "results.md", md)
    plot_text_realism(results, out / "realism_by_turn")
    plot_text_sycophancy(results, out / "sycophancy")


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(RealDialogueConfig, __doc__, {"default": {}, **PRESETS}, argv, name="experiments.real_dialogue")
    if cfg.estimate_only:
        est = memory_estimate(cfg)
        print(format_estimate(est))
        return est
    results = exit_on_stale(run, cfg)
    print(Path(cfg.out_dir, "results.md").read_text() if Path(cfg.out_dir, "results.md").exists() else results)
    return results


if __name__ == "__main__":
    main()
