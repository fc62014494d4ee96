"""The Taskmaster study's run (``experiments.real_dialogue``): its configuration, the graph of its
stages (base models, user models, agents, measurements, RL arms, evaluations) and the stages
themselves, each computed from the stages it needs or loaded where saved (in one process or one
worker per stage), and its device-memory estimate."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from transformers import GPT2Config

from shiftbounds.conversations import taskmaster_study as study
from shiftbounds.conversations.calibration import CalibrationConfig, TrainingConfig, calibrate, sft_agent
from shiftbounds.conversations.measures import logged_confirmations
from shiftbounds.conversations.paradigms import SYSTEM, ParadigmConfig
from shiftbounds.conversations.records import Conversation
from shiftbounds.conversations.simulators import VIEWS
from shiftbounds.conversations.taskmaster_study import ARMS, EVAL_USERS, PAPER_ARMS
from shiftbounds.conversations.tasks import (
    load_taskmaster,
    taskmaster4_judge,
)
from shiftbounds.utils.configs import component
from shiftbounds.utils.memory import Stage, estimate, model_shape
from shiftbounds.utils.seeding import numpy_rng, trainer_seed
from shiftbounds.utils.stages import StageCache


@dataclass(frozen=True)
class RealDialogueConfig:
    """Options of ``experiments.real_dialogue``."""

    data_dir: str = field(default="", metadata={"help": "folder holding taskmaster4/ and taskmaster3/ (default: ../shared/data)"})
    base_model: str = field(default="", metadata={"help": "local chat-model folder to start from (empty: a corpus-made tiny model)"})
    n_dialogues: int = field(default=0, metadata={"help": "Taskmaster-4 dialogues (0: all 2,760)"})
    n_tm3: int = field(default=0, metadata={"help": "Taskmaster-3 dialogues (0: all)"})
    vocab_size: int = field(default=3000, metadata={"help": "tokenizer vocabulary of the corpus-made model"})
    d_model: int = field(default=128, metadata={"help": "width of the corpus-made model"})
    n_layer: int = field(default=4, metadata={"help": "blocks of the corpus-made model"})
    max_len: int = field(default=256, metadata={"help": "tokens per training sequence (Taskmaster-4 dialogues: 179 median, 268 at the 99th percentile)"})
    pretrain_steps: int = field(default=1000, metadata={"help": "pretraining steps of the corpus-made model"})
    goal_annotated: bool = field(default=True, metadata={"help": "pretrain also on each Taskmaster-4 train dialogue led by its "
                                                                "user's goal (a header unlike the persona prompt)"})
    user_view: str = field(default="as_user", metadata={"earlier": "flipped", "help": "how the LM user models read the dialogue: as_user (the roles as "
                                                          "logged, the model speaks in the customer's slot) or flipped "
                                                          "(the customer as the chat model's assistant)"})
    independent_vocab_size: int = field(default=2000, metadata={"help": "independent evaluator's base: tokenizer vocabulary"})
    independent_d_model: int = field(default=192, metadata={"help": "independent evaluator's base: width"})
    independent_n_layer: int = field(default=2, metadata={"help": "independent evaluator's base: blocks"})
    independent_pretrain_steps: int = field(default=600, metadata={"help": "independent evaluator's base: pretraining steps (on the "
                                                                            "calibration and held-out splits and Taskmaster-3)"})
    sft_steps: int = field(default=500, metadata={"help": "agent SFT steps"})
    user_steps: int = field(default=500, metadata={"help": "SFT steps of each user model"})
    batch: int = field(default=16, metadata={"help": "sequences per pretraining / SFT step"})
    lr: float = field(default=2e-3, metadata={"help": "pretraining learning rate"})
    sft_lr: float = field(default=5e-4, metadata={"help": "SFT learning rate (agent and user models)"})
    rl: ParadigmConfig = component(
        ParadigmConfig(steps=40, batch=8, num_generations=4, lr=1e-4, max_turns=2, max_new_tokens=192, system=SYSTEM, user_first=True),
        "GRPO, one configuration for every arm (its seed is the arm's; Taskmaster-4 dialogues: the order turn, then the "
        "goodbye; an order turn with its API calls takes 120 tokens at the median, 165 at the 90th percentile)",
        flat={"steps": "rl_steps", "batch": "rl_batch", "num_generations": "num_generations", "lr": "rl_lr", "beta": "beta",
              "lora_rank": "lora_rank", "credit_weight": "credit_weight", "temperature": "rl_temperature", "max_turns": "turns",
              "max_new_tokens": "max_new"},
        earlier={"lora_rank": 0}, interleave={"lora_rank": "persona"})
    persona: str = field(default="", metadata={"earlier": "", "help": "the prompted user's persona, with {goal} (empty: the package's default)"})
    user_new: int = field(default=48, metadata={"help": "tokens per simulated user turn"})
    user_temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the LM user models (0: greedy)"})
    sim_temperature: float | None = field(default=None, metadata={"help": "sampling temperature of the LM training simulators in "
                                                                          "GRPO rollouts (empty: --user-temperature; every "
                                                                          "evaluation samples at --user-temperature)"})
    eval_temperature: float = field(default=0.0, metadata={"help": "agent temperature at evaluation (0: greedy)"})
    curve_every: int = field(default=0, metadata={"earlier": 0, "help": "every this many GRPO steps (and at step 0), the agent's goal success "
                                                          "against its training simulator on the evaluation goals, as the "
                                                          "evaluation measures it (0: none)"})
    curve_users: tuple[str, ...] = field(default=(), metadata={"earlier": (), "help": "evaluation users the checkpoints also meet (with "
                                                                       "--curve-every; e.g. held-out user model): where "
                                                                       "the sim-to-real gap opens during training"})
    n_eval: int = field(default=128, metadata={"help": "goals per evaluation"})
    eval_split: str = field(default="held-out", metadata={"help": "split the evaluation goals come from: held-out, or calibration "
                                                                  "for development runs (choosing settings without the held-out goals)"})
    rl_split: str = field(default="train", metadata={"earlier": "train", "help": "split whose dialogues (goals, and logged openings for the arms that "
                                                              "open with them) RL trains on: train (the split the SFT agent and the "
                                                              "calibrated simulator learned from), or calibration (requests no agent or "
                                                              "simulator was trained on; with --eval-split calibration, the dialogues "
                                                              "after the evaluation goals)"})
    seeds: tuple[int, ...] = field(default=(0, 1, 2, 3, 4), metadata={
        "help": "RL and evaluation seeds (paired across arms; each seed's stages are its own, so seeds can be added to a saved run)",
        "resume": False})
    arms: tuple[str, ...] = field(default=PAPER_ARMS, metadata={
        "help": f"RL arms to train and tabulate (any of {', '.join(ARMS)}; default: the paper's {', '.join(PAPER_ARMS)}; "
                "empty: the SFT agent and the measurements only)",
        "resume": False})
    n_probe: int = field(default=552, metadata={"help": "calibration dialogues probed for sycophancy and disclosure"})
    n_disc: int = field(default=300, metadata={"help": "Taskmaster-3 user turns per discriminator split"})
    classifier_steps: int = field(default=200, metadata={"help": "steps of each discriminator"})
    accept_wrong: float = field(default=0.3, metadata={"help": "rule-based simulator: accept-wrong rate"})
    leak: float = field(default=0.2, metadata={"help": "rule-based simulator: leak rate"})
    seed: int = field(default=0, metadata={"help": "seed of the splits, the models' initialisation and the measurements"})
    one_thread: bool = field(default=True, metadata={"earlier": False, "help": "compute every stage on one torch thread, in --workers processes, so that "
                                                               "the outputs are the same bytes whatever --threads and --workers (off: "
                                                               "in this process on --threads, as runs made before this option)"})
    workers: int = field(default=0, metadata={"help": "processes computing independent stages (0: every core)", "resume": False})
    out_dir: str = field(default="results/real_dialogue/default", metadata={"help": "results folder", "resume": False})
    estimate_only: bool = field(default=False, metadata={"help": "print the device-memory estimate and exit (loads no weights)", "resume": False})
    retabulate: bool = field(default=False, metadata={"help": "recompute the tables of --out-dir from its results.json (per-seed successes and measurements) after a change to the statistics; runs no stage", "resume": False})

    def __post_init__(self) -> None:
        if self.base_model and not (Path(self.base_model) / "config.json").is_file():
            raise ValueError(f"--base-model must be a local model folder (with config.json); got {self.base_model!r} "
                             "(SmolLM2-135M-Instruct: `shiftbounds base-model` prints where it put it)")
        if self.persona and "{goal}" not in self.persona:
            raise ValueError(f"--persona must contain {{goal}}; got {self.persona!r}")
        for k in ("pretrain_steps", "sft_steps", "user_steps", "batch", "user_new", "n_eval",
                  "n_probe", "n_disc", "classifier_steps", "d_model", "n_layer"):
            if getattr(self, k) < 1:
                raise ValueError(f"--{k.replace('_', '-')} must be >= 1; got {getattr(self, k)}")
        if self.curve_every < 0:
            raise ValueError(f"--curve-every must be >= 0 (0: no checkpoint curve); got {self.curve_every}")
        if any(u not in EVAL_USERS for u in self.curve_users) or len(set(self.curve_users)) != len(self.curve_users):
            raise ValueError(f"--curve-users must be distinct names among {', '.join(EVAL_USERS)}; got {','.join(self.curve_users)}")
        if self.curve_users and not self.curve_every:
            raise ValueError("--curve-users needs --curve-every >= 1")
        if self.n_dialogues < 0 or self.n_tm3 < 0:
            raise ValueError(f"--n-dialogues and --n-tm3 must be >= 0 (0: all); got {self.n_dialogues}, {self.n_tm3}")
        if len(self.seeds) < 2 or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"--seeds needs at least two distinct seeds (paired intervals); got {self.seeds}")
        if not (0 <= self.accept_wrong <= 1 and 0 <= self.leak <= 1):
            raise ValueError(f"--accept-wrong and --leak must lie in [0, 1]; got {self.accept_wrong}, {self.leak}")
        if self.eval_temperature < 0 or self.user_temperature < 0 or (self.sim_temperature or 0) < 0:
            raise ValueError("--eval-temperature, --user-temperature and --sim-temperature must be >= 0; got "
                             f"{self.eval_temperature}, {self.user_temperature}, {self.sim_temperature}")
        if self.user_view not in VIEWS:
            raise ValueError(f"--user-view must be one of {', '.join(VIEWS)}; got {self.user_view!r}")
        if self.eval_split not in ("held-out", "calibration"):
            raise ValueError(f"--eval-split must be held-out or calibration; got {self.eval_split!r}")
        if self.rl_split not in ("train", "calibration"):
            raise ValueError(f"--rl-split must be train or calibration; got {self.rl_split!r}")
        if self.workers < 0:
            raise ValueError(f"--workers must be >= 0 (0: every core); got {self.workers}")
        for k in ("independent_vocab_size", "independent_d_model", "independent_n_layer", "independent_pretrain_steps"):
            if getattr(self, k) < 1:
                raise ValueError(f"--{k.replace('_', '-')} must be >= 1; got {getattr(self, k)}")
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or len(set(self.arms)) != len(self.arms):
            raise ValueError(f"--arms must be distinct names among {', '.join(ARMS)}; got {','.join(self.arms)}")

    @property
    def greedy_evaluation(self) -> bool:
        """Whether the agents and every LM user decode greedily at evaluation, so that the SFT agent's
        evaluations draw nothing from their seed (:func:`seed_free_source`)."""
        return self.eval_temperature == 0 and self.user_temperature == 0

    def paradigm_config(self, seed: int) -> ParadigmConfig:
        """The one GRPO configuration of every arm, at ``seed``."""
        return replace(self.rl, seed=seed)


def memory_estimate(cfg: RealDialogueConfig) -> dict:
    """Device memory per stage for one process (:mod:`shiftbounds.utils.memory`), from ``--base-model``'s
    config (or the corpus-made model's), counting the models each stage keeps resident: SFT trains
    one model; GRPO holds the policy, its reference when ``--beta`` > 0, and the LM simulators."""
    m = model_shape(cfg.base_model or GPT2Config(vocab_size=cfg.vocab_size + 8, n_positions=max(1024, cfg.max_len),
                                                 n_embd=cfg.d_model, n_layer=cfg.n_layer, n_head=4))
    rl_len = cfg.max_len + cfg.rl.max_turns * (cfg.rl.max_new_tokens + cfg.user_new)
    users = (m,) * 4  # prompted, calibrated, held-out and independent user models
    return estimate([
        Stage("pretraining / SFT", (), m, train_batch=cfg.batch, train_len=cfg.max_len),
        Stage("discriminators and probes", (m,) * 2, m, gen=m, gen_batch=64, gen_len=cfg.max_len, train_batch=cfg.batch,
              train_len=cfg.max_len),
        Stage("GRPO (policy, reference, simulators)", users + ((m,) if cfg.rl.beta > 0 else ()), m, train_batch=cfg.rl.batch,
              train_len=rl_len, gen=m, gen_batch=cfg.rl.batch, gen_len=rl_len),
    ])


USER_MODELS = ("user_calibrated", "user_heldout", "user_calibrated_tm3", "user_independent")
MEASURES = ("realism", "discriminator", "sycophancy", "logged_confirmations")
CHECKPOINT_CURVE = "goal success at checkpoints (greedy, evaluation goals)"
"""The ``curve`` of ``training.csv`` rows from ``--curve-every``: the rise is fitted per goal and its
interval is over the goals (:func:`~shiftbounds.utils.stats.paired_trend`)."""


def stage_name(key: tuple) -> str:
    """A stage's file or folder name under ``stages/``: ``("agent", arm, seed)`` -> ``agent_<arm>_seed<seed>``,
    ``("eval", arm, seed)`` -> ``eval_<arm>_seed<seed>``, ``("eval_vs", sim, seed)`` -> the SFT agent
    against a training simulator, ``eval_sft_vs_<sim>_seed<seed>`` (the simulator's name with every run of
    characters other than letters, digits, ``.`` and ``-`` as one ``_``); any other key is its one name."""
    kind, *rest = key
    if kind == "eval_vs":  # a simulator's name as a file name: runs of other characters as one "_"
        return f"eval_sft_vs_{re.sub(r'[^A-Za-z0-9.-]+', '_', rest[0])}_seed{rest[1]}"
    return f"{kind}_{rest[0]}_seed{rest[1]}" if rest else kind


SFT_PLUS = "sft_plus_calibration"
"""The baseline of a run whose RL trains on the calibration split (``--rl-split calibration``): the SFT
recipe on the train split and the calibration dialogues RL trains on, logged agent turns included
(the simplest use of the logs RL is given, with more of them than RL reads)."""


def baselines(cfg: RealDialogueConfig) -> tuple[str, ...]:
    """The agents besides the SFT agent that the RL arms are compared against: :data:`SFT_PLUS` when RL
    trains on the calibration split."""
    return (SFT_PLUS,) if cfg.rl_split == "calibration" else ()


def fixed_agents(cfg: RealDialogueConfig) -> tuple[str, ...]:
    """The agents trained once, not per seed (each in its folder ``agent_<name>``): the SFT agent and
    the :func:`baselines`."""
    return ("sft", *baselines(cfg))


SEEDED_SIMULATORS = ("rule-based", study.HALF_LOGGED_CALIBRATED)
"""Training simulators that draw per dialogue even when every LM decodes greedily."""


def seed_free_source(cfg: RealDialogueConfig, key: tuple) -> tuple | None:
    """For an evaluation of the SFT agent or a baseline (``("eval", "sft", seed)``, ``("eval", SFT_PLUS, seed)``
    or ``("eval_vs", sim, seed)``)
    that draws nothing (:attr:`RealDialogueConfig.greedy_evaluation`, and a simulator outside
    :data:`SEEDED_SIMULATORS`), at a seed after the first: the first seed's stage, whose dialogues
    it repeats and whose file it copies. Otherwise (and for any other stage) ``None``: it is computed."""
    if len(key) != 3 or key[0] not in ("eval", "eval_vs"):
        return None
    kind, name, seed = key
    seed_free = (kind == "eval" and name in fixed_agents(cfg)) or (kind == "eval_vs" and name not in SEEDED_SIMULATORS)
    if not (cfg.greedy_evaluation and seed_free) or seed == cfg.seeds[0]:
        return None
    return kind, name, cfg.seeds[0]


def stage_needs(cfg: RealDialogueConfig) -> dict[tuple, tuple[tuple, ...]]:
    """Every stage of the run (keys as :func:`stage_name` reads them), in an order that computes each
    after the stages it needs, mapped to those: the base models; the user models and the SFT agent
    from them; the measurements, the SFT agent's evaluations and the RL agents, each needing every
    user model (the simulators are loaded together); each RL agent's evaluation; the baselines
    (:func:`baselines`) and their evaluations."""
    sims = sorted({ARMS[a][1] for a in cfg.arms} - {None})
    base = () if cfg.base_model else (("base",),)
    users = (*base, *((u,) for u in USER_MODELS))
    needs: dict[tuple, tuple[tuple, ...]] = {**{b: () for b in base}, ("base_independent",): ()}
    needs.update({(u,): (("base_independent",),) if u == "user_independent" else base for u in USER_MODELS})
    needs.update({(f"agent_{a}",): base for a in fixed_agents(cfg)})
    with_agent = (*users, ("agent_sft",))
    needs.update({(m,): users for m in MEASURES})
    for key in [("eval", a, s) for a in fixed_agents(cfg) for s in cfg.seeds] + [("eval_vs", sim, s) for sim in sims for s in cfg.seeds]:
        source = seed_free_source(cfg, key)
        agent = (f"agent_{key[1]}",) if key[0] == "eval" and key[1] != "sft" else ()
        needs[key] = tuple(n for n in (*with_agent, agent, source) if n)
    needs.update({("agent", a, s): with_agent for s in cfg.seeds for a in cfg.arms})
    needs.update({("eval", a, s): (*with_agent, ("agent", a, s)) for s in cfg.seeds for a in cfg.arms})
    return needs


def rl_dialogues(cfg: RealDialogueConfig, train: Sequence[Conversation], calib: Sequence[Conversation]) -> list[Conversation]:
    """The dialogues RL trains on (``--rl-split``): the train split; or the calibration split, less
    the evaluation goals where those come from it (its first ``--n-eval`` dialogues).

    Raises:
        ValueError: the calibration split has no dialogue after the evaluation goals.
    """
    if cfg.rl_split == "train":
        return list(train)
    pool = list(calib[cfg.n_eval:] if cfg.eval_split == "calibration" else calib)
    if not pool:
        raise ValueError(f"--rl-split calibration with --eval-split calibration needs --n-eval below the split's "
                         f"{len(calib)} dialogues; got {cfg.n_eval}")
    return pool


class Stages:
    """Every stage of one run, computed from the stages it needs (or loaded where saved) by key
    (:func:`stage_name`): the main process walks them in order; a worker computes one."""

    def __init__(self, cfg: RealDialogueConfig, st: StageCache) -> None:
        self.cfg, self.st = cfg, st
        data = load_taskmaster(cfg.data_dir or None, cfg.n_dialogues or None, cfg.n_tm3 or None, rng=numpy_rng(cfg.seed, "split"))
        self.raw = data["tm4_raw"]
        (self.train, self.calib, self.held), (self.tm3_train, _, self.tm3_held) = data["tm4"], data["tm3"]
        self.sft = TrainingConfig(steps=cfg.sft_steps, batch=cfg.batch, lr=cfg.sft_lr, max_length=cfg.max_len, seed=cfg.seed)
        self.users_cfg = CalibrationConfig(steps=cfg.user_steps, batch=cfg.batch, lr=cfg.sft_lr, max_length=cfg.max_len,
                                           seed=cfg.seed, view=cfg.user_view, **({"persona": cfg.persona} if cfg.persona else {}))
        self.base_cfg = TrainingConfig(steps=cfg.pretrain_steps, batch=cfg.batch, lr=cfg.lr, max_length=cfg.max_len, seed=cfg.seed)
        self.goals = study.evaluation_goals(self.held if cfg.eval_split == "held-out" else self.calib, cfg.n_eval)
        self.rl_dialogues = rl_dialogues(cfg, self.train, self.calib)

    @functools.cached_property
    def users(self) -> dict:
        """The simulators and evaluation users (their folders must be saved), loaded once."""
        cfg = self.cfg
        folders = {k: self.folder(k) for k in ("base", *USER_MODELS)}
        return study.user_models(folders, user_new=cfg.user_new, accept_wrong=cfg.accept_wrong, leak=cfg.leak,
                                 view=cfg.user_view, temperature=cfg.user_temperature)

    @functools.cached_property
    def probes(self) -> tuple:
        """``(builder, probes)``: the Taskmaster-4 calibration probes of the sycophancy measures, built once."""
        return study.calibration_probes(self.raw, self.calib, self.cfg.n_probe, self.cfg.seed)

    def folder(self, name: str) -> Path:
        """A model stage's folder: ``base`` (or ``--base-model``), ``base_independent``, a user model,
        ``agent_sft``, a baseline's ``agent_<name>`` (:func:`baselines`); computed if not saved."""
        cfg, st = self.cfg, self.st
        if name == "base":
            return Path(cfg.base_model) if cfg.base_model else st.folder_stage("base", lambda f: study.make_base(
                f, self.train + self.tm3_train, vocab_size=cfg.vocab_size, d_model=cfg.d_model, n_layer=cfg.n_layer,
                max_len=cfg.max_len, cfg=self.base_cfg, persona=self.users_cfg.persona, goal_annotated=cfg.goal_annotated,
                seed=cfg.seed))
        independent = trainer_seed(cfg.seed, "independent evaluator")
        if name == "base_independent":
            return st.folder_stage(name, lambda f: study.make_base(
                f, self.calib + self.held + self.tm3_train, vocab_size=cfg.independent_vocab_size, d_model=cfg.independent_d_model,
                n_layer=cfg.independent_n_layer, max_len=cfg.max_len,
                cfg=replace(self.base_cfg, steps=cfg.independent_pretrain_steps, seed=independent),
                persona=self.users_cfg.persona, goal_annotated=cfg.goal_annotated, seed=independent))
        if name == "agent_sft":
            return st.folder_stage(name, lambda f: sft_agent(self.train, self.folder("base"), f, self.sft, SYSTEM))
        if name == f"agent_{SFT_PLUS}":
            return st.folder_stage(name, lambda f: sft_agent(self.train + self.rl_dialogues, self.folder("base"), f, self.sft, SYSTEM))
        convs, base, ucfg = {"user_calibrated": (self.train, "base", self.users_cfg),
                             "user_heldout": (self.held, "base", self.users_cfg),
                             "user_calibrated_tm3": (self.tm3_train, "base", self.users_cfg),
                             "user_independent": (self.held, "base_independent", replace(self.users_cfg, seed=independent))}[name]
        return st.folder_stage(name, lambda f: calibrate(convs, self.folder(base), f, ucfg))

    def measure(self, name: str) -> dict:
        """One of :data:`MEASURES`: realism, discriminators, sycophancy and disclosure, the logged confirmations."""
        cfg, st = self.cfg, self.st
        builder, probes = self.probes
        folders = {k: self.folder(k) for k in ("base", *USER_MODELS)}
        make = {"realism": lambda: study.realism(folders, self.calib, self.tm3_held, cfg.max_len, cfg.user_view),
                "discriminator": lambda: study.discriminators(
                    self.users, folders, self.tm3_train, self.tm3_held, user_new=cfg.user_new, user_temperature=cfg.user_temperature,
                    steps=cfg.classifier_steps, batch=cfg.batch, lr=cfg.sft_lr, max_len=cfg.max_len, n_disc=cfg.n_disc, seed=cfg.seed),
                "sycophancy": lambda: study.sycophancy(self.users, probes, builder, cfg.seed),
                "logged_confirmations": lambda: logged_confirmations(probes, builder, taskmaster4_judge)}[name]
        return st.json(name, make)

    def agent(self, arm: str, seed: int) -> Path:
        """The RL agent of ``arm`` at ``seed``, trained from the SFT agent."""
        return self.st.folder_stage(stage_name(("agent", arm, seed)), lambda f: study.train_arm(
            arm, self.folder("agent_sft"), self.rl_dialogues, self.users, self.cfg.paradigm_config(seed), f, self.cfg.sim_temperature,
            self.curve(seed)))

    def curve(self, seed: int) -> dict | None:
        """The checkpoint measure of ``--curve-every`` (:func:`~shiftbounds.conversations.taskmaster_study.train_arm`):
        the evaluation's goals, settings and draws at ``seed``."""
        cfg = self.cfg
        return {"every": cfg.curve_every, "users": cfg.curve_users, "goals": self.goals, "turns": cfg.rl.max_turns, "max_new": cfg.rl.max_new_tokens,
                "temperature": cfg.eval_temperature, "seed": seed} if cfg.curve_every else None

    def evaluation(self, arm: str, seed: int, names: Sequence[str] | None = None, key: tuple | None = None) -> dict:
        """Success of the ``arm`` agent ("sft" or an RL arm) at ``seed`` against ``names`` (default: the
        evaluation users, and an RL arm's training simulator)."""
        cfg = self.cfg
        key = key or ("eval", arm, seed)
        fixed = arm in fixed_agents(cfg)
        source = seed_free_source(cfg, key) if fixed else None
        if source:  # the same dialogues as at the first seed: its file
            return self.st.json(stage_name(key), lambda: self.evaluation(arm, source[2], names, source))
        sim = ARMS.get(arm, (None, None))[1]
        names = names or EVAL_USERS + ((sim,) if sim else ())
        folder = self.folder(f"agent_{arm}") if fixed else self.agent(arm, seed)
        return self.st.json(stage_name(key), lambda: study.evaluate(
            folder, self.users, names, self.goals, seed=seed, turns=cfg.rl.max_turns, max_new=cfg.rl.max_new_tokens, temperature=cfg.eval_temperature))

    def stage(self, key: tuple):
        """The stage ``key`` (see :func:`stage_needs`), computed if not saved."""
        kind, *rest = key
        if kind == "agent":
            return self.agent(*rest)
        if kind == "eval":
            return self.evaluation(*rest)
        if kind == "eval_vs":
            return self.evaluation("sft", rest[1], (rest[0],), key)
        return self.measure(kind) if kind in MEASURES else self.folder(kind)


def compute_stage(cfg: RealDialogueConfig, key: tuple) -> dict:
    """One stage computed in a worker process (the stages it needs already saved); its wall seconds."""
    st = StageCache(Path(cfg.out_dir) / "stages")
    Stages(cfg, st).stage(key)
    return st.seconds
