"""Calibrated interactive RL on real human dialogues (Taskmaster-4; Taskmaster-3 for per-turn realism),
wired from :mod:`shiftbounds.conversations` on TRL.

``python -m experiments.real_dialogue [--preset smoke|cpu|paper_requests|train_split|paper|gpu] [options]``

``cpu``: confirmatory run S, Calibrated Interactive RL whose simulator opens with the logged human
request, trained on the calibration split's requests (``--rl-split calibration``: requests no agent or
simulator learned from), against the SFT agent and the ``sft_plus_calibration`` baseline on every
held-out goal, ten seeds (96 min on 2 cores; confirmatory run T: ``--seeds 26,...,37``);
``paper_requests``: confirmatory run U, the paper's comparison on that configuration (Static Context
RL, Interactive RL against the prompted simulator and that arm) on T's seeds (an ``--out-dir``
holding T's stages resumes from them); ``train_split``: the earlier confirmatory configuration (the
cpu preset until 2026-12-06), Calibrated Interactive RL trained on the train split's goals, six
seeds, 128 held-out goals; ``paper``: that configuration with Static Context RL, Interactive RL
(prompted simulator) and Calibrated Interactive RL on eight seeds (an ``--out-dir`` of a train_split
run resumes from its stages).

Stages (each saved under ``--out-dir``/stages and skipped on a rerun; each computed in one of
``--workers`` processes on one torch thread as soon as the stages it needs are saved, so the
outputs are the same bytes on any number of cores):

1. **data** — Taskmaster-4 and Taskmaster-3 as conversations, the agent's API calls folded into its
   turns, split by dialogue into train / calibration / held-out;
2. **base** — a byte-level BPE tokenizer trained on the two corpora's train splits and a small
   GPT-2 pretrained on their dialogues (both roles, API calls included; with ``--goal-annotated``
   each Taskmaster-4 dialogue also once led by its user's goal), saved as a Hugging Face folder from
   which every simulator and agent starts (or ``--base-model``: any local chat model);
3. **user models** — the calibrated simulator (SFT on the train split's user turns), the held-out
   user model (the same SFT on the *held-out* split: a model of people the agents never met), the
   Taskmaster-3 calibrated simulator; the prompted simulator is the base model with a persona
   prompt, and the rule-based sycophantic customer has explicit knobs;
4. **realism** — NLL of held-out human user turns by turn; on Taskmaster-3 a real-vs-simulated
   discriminator's held-out AUC by turn; **sycophancy** — accept-right, accept-wrong and goal
   disclosure of every user model and of the logged people on Taskmaster-4 probes, and how many of
   the logged confirmations show an order other than the goal's (what a model of the logs could
   learn to reject from);
5. **agents** — the SFT agent (the paradigms' shared starting point), then, per seed, Static Context
   RL (logged contexts), Interactive RL against the rule-based and the prompted simulator, and
   Calibrated Interactive RL (and, with ``--arms calibrated_opening``, Calibrated Interactive RL
   whose simulator opens with the training dialogue's logged human request; ``calibrated_half_opening``:
   in half the dialogues, drawn per dialogue; with ``--rl-split calibration``, RL trains on the
   calibration split's dialogues, requests no agent or simulator learned from, and the baseline
   ``sft_plus_calibration``, the SFT recipe on those dialogues too, is trained and compared), all with one ``GRPOConfig``, paid by goal success (the order placed
   is exactly the goal's); every agent is evaluated against two evaluation users — the held-out user
   model, and the same model with a rule that rejects a wrong order it would accept — and against
   its training simulator (the sim-to-real gap), where the SFT agent is evaluated too (what RL
   gained where it trained); a third evaluation user opens with the held-out
   dialogue's logged human request and continues as the rule-corrected model, which measures what
   the agents do with a real request even where the user models cannot state one.

Outputs: ``results.json``, ``results.md``, ``runs.csv`` (every agent, seed and evaluation user),
``goals.csv`` (the same, per evaluation goal: one outcome digit per goal, in the order of
``results.json``'s ``goal_ids``),
``paired.csv`` (per-seed paired differences with 95 % intervals, the exact sign-flip p the verdict
rests on, the t-test's p, and the verdict after Holm's correction over each evaluation user's
comparisons, :func:`comparisons`), ``training.csv`` (each GRPO run's training reward, first and last
quarter, and with ``--curve-every`` the checkpoint curves' fitted rises), ``per_turn.csv``, figures
``realism_by_turn``, ``sycophancy``, ``paradigms``, ``paired`` (each comparison's interval per evaluation user),
``training_curves`` (PNG and PDF),
``config.json``, ``timings.json``.
``--estimate-only`` prints the device memory each stage needs, from the model's config, before any
weights are loaded (:mod:`shiftbounds.utils.memory`).
Multi-GPU or multi-machine: ``accelerate launch [--multi_gpu] --num_processes N -m
experiments.real_dialogue ...`` (TRL trains data-parallel; measurements run on every process and
only the main one writes).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TextIO

import numpy as np

from shiftbounds.conversations import taskmaster_study as study
from shiftbounds.conversations.calibration import CalibrationConfig, TrainingConfig, calibrate, sft_agent
from shiftbounds.conversations.measures import logged_confirmations
from shiftbounds.conversations.models import METADATA
from shiftbounds.conversations.paradigms import SYSTEM, ParadigmConfig
from shiftbounds.conversations.pretrained import SMOLLM2, cache_home
from shiftbounds.conversations.records import Conversation
from shiftbounds.conversations.simulators import VIEWS
from shiftbounds.conversations.taskmaster import CUSTOMER_PERSONA
from shiftbounds.conversations.taskmaster_study import ARMS, EVAL_USERS, PAPER_ARMS
from shiftbounds.conversations.tasks import (
    load_taskmaster,
    taskmaster4_judge,
)
from shiftbounds.figures.text import (
    plot_paired_differences,
    plot_paradigm_success,
    plot_text_realism,
    plot_text_sycophancy,
    plot_training_curves,
)
from shiftbounds.utils.cli import exit_on_stale, load_config_file, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.memory import Stage, estimate, format_estimate, model_shape
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng, trainer_seed
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import holm_verdicts, mean_ci, paired_difference, paired_trend, trend
from shiftbounds.utils.workers import default_workers, one_torch_thread, run_graph


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
    user_view: str = field(default="as_user", metadata={"help": "how the LM user models read the dialogue: as_user (the roles as "
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
    rl_steps: int = field(default=40, metadata={"help": "GRPO steps per arm and seed"})
    rl_batch: int = field(default=8, metadata={"help": "dialogues per GRPO step"})
    num_generations: int = field(default=4, metadata={"help": "dialogues per goal (the group baseline)"})
    rl_lr: float = field(default=1e-4, metadata={"help": "GRPO learning rate"})
    beta: float = field(default=0.0, metadata={"help": "KL weight to the SFT agent (> 0 loads a reference model)"})
    lora_rank: int = field(default=0, metadata={"help": "GRPO with LoRA adapters of this rank (peft, merged into the saved agent); 0: full fine-tuning"})
    persona: str = field(default="", metadata={"help": "the prompted user's persona, with {goal} (empty: the package's default)"})
    credit_weight: float = field(default=0.0, metadata={"help": "weight of the partial-credit reward (items, quantities, options "
                                                                "right) beside goal success (weight 1)"})
    rl_temperature: float = field(default=1.0, metadata={"help": "agent temperature in GRPO rollouts"})
    turns: int = field(default=2, metadata={"help": "agent turns per dialogue (Taskmaster-4: the order, then the goodbye)"})
    max_new: int = field(default=192, metadata={"help": "tokens per agent turn (an order turn with its API calls: 120 median, 165 at the 90th percentile)"})
    user_new: int = field(default=48, metadata={"help": "tokens per simulated user turn"})
    user_temperature: float = field(default=1.0, metadata={"help": "sampling temperature of the LM user models (0: greedy)"})
    sim_temperature: float | None = field(default=None, metadata={"help": "sampling temperature of the LM training simulators in "
                                                                          "GRPO rollouts (empty: --user-temperature; every "
                                                                          "evaluation samples at --user-temperature)"})
    eval_temperature: float = field(default=0.0, metadata={"help": "agent temperature at evaluation (0: greedy)"})
    curve_every: int = field(default=0, metadata={"help": "every this many GRPO steps (and at step 0), the agent's goal success "
                                                          "against its training simulator on the evaluation goals, as the "
                                                          "evaluation measures it (0: none)"})
    curve_users: tuple[str, ...] = field(default=(), metadata={"help": "evaluation users the checkpoints also meet (with "
                                                                       "--curve-every; e.g. held-out user model): where "
                                                                       "the sim-to-real gap opens during training"})
    n_eval: int = field(default=128, metadata={"help": "goals per evaluation"})
    eval_split: str = field(default="held-out", metadata={"help": "split the evaluation goals come from: held-out, or calibration "
                                                                  "for development runs (choosing settings without the held-out goals)"})
    rl_split: str = field(default="train", metadata={"help": "split whose dialogues (goals, and logged openings for the arms that "
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
    one_thread: bool = field(default=True, metadata={"help": "compute every stage on one torch thread, in --workers processes, so that "
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
        if self.lora_rank < 0 or (self.persona and "{goal}" not in self.persona):
            raise ValueError(f"need --lora-rank >= 0 and a --persona containing {{goal}}; got {self.lora_rank}, {self.persona!r}")
        for k in ("pretrain_steps", "sft_steps", "user_steps", "batch", "rl_steps", "turns", "max_new", "user_new", "n_eval",
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
        self.paradigm_config(0)  # its own checks, named

    @property
    def greedy_evaluation(self) -> bool:
        """Whether the agents and every LM user decode greedily at evaluation, so that the SFT agent's
        evaluations draw nothing from their seed (:func:`seed_free_source`)."""
        return self.eval_temperature == 0 and self.user_temperature == 0

    def paradigm_config(self, seed: int) -> ParadigmConfig:
        """The one GRPO configuration of every arm, at ``seed``."""
        return ParadigmConfig(steps=self.rl_steps, batch=self.rl_batch, num_generations=self.num_generations, lr=self.rl_lr,
                              beta=self.beta, credit_weight=self.credit_weight, temperature=self.rl_temperature,
                              max_turns=self.turns, max_new_tokens=self.max_new, system=SYSTEM, user_first=True, seed=seed,
                              lora_rank=self.lora_rank)


# frozen before the first confirmatory run (docs/results.md): greedy user models, which state their goal in >= 0.7
# of openings; GRPO as development configuration H (chosen on seeds 100-101 and calibration goals); Calibrated
# Interactive RL against the SFT agent on six fresh seeds, the fewest at which the exact sign-flip test can fall
# below 0.05 (79 min on 2 cores; the other arms: --arms, or the paper preset); the cpu preset until 2026-12-06
TRAIN_SPLIT = {"user_temperature": 0.0, "arms": ("calibrated",), "seeds": tuple(range(6)), "rl_steps": 100, "rl_batch": 32,
               "rl_lr": 3e-5, "credit_weight": 0.5, "rl_temperature": 0.7, "curve_every": 10}
# confirmatory run S (docs/results.md): that configuration with the arm that opens with a logged request, trained on
# the calibration split's requests, every held-out goal, ten fresh seeds, with the sft_plus_calibration baseline
# (96 min on 2 cores); confirmatory run T is this preset with --seeds 26,...,37
CPU = {**TRAIN_SPLIT, "arms": ("calibrated_opening",), "rl_split": "calibration", "n_eval": 552, "seeds": tuple(range(16, 26))}

PRESETS = {
    "smoke": {"n_dialogues": 40, "n_tm3": 40, "vocab_size": 400, "d_model": 32, "n_layer": 1, "max_len": 256,
              "pretrain_steps": 3, "sft_steps": 3, "user_steps": 2, "batch": 4, "rl_steps": 1, "rl_batch": 4,
              "num_generations": 2, "turns": 2, "max_new": 12, "user_new": 8, "n_eval": 4, "seeds": (0, 1), "n_probe": 6,
              "n_disc": 8, "classifier_steps": 2, "independent_vocab_size": 400, "independent_d_model": 32,
              "independent_n_layer": 1, "independent_pretrain_steps": 2, "curve_every": 1,
              "curve_users": ("held-out user model",)},
    "cpu": CPU,
    # confirmatory run U (docs/results.md): the comparison the paper makes on the cpu configuration, Static Context
    # RL and Interactive RL (prompted simulator) beside the arm of run T, on T's twelve seeds (an --out-dir holding
    # T's stages trains only the two new arms)
    "paper_requests": {**CPU, "arms": ("static", "interactive_prompted", "calibrated_opening"), "seeds": tuple(range(26, 38))},
    "train_split": TRAIN_SPLIT,
    # the comparison the paper makes, on the train_split configuration (the --out-dir of a train_split run resumes):
    # Static Context RL, Interactive RL against the prompted simulator and Calibrated Interactive RL, each against the
    # SFT agent and Calibrated against the other two, one Holm family of five per evaluation user; eight seeds, the
    # fewest at which the exact sign-flip test can pass Holm's first step (2 / 2^8 < 0.05 / 5)
    "paper": {**TRAIN_SPLIT, "arms": ("static", "interactive_prompted", "calibrated"), "seeds": tuple(range(8))},
    # paper 1's comparison at pretrained scale (issue 50): SmolLM2-135M-Instruct (`shiftbounds base-model`) as the base of
    # the agent and the user models, the prompted SmolLM2 user (the persona chosen on the development split) as
    # Interactive RL's simulator, Calibrated Interactive RL against SmolLM2 calibrated on the train split's people, Static
    # Context RL on the logged contexts; GRPO with LoRA adapters (rank 16); twelve seeds; a development configuration
    # until its RL settings are chosen on seeds 100-101 and calibration goals (docs/llm.md)
    "gpu": {"base_model": str(cache_home() / SMOLLM2.name), "arms": ("static", "interactive_prompted", "calibrated"),
            "persona": CUSTOMER_PERSONA, "user_temperature": 0.0, "lora_rank": 16, "max_len": 1024, "sft_steps": 600,
            "user_steps": 300, "sft_lr": 3e-5, "batch": 8, "rl_steps": 100, "rl_batch": 32, "rl_lr": 2e-5, "credit_weight": 0.5,
            "rl_temperature": 0.7, "turns": 2, "max_new": 192, "user_new": 48, "n_eval": 552, "seeds": tuple(range(12)),
            "curve_every": 10},
}


def memory_estimate(cfg: RealDialogueConfig) -> dict:
    """Device memory per stage for one process (:mod:`shiftbounds.utils.memory`), from ``--base-model``'s
    config (or the corpus-made model's), counting the models each stage keeps resident: SFT trains
    one model; GRPO holds the policy, its reference when ``--beta`` > 0, and the LM simulators."""
    from transformers import GPT2Config


    m = model_shape(cfg.base_model or GPT2Config(vocab_size=cfg.vocab_size + 8, n_positions=max(1024, cfg.max_len),
                                                 n_embd=cfg.d_model, n_layer=cfg.n_layer, n_head=4))
    rl_len = cfg.max_len + cfg.turns * (cfg.max_new + cfg.user_new)
    users = (m,) * 4  # prompted, calibrated, held-out and independent user models
    return estimate([
        Stage("pretraining / SFT", (), m, train_batch=cfg.batch, train_len=cfg.max_len),
        Stage("discriminators and probes", (m,) * 2, m, gen=m, gen_batch=64, gen_len=cfg.max_len, train_batch=cfg.batch,
              train_len=cfg.max_len),
        Stage("GRPO (policy, reference, simulators)", users + ((m,) if cfg.beta > 0 else ()), m, train_batch=cfg.rl_batch,
              train_len=rl_len, gen=m, gen_batch=cfg.rl_batch, gen_len=rl_len),
    ])


# settings added after runs were made, at the values those runs were made with: the one view before
# --user-view; one process on --threads before --one-thread; the train split before --rl-split; full
# fine-tuning and the default persona before --lora-rank and --persona
LEGACY = {"user_view": "flipped", "one_thread": False, "curve_every": 0, "curve_users": (), "rl_split": "train", "lora_rank": 0,
          "persona": ""}
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
        return {"every": cfg.curve_every, "users": cfg.curve_users, "goals": self.goals, "turns": cfg.turns, "max_new": cfg.max_new,
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
            folder, self.users, names, self.goals, seed=seed, turns=cfg.turns, max_new=cfg.max_new, temperature=cfg.eval_temperature))

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


def run(cfg: RealDialogueConfig, stream: TextIO | None = None) -> dict:
    """Run (resuming finished stages), write every output, return the results dict. With
    ``--one-thread`` (the default) in one process, each unsaved stage is computed by one of
    ``--workers`` processes on one torch thread as soon as the stages it needs are saved
    (:func:`stage_needs`), so every output is the same bytes with any
    number of workers and whatever ``--threads``; under ``accelerate launch`` the processes train
    data-parallel."""
    from accelerate import PartialState

    t0 = time.perf_counter()
    state = PartialState()
    out = Path(cfg.out_dir)
    if state.is_main_process:  # one process on --threads: its rounding depends on them
        guard_resume(out, cfg, environment=() if cfg.one_thread else ("torch_threads",), legacy=LEGACY)
    state.wait_for_everyone()
    st = StageCache(out / "stages", save=state.is_main_process, barrier=state.wait_for_everyone)
    seconds: dict[str, float] = {}
    needs = stage_needs(cfg)
    workers = (cfg.workers or default_workers()) if cfg.one_thread and state.num_processes == 1 else 1
    if cfg.one_thread and state.num_processes == 1:  # each unsaved stage in a worker once the stages it needs are saved
        todo = {key: (cfg, key) for key in needs if not st.saved(stage_name(key))}
        for done in run_graph(compute_stage, todo, needs, workers, label="real_dialogue stages").values():
            seconds.update(done)
    keys = list(needs)
    prog = Progress(len(keys), "real_dialogue", stream=stream, enabled=state.is_main_process)
    with one_torch_thread() if cfg.one_thread else contextlib.nullcontext():
        stages = Stages(cfg, st)
        done = {}
        for key in keys:  # every stage saved by the workers is loaded; in one process on --threads, computed here
            done[key] = stages.stage(key)
            prog.update(note=stage_name(key))
    measures = {m: done[m,] for m in MEASURES}
    sims = sorted({ARMS[a][1] for a in cfg.arms} - {None})  # the starting point against each arm's training simulator
    runs = [{"arm": "sft", "seed": seed, **done["eval", "sft", seed], **{k: v for sim in sims for k, v in done["eval_vs", sim, seed].items()}}
            for seed in cfg.seeds]
    runs += [{"arm": b, "seed": seed, **done["eval", b, seed]} for b in baselines(cfg) for seed in cfg.seeds]
    for seed in cfg.seeds:
        for arm in cfg.arms:
            meta = json.loads((done["agent", arm, seed] / METADATA).read_text())
            runs.append({"arm": arm, "seed": seed, "training_reward": meta["reward"], "training_success": meta["success"],
                         "zero_variance_steps": meta["training_signal"]["zero_variance_steps"],
                         **({"checkpoint_curve": meta["curve"]} if "curve" in meta else {}), **done["eval", arm, seed]})
    ids = [g.id for g in stages.goals]
    results = summarise(cfg, runs, measures) | {"goals": goal_outcomes(runs, ids), "goal_ids": ids}
    if state.is_main_process:
        write_outputs(out, results, {**seconds, **st.seconds}, {"wall_seconds": time.perf_counter() - t0, "workers": workers,
                                                                "processes": state.num_processes})
    return results


def goal_outcomes(runs: list[dict], goal_ids: Sequence[str]) -> list[dict]:
    """Per agent, seed and evaluation user, the judge's reward at every evaluation goal, in the order of
    ``goal_ids`` (``outcomes``: one digit per goal where every reward is 0 or 1, else comma-separated
    values), so a reader can recompute any per-seed success, or pair outcomes by goal."""
    out = []
    for r in runs:
        for user, v in r.items():
            if isinstance(v, dict) and "rewards" in v:
                if len(v["rewards"]) != len(goal_ids):
                    raise ValueError(f"{r['arm']} seed {r['seed']} vs {user}: {len(v['rewards'])} rewards for {len(goal_ids)} goals")
                binary = all(x in (0, 1) for x in v["rewards"])
                out.append({"arm": r["arm"], "seed": r["seed"], "user": user, "goals": len(goal_ids),
                            "outcomes": "".join(str(int(x)) for x in v["rewards"]) if binary else ",".join(repr(float(x)) for x in v["rewards"])})
    return out


def comparisons(arms: Sequence[str], against: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The family of paired comparisons per evaluation user: every RL arm against the SFT agent and
    against each baseline in ``against``, and each Calibrated Interactive RL arm (``calibrated``, and
    the variants whose simulator opens with a logged request) against every arm of another paradigm;
    ``calibrated`` also against its variants."""
    def other(c: str, a: str) -> bool:
        return a != c and (ARMS[a][0] != "calibrated" or c == "calibrated")

    return ([(a, "sft") for a in arms] + [(a, b) for a in arms for b in against]
            + [(c, a) for c in arms if ARMS[c][0] == "calibrated" for a in arms if other(c, a)])


def summarise(cfg: RealDialogueConfig, runs: list[dict], measures: dict, training: list[dict] | None = None,
              curves: dict | None = None, checkpoints: dict | None = None) -> dict:
    """Success per arm and evaluation user (mean over seeds, 95 % t-interval cut to [0, 1]), the sim-to-real gaps
    (success against the training simulator minus against the held-out and against the independent
    user model, paired by seed),
    and per-seed paired differences: every RL arm against the SFT agent, Calibrated Interactive RL
    against every other arm, each with its own verdict and the verdict that survives Holm's
    correction over that evaluation user's comparisons; every RL arm against the SFT agent on its
    own training simulator (what RL learned where it trained: one family over the arms, from runs
    that evaluated the SFT agent there); the GRPO training curves' trends (``training``,
    ``curves`` and the checkpoint curves' means ``checkpoints`` as saved, when retabulating) and, per arm, the runs in which no group ever had
    reward variance (no policy gradient: the agent is its start)."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    arms = [*fixed_agents(cfg), *cfg.arms]
    users = [u for u in EVAL_USERS if all(u in by[a, s] for a in arms for s in cfg.seeds)]  # a run from before a user existed has fewer
    table, paired = [], []
    for arm in arms:
        row = {"arm": arm}
        for user in users:
            e = mean_ci(np.array([by[arm, s][user]["mean"] for s in cfg.seeds]))
            row[user] = e.value
            # one agent in every seed: constant; a success rate's t-interval cut to [0, 1], where the rate lies (coverage kept)
            row[f"{user} 95% CI"] = "constant" if e.low == e.high else f"[{max(e.low, 0.0):.3f}, {min(e.high, 1.0):.3f}]"
        sim = ARMS.get(arm, (None, None))[1]
        if sim:
            vs_sim = np.array([by[arm, s][sim]["mean"] for s in cfg.seeds])
            row["vs training simulator"] = float(vs_sim.mean())
            if all(sim in by["sft", s] for s in cfg.seeds):
                row["SFT agent vs that simulator"] = float(np.mean([by["sft", s][sim]["mean"] for s in cfg.seeds]))
            for label, user in (("held-out", EVAL_USERS[0]), ("independent", EVAL_USERS[3])):
                if user not in users:
                    continue
                gap = paired_difference(vs_sim, np.array([by[arm, s][user]["mean"] for s in cfg.seeds]), ("simulator", label))
                row[f"sim-to-real gap ({label})"] = gap["mean"]
                row[f"sim-to-real gap ({label}) 95% CI"] = f"[{gap['low']:.3f}, {gap['high']:.3f}]"
        table.append(row)
    pairs = comparisons(cfg.arms, baselines(cfg))
    for user in users:
        rows = [{"evaluation user": user, **paired_difference(np.array([by[a, s][user]["mean"] for s in cfg.seeds]),
                                                              np.array([by[b, s][user]["mean"] for s in cfg.seeds]), (a, b))}
                for a, b in pairs]
        # one family per evaluation user: an ordering that survives Holm's correction for its comparisons
        paired += [{**r, "holm verdict": v} for r, v in zip(rows, holm_verdicts(rows))]
    own = [(a, ARMS[a][1]) for a in cfg.arms if ARMS[a][1] and all(ARMS[a][1] in by["sft", s] for s in cfg.seeds)]
    rows = [{"evaluation user": f"its training simulator ({sim})", **paired_difference(
        np.array([by[a, s][sim]["mean"] for s in cfg.seeds]), np.array([by["sft", s][sim]["mean"] for s in cfg.seeds]), (a, "sft"))}
        for a, sim in own]
    paired += [{**r, "holm verdict": v} for r, v in zip(rows, holm_verdicts(rows))]  # one family: the arms on their simulators
    flat = [{"arm": r["arm"], "seed": r["seed"], "user": u, "success": v["mean"], "n": v["n"]}
            for r in runs for u, v in r.items() if isinstance(v, dict) and "mean" in v]  # an evaluation, not the checkpoint curve
    if training is None:
        training = [{"arm": r["arm"], "seed": r["seed"], "curve": curve, **trend(r[key]),
                     "zero_variance_steps": r["zero_variance_steps"]}
                    for r in runs if "training_reward" in r
                    for curve, key in (("goal success", "training_success"), ("reward", "training_reward"))]
        training += [{"arm": r["arm"], "seed": r["seed"], "curve": CHECKPOINT_CURVE + ("" if user == ARMS[r["arm"]][1] else f" vs {user}"),
                      "steps": c["steps"][-1], **paired_trend(c["steps"], np.array(outcomes)),
                      "zero_variance_steps": r["zero_variance_steps"]}
                     for r in runs if (c := r.get("checkpoint_curve")) for user, outcomes in c["outcomes"].items()]
        curves = {f"{r['arm']} seed {r['seed']}": r["training_success"] for r in runs if "training_success" in r}
        checkpoints = {f"{r['arm']} seed {r['seed']}": {"steps": c["steps"], **{
            "success" if user == ARMS[r["arm"]][1] else user: np.mean(o, axis=1).tolist() for user, o in c["outcomes"].items()}}
                       for r in runs if (c := r.get("checkpoint_curve"))}
    success = [t for t in training if t.get("curve") == "goal success"]

    def rising(rows: list[dict]) -> int:
        return sum(t["rise_low"] is not None and t["rise_low"] > 0 for t in rows)

    signal = [{"arm": arm, "runs": len(rows), "runs without reward variance": sum(t["zero_variance_steps"] == t["steps"] for t in rows),
               "zero-variance steps": sum(t["zero_variance_steps"] for t in rows), "steps": sum(t["steps"] for t in rows),
               "runs whose goal success rises (interval above 0)": rising(rows),
               **({f"runs whose {CHECKPOINT_CURVE} rises (interval above 0)": rising(ckpt)}
                  if (ckpt := [t for t in training if t.get("curve") == CHECKPOINT_CURVE and t["arm"] == arm]) else {})}
              for arm in cfg.arms if (rows := [t for t in success if t["arm"] == arm])]
    return {"config": asdict(replace(cfg, workers=0)), "evaluation_users": users, "table": table, "paired": paired, "runs": flat,
            "training": training, "training_curves": curves or {}, "checkpoint_curves": checkpoints or {}, "training_signal": signal, **measures,
            "note": "The evaluation users are models of people, not people: a user model trained on the held-out split "
                    "of human dialogues, the same model with a rule that rejects a wrong order it would accept, and an "
                    "independent user model (another base model's size, tokenizer, seed and pretraining corpus, trained on "
                    f"the same held-out split). Evaluation goals: the {cfg.eval_split} split. RL dialogues: the {cfg.rl_split} split."}


def write_outputs(out: Path, results: dict, seconds: dict, call: dict | None = None) -> None:
    """``results.json``, ``results.md``, ``runs.csv``, ``paired.csv``, ``training.csv``, ``per_turn.csv``, the figures
    and ``timings.json``: each stage's wall seconds, kept beside the stage by whichever call computed
    it (one that was stopped before it ended included), and each finished call's wall seconds and
    workers (a resumed run adds its own to those of the calls before)."""
    write_json(out / "results.json", results)
    before = read_json(out / "timings.json") if (out / "timings.json").is_file() else {}
    kept = StageCache(out / "stages").saved_seconds()  # this call's stages too: each is kept once saved
    write_json(out / "timings.json", {"seconds_per_stage_computed": {**before.get("seconds_per_stage_computed", {}), **kept},
                                      "calls": before.get("calls", []) + ([{**call, "stages_computed": len(seconds)}] if call else [])})
    write_csv(out / "runs.csv", results["runs"])
    write_csv(out / "paired.csv", results["paired"])
    write_csv(out / "training.csv", results["training"])
    if results.get("goals"):  # runs before 2026-12-07 kept per-seed successes only
        write_csv(out / "goals.csv", results["goals"])
    per_turn = [{"corpus": corpus, "user_model": name, "turns": b, "nll_per_token": v["value"], "nll_low": v["low"],
                 "nll_high": v["high"], "n": v["n"]}
                for corpus in ("tm4", "tm3") for name, r in results["realism"][corpus].items() for b, v in r["by_turn"].items()]
    per_turn += [{"corpus": "tm3", "user_model": name, "turns": b, "discriminator_auc": v["value"], "auc_low": v["low"],
                  "auc_high": v["high"], "n": v["n"]}
                 for name, d in results["discriminator"].items() for b, v in d["by_turn"].items()]
    write_csv(out / "per_turn.csv", per_turn)

    def fmt(e):
        return "n/a" if e is None else f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]"

    syc = [{"user model": k, **{m: fmt(v.get(m)) for m in ("accept_right", "accept_wrong", "goal_disclosure", "goal_consistency")},
            "discrimination": "n/a" if v["discrimination"] is None else
            f"{v['discrimination']['value']:.3f} [{v['discrimination']['low']:.3f}, {v['discrimination']['high']:.3f}]"}
           for k, v in results["sycophancy"].items()]
    nll = [{"user model": k, "corpus": c, "NLL per token": fmt(v["overall"])} for c in ("tm4", "tm3")
           for k, v in results["realism"][c].items()]
    disc = [{"simulator": k, "overall": fmt(d["overall"]), **{b: fmt(e) for b, e in d["by_turn"].items()}}
            for k, d in results["discriminator"].items()]
    md = ("# Real dialogues (Taskmaster-4 / Taskmaster-3)\n\n" + results["note"]
          + "\n\n## Goal success (mean over seeds, 95 % interval)\n\n" + markdown_table(results["table"])
          + "\n## Paired differences over seeds\n\n" + markdown_table(results["paired"])
          + "\n## GRPO training: goal success and reward per step against each arm's own training signal (mean over the first and "
            "last quarter of the steps; rise of a fitted line with its 95 % interval; steps in which every group had one reward)\n\n"
          + markdown_table(results["training"], dict.fromkeys(k for t in results["training"] for k in t))
          + ("\n## Training signal per arm (runs and steps in which every group had one reward: no policy gradient)\n\n"
             + markdown_table(results["training_signal"]) if results["training_signal"] else "")
          + "\n## User models: NLL of held-out human user turns\n\n" + markdown_table(nll)
          + "\n## Taskmaster-3: real-vs-simulated discriminator AUC by user turn (0.5: indistinguishable)\n\n"
          + markdown_table(disc)
          + "\n## Sycophancy and disclosure (Taskmaster-4 calibration split)\n\n" + markdown_table(syc)
          + "\n## The logged confirmations behind the probes: what people were shown, how they replied\n\n"
          + markdown_table([results["logged_confirmations"]]))
    atomic_write_text(out / "results.md", md)
    plot_text_realism(results, out / "realism_by_turn")
    plot_text_sycophancy(results, out / "sycophancy")
    plot_paradigm_success(results, out / "paradigms")
    plot_paired_differences(results, out / "paired")
    if results.get("training_curves"):
        plot_training_curves(results, out / "training_curves")


def retabulate(out: Path) -> dict:
    """The tables of a finished run recomputed from its ``results.json`` alone (per-seed successes,
    training trends and measurements), with today's statistics; every output but the figures'
    inputs that do not change is rewritten. The saved config is the run's, whatever the command line."""
    old = read_json(out / "results.json")
    saved = load_config_file(out / "config.json", RealDialogueConfig)  # the run's own settings, lists as tuples
    saved = {**LEGACY, **saved}
    cfg = RealDialogueConfig(**{**saved, "out_dir": str(out)})
    runs: dict = {}
    for r in old["runs"]:
        runs.setdefault((r["arm"], r["seed"]), {"arm": r["arm"], "seed": r["seed"]})[r["user"]] = {"mean": r["success"], "n": r["n"]}
    measures = {k: old[k] for k in ("realism", "discriminator", "sycophancy", "logged_confirmations")}
    results = summarise(cfg, list(runs.values()), measures, old["training"], old.get("training_curves", {}),
                        old.get("checkpoint_curves", {}))
    if old.get("goals"):
        results |= {"goals": old["goals"], "goal_ids": old["goal_ids"]}
    write_outputs(out, results, {})
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(RealDialogueConfig, __doc__, {"default": PRESETS["cpu"], **PRESETS}, argv, name="experiments.real_dialogue")
    if cfg.retabulate:
        results = retabulate(Path(cfg.out_dir))
        print((Path(cfg.out_dir) / "results.md").read_text())
        return results
    if cfg.estimate_only:

        est = memory_estimate(cfg)
        print(format_estimate(est))
        return est
    results = exit_on_stale(run, cfg)
    path = Path(cfg.out_dir, "results.md")
    print(path.read_text() if path.exists() else results)
    return results


if __name__ == "__main__":
    main()
