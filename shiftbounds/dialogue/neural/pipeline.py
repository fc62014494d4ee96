"""The main job's stages for one (task, seed), as library functions with explicit arguments
(docs/pipeline.md): what ``experiments.full_pipeline`` runs in worker processes.

1. :func:`seed_setup` — the task, its exact real user, the logs of ``pi_data`` (JSONL) and their
   train / held-out split;
2. :func:`user_model_stages` — the SFT agent (the shared start of every arm), the calibrated
   simulator, the realism discriminator and (optionally) the realism-tuned simulator;
3. :func:`rl_stage` — one policy-gradient algorithm for every arm, the same budget each;
4. :func:`measure_stage` — ``J_real`` / ``J_sim`` on common random numbers (every arm of a seed
   meets the same goals with the same user draws), per-turn shifts, the simulators' rates, and the
   evaluation part of every paired difference's spread.

:func:`run_task_seed` runs them in order, each saved under ``<out_dir>/<task>/seed<k>/`` and
loaded on a rerun. Every stage draws from generators keyed by (task, seed index, stage[, step])
(:mod:`shiftbounds.utils.seeding`) and initialises every network from its own key, so a stage
computes the same in any process, after any of the stages before it were loaded instead of run.
Results depend on torch's thread count through rounding; the job runs each (task, seed) on one
thread (:mod:`shiftbounds.utils.workers`), so they do not depend on how many run at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from shiftbounds.dialogue.logs import read_jsonl, split, write_jsonl
from shiftbounds.dialogue.neural import measures as M
from shiftbounds.dialogue.neural.rollout import ExplicitUser, NeuralUser, draw_noise, rollout
from shiftbounds.dialogue.neural.tokens import Vocab, encode
from shiftbounds.dialogue.neural.training import (
    ModelConfig,
    RLConfig,
    SFTConfig,
    discriminator_accuracy,
    realism_finetune,
    sft,
    train_agent,
    train_discriminator,
    user_nll,
)
from shiftbounds.dialogue.prepare import PreparedTask, make_task, prepare_task, sample_logs
from shiftbounds.dialogue.tasks import REAL_USERS, REWARD_SOURCES, TASKS, prompted_simulator
from shiftbounds.nn.transformer import Transformer, load_model, perturb_weights, save_model
from shiftbounds.theory.bounds import compounding
from shiftbounds.utils.configs import component
from shiftbounds.utils.device import resolve_device
from shiftbounds.utils.io import read_json, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng, torch_generator, torch_init_seed
from shiftbounds.utils.stages import StageCache


@dataclass(frozen=True)
class PipelineConfig:
    """Options of ``experiments.full_pipeline`` (each a flag)."""

    # --- tasks and data
    tasks: tuple[str, ...] = field(default=("guess_number", "booking"), metadata={"help": f"tasks, from {sorted(TASKS)}"})
    horizon: int = field(default=4, metadata={"help": "agent turns H"})
    sweep: tuple[int, ...] = field(default=(), metadata={"help": "horizons to sweep instead of --horizon: the job runs once per horizon under <out-dir>/H<h>/ and adds the compounding analysis (empty = off)"})
    n_logs: int = field(default=1500, metadata={"help": "logged dialogues of pi_data with the real user (train + held-out)"})
    held_out: float = field(default=0.2, metadata={"help": "held-out fraction of the logs"})
    real_user: str = field(default="memory", metadata={"help": f"the real user, from {sorted(REAL_USERS)}: 'memory' is consistent, impatient with repeated questions and clarifies more as the dialogue grows"})
    accept_wrong: float = field(default=0.3, metadata={"help": "prompted simulator: probability of accepting a wrong proposal"})
    leak: float = field(default=0.2, metadata={"help": "prompted simulator: probability of leaking the goal"})
    reward_source: str = field(default="acceptance", metadata={"help": f"what simulators pay during RL, from {REWARD_SOURCES}"})
    # --- models and stages
    d_model: int = field(default=64, metadata={"help": "width of every network"})
    n_layer: int = field(default=2, metadata={"help": "blocks of every network"})
    sft_steps: int = field(default=500, metadata={"help": "SFT steps (agent and simulator)"})
    disc_steps: int = field(default=150, metadata={"help": "realism discriminator steps"})
    realism_steps: int = field(default=200, metadata={"help": "discriminator-reward fine-tuning steps of the simulator; > 0 adds the calibrated_realism arm (0 = off)"})
    rl: RLConfig = component(RLConfig(), "policy-gradient RL, one algorithm and budget for every arm (Static Context RL's "
                                         "reward is set per arm)",
                             flat={"steps": "rl_steps", "goals_per_step": "goals_per_step", "group": "group", "lr": "rl_lr",
                                   "kl_coef": "kl_coef", "entropy_coef": "entropy_coef", "advantage": "advantage",
                                   "normalise": "normalise_advantages", "eval_every": "eval_every"},
                             earlier={"entropy_coef": 0.0, "advantage": "return", "normalise": False})
    n_eval: int = field(default=2000, metadata={"help": "dialogues per final evaluation (the same goals and user draws for every arm of a seed)"})
    n_curve: int = field(default=400, metadata={"help": "dialogues per learning-curve point (shared by the arms at each step)"})
    # --- run
    seeds: int = field(default=20, metadata={"help": "seeds (independent logs and training)"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    perturb_init: int = field(default=0, metadata={"earlier": 0, "help": "multiply every initial weight of every network by 1 + 1e-7 z (z standard normal, drawn from a generator keyed by this value; 0 = off): runs that differ from the unperturbed one only at float32 rounding, a stand-in for another CPU"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda or auto (CUDA when available); generators stay on the CPU, so draws match across devices"})
    workers: int = field(default=0, metadata={"help": "(task, seed) runs at once, each in its own process on one torch thread; 0 = every core. The results do not depend on it", "resume": False})
    out_dir: str = field(default="results/full_pipeline/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ValueError(f"--tasks must name tasks from {sorted(TASKS)}; got unknown {bad}")
        if self.real_user not in REAL_USERS:
            raise ValueError(f"--real-user must be one of {sorted(REAL_USERS)}; got {self.real_user!r}")
        top = 4 if self.real_user == "memory" else 6
        for h in (self.horizon, *self.sweep):
            if not 2 <= h <= top:
                raise ValueError(f"--horizon and --sweep must lie in [2, {top}] with --real-user {self.real_user} (the exact views grow fast); got {h}")
        if list(self.sweep) != sorted(set(self.sweep)) or len(self.sweep) == 1:
            raise ValueError(f"--sweep must list >= 2 distinct horizons in increasing order; got {list(self.sweep)}")
        if self.n_logs < 10 or not 0 < self.held_out < 0.9:
            raise ValueError(f"--n-logs >= 10 and --held-out in (0, 0.9) required; got {self.n_logs}, {self.held_out}")
        if not (0 <= self.accept_wrong <= 1 and 0 <= self.leak <= 0.9):
            raise ValueError(f"--accept-wrong in [0, 1] and --leak in [0, 0.9] required; got {self.accept_wrong}, {self.leak}")
        if self.reward_source not in REWARD_SOURCES:
            raise ValueError(f"--reward-source must be one of {REWARD_SOURCES}; got {self.reward_source!r}")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ValueError(f"--device must be cpu, cuda or auto; got {self.device!r}")
        if self.seeds < 2:
            raise ValueError(f"--seeds must be >= 2 (CIs over seeds); got {self.seeds}")
        if self.workers < 0 or self.perturb_init < 0:
            raise ValueError(f"--workers and --perturb-init must be >= 0; got {self.workers}, {self.perturb_init}")
        if self.n_eval < 10 or self.n_curve < 10:
            raise ValueError(f"--n-eval and --n-curve must be >= 10; got {self.n_eval}, {self.n_curve}")
        if self.d_model % 4:
            raise ValueError(f"--d-model must be a multiple of 4 (4 heads); got {self.d_model}")
        SFTConfig(self.sft_steps)


ARMS = {  # arm -> (paradigm, Static Context RL reward, training user)
    "static_myopic": ("static", "myopic", None),
    "static_one_step": ("static", "one_step", None),
    "static_awr": ("static", "awr", None),
    "interactive": ("interactive", "myopic", "prompted"),
    "calibrated": ("calibrated", "myopic", "calibrated"),
    "calibrated_realism": ("calibrated", "myopic", "calibrated_realism"),
    "oracle": ("interactive", "myopic", "real"),
}
"""``static_awr`` is the multi-turn logs-only arm (advantage-weighted regression on the logged acts
by their judged return-to-go); ``oracle`` is the same RL, budget and start trained against the real
user itself: the learner's ceiling under this budget, not a paradigm."""
PAIRS = (("calibrated", "interactive"), ("calibrated_realism", "interactive"), ("calibrated_realism", "calibrated"),
         ("interactive", "static_myopic"), ("interactive", "static_one_step"), ("interactive", "static_awr"),
         ("calibrated", "static_awr"))
"""The paradigm comparisons of every task; each arm against the SFT agent is added by :func:`comparisons`."""


def arms(cfg: PipelineConfig) -> tuple[str, ...]:
    """The RL arms of a run: the three Static Context RL variants, Interactive RL, Calibrated
    Interactive RL with the SFT simulator and (with ``--realism-steps`` > 0) with the realism-tuned
    one, and the oracle (RL against the real user)."""
    return tuple(a for a in ARMS if a != "calibrated_realism" or cfg.realism_steps > 0)


def comparisons(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """The paired comparisons of one task: :data:`PAIRS` among the run's arms, then every arm against ``sft``."""
    present = arms(cfg)
    return [p for p in PAIRS if p[0] in present and p[1] in present] + [(a, "sft") for a in present]


@dataclass
class SeedRun:
    """What every stage of one (task, seed) shares: its settings, folder, task, users and logs."""

    cfg: PipelineConfig
    task_name: str
    k: int
    device: torch.device
    prep: PreparedTask
    vocab: Vocab
    real: ExplicitUser
    prompted: ExplicitUser
    train: dict
    held: dict
    cache: StageCache

    @property
    def label(self) -> str:
        return f"{self.task_name} seed{self.k}"

    @property
    def folder(self) -> Path:
        return self.cache.folder

    def gen(self, *key) -> torch.Generator:
        """The torch generator of the draw named ``key`` in this (task, seed)."""
        return torch_generator(self.cfg.seed, self.task_name, self.k, *key)

    def rng(self, *key) -> np.random.Generator:
        """The NumPy generator of the draw named ``key`` in this (task, seed)."""
        return numpy_rng(self.cfg.seed, self.task_name, self.k, *key)

    def build(self, name: str, n_classes: int | None = None) -> Transformer:
        """A fresh network initialised from its own key."""
        with torch_init_seed(self.cfg.seed, self.task_name, self.k, "init", name):
            net = ModelConfig(self.cfg.d_model, self.cfg.n_layer).build(self.vocab, n_classes)
        if self.cfg.perturb_init:
            perturb_weights(net, torch_generator(self.cfg.perturb_init, self.task_name, self.k, "perturb", name))
        return net.to(self.device)

    def model_stage(self, name: str, steps: int, make: Callable[[Callable], Transformer]) -> Transformer:
        """``<name>.pt`` loaded, or ``make(progress)`` computed (per-step progress with ETA) and saved."""
        def compute() -> Transformer:
            prog = Progress(steps, f"{self.label} {name}", min_interval=5.0)
            return make(lambda step, loss: prog.update(1, note=f"loss {loss:.4f}"))
        return self.cache.torch(name, compute, load=lambda path: load_model(path).to(self.device), save=save_model).eval()


def _on(data: dict, device: torch.device) -> dict:
    return {k: v.to(device) for k, v in data.items()}


def seed_folder(cfg: PipelineConfig, task_name: str, k: int) -> Path:
    """Where the stages of one (task, seed) are saved."""
    return Path(cfg.out_dir) / task_name / f"seed{k}"


def seed_setup(cfg: PipelineConfig, task_name: str, k: int) -> SeedRun:
    """Stage 1: the task and its users, and the logs of ``pi_data`` (written once as
    ``logs.jsonl``, read back on every call) split into train and held-out."""
    folder = seed_folder(cfg, task_name, k)
    dev = resolve_device(cfg.device)
    task = make_task(task_name, cfg.horizon, cfg.reward_source)
    prep = prepare_task(task, cfg.real_user)
    vocab = Vocab(task)
    logs_path = folder / "logs.jsonl"
    if not logs_path.exists():
        write_jsonl(logs_path, task, sample_logs(prep, cfg.n_logs, rng=numpy_rng(cfg.seed, task_name, k, "logs")))
    train_logs, held_logs = split(read_jsonl(logs_path, prep.space), cfg.held_out, rng=numpy_rng(cfg.seed, task_name, k, "split"))
    return SeedRun(cfg, task_name, k, dev, prep, vocab, ExplicitUser(task, prep.real),
                   ExplicitUser(task, prompted_simulator(cfg.accept_wrong, cfg.leak)),
                   _on(encode(vocab, train_logs), dev), _on(encode(vocab, held_logs), dev), StageCache(folder))


@dataclass(frozen=True)
class UserModels:
    """Stage 2's outputs: the SFT agent, the training user of every arm (``None`` for the static
    arms), every user model measured (``real`` and ``prompted`` are explicit) and the discriminator."""

    sft_agent: Transformer
    training_users: dict
    sims: dict
    discriminator: Transformer


def user_model_stages(run: SeedRun) -> UserModels:
    """Stage 2: SFT agent and calibrated simulator (same budget), the realism discriminator
    against the calibrated simulator and, with ``--realism-steps`` > 0, the realism-tuned simulator."""
    cfg, vocab, train = run.cfg, run.vocab, run.train
    sft_cfg = SFTConfig(cfg.sft_steps)
    agent = run.model_stage("sft_agent", cfg.sft_steps, lambda pr: sft(vocab, run.build("agent"), train, "agent", sft_cfg, run.gen("sft_agent"), pr))
    sim_sft = run.model_stage("sim_sft", cfg.sft_steps, lambda pr: sft(vocab, run.build("sim"), train, "user", sft_cfg, run.gen("sim_sft"), pr))
    disc = run.model_stage("discriminator", cfg.disc_steps, lambda pr: train_discriminator(
        vocab, run.build("discriminator", 2), sim_sft, train, SFTConfig(cfg.disc_steps), run.gen("discriminator"), pr))
    users = {None: None, "real": run.real, "prompted": run.prompted, "calibrated": NeuralUser(vocab, sim_sft)}
    sims = {"real": run.real, "prompted": run.prompted, "calibrated": sim_sft}
    if cfg.realism_steps:
        sim_realism = run.model_stage("sim_realism", cfg.realism_steps, lambda pr: realism_finetune(
            vocab, sim_sft, disc, train, SFTConfig(cfg.realism_steps, lr=3e-4), cfg.rl.kl_coef, run.gen("sim_realism"), pr))
        users["calibrated_realism"] = NeuralUser(vocab, sim_realism)
        sims["calibrated_realism"] = sim_realism
    return UserModels(agent, {arm: users[ARMS[arm][2]] for arm in arms(cfg)}, sims, disc)


def rl_stage(run: SeedRun, arm: str, models: UserModels) -> tuple[Transformer, list[dict]]:
    """Stage 3 for one arm: RL from the SFT agent, resumed from its checkpoint ``rl_<arm>.ckpt``;
    the agent (``agent_<arm>.pt``) and its learning curve (``curve_<arm>.json``). Every arm's curve
    point at a step is evaluated on the same goals and draws (common random numbers)."""
    cfg = run.cfg
    paradigm, static_reward, _ = ARMS[arm]
    train_user = models.training_users[arm]

    def evaluate(agent: Transformer, step: int) -> dict:
        return M.evaluate_agent(run.vocab, agent, run.real, draw_noise(run.vocab.task, cfg.n_curve, run.gen("curve", step)), train_user)

    out: dict = {}  # the one RL run behind the agent and its curve

    def train() -> tuple[Transformer, list[dict]]:
        if "rl" not in out:
            prog = Progress(cfg.rl.steps, f"{run.label} rl_{arm}", min_interval=5.0)
            out["rl"] = train_agent(run.vocab, models.sft_agent, paradigm, replace(cfg.rl, static_reward=static_reward),
                                    run.gen("rl", arm), logs=run.train, user=train_user, evaluate=evaluate,
                                    progress=lambda step, loss: prog.update(1, note=f"loss {loss:.4f}"),
                                    checkpoint=run.folder / f"rl_{arm}.ckpt")
        return out["rl"]

    agent = run.cache.torch(f"agent_{arm}", lambda: train()[0], load=lambda path: load_model(path).to(run.device),
                            save=save_model).eval()
    curve = run.cache.json(f"curve_{arm}", lambda: train()[1])
    return agent, curve


def measure_stage(run: SeedRun, models: UserModels, agents: dict, curves: dict) -> dict:
    """Stage 4: every measurement of one (task, seed) (``measures.json``).

    ``J_real`` of the SFT agent and of every arm on one draw of :func:`draw_noise` (common random
    numbers); ``eval_var[a - b]``: the variance of the mean of the per-dialogue paired difference
    of judged returns, the evaluation part of that seed's difference (the rest of the spread over
    seeds is training)."""
    cfg, vocab, prep, real = run.cfg, run.vocab, run.prep, run.real
    task = vocab.task
    # d^{pi_data}: a fresh sample of n_eval logging dialogues (the held-out logs are few, and a
    # plug-in TV is biased upwards by about sqrt(contexts / n))
    ref = _on(encode(vocab, sample_logs(prep, cfg.n_eval, rng=run.rng("pi_data_sample"))), run.device)
    ref_states = M.summaries(prep.space, ref["actions"], ref["acts"])
    noise = draw_noise(task, cfg.n_eval, run.gen("evaluation"))
    ro_sft = rollout(vocab, models.sft_agent, real, noise=noise)
    returns = {"sft": ro_sft.judge_rewards.sum(1).double()}
    out = {"task": run.task_name, "seed": run.k, "sft": {**M.evaluation(ro_sft), "J_static": M.static_objective(vocab, models.sft_agent, ref)},
           "paradigms": {}, "simulators": {}}
    for arm, agent in agents.items():
        train_user = models.training_users[arm]
        ro_real = rollout(vocab, agent, real, noise=noise)
        ro_sim = rollout(vocab, agent, train_user, noise=noise, real=real) if train_user is not None else None
        returns[arm] = ro_real.judge_rewards.sum(1).double()
        eps = M.eps_on_logs(vocab, agent, prep.space, prep.data_policy, ref, ref_states)
        s_real = M.summaries(prep.space, ro_real.actions, ro_real.acts)
        res = {**M.evaluation(ro_real, ro_sim), "J_static": M.static_objective(vocab, agent, ref), "eps": eps,
               "B_eps": compounding(np.array(eps["mean"])).tolist(),
               "Delta": M.plugin_tv(s_real, ref_states, prep.space.n_states, rng=run.rng("Delta", arm)), "curve": curves[arm]}
        if ro_sim is not None:
            errs = M.simulator_errors(ro_sim, task)
            s_sim = M.summaries(prep.space, ro_sim.actions, ro_sim.acts)
            res.update({"delta": errs["delta"], "rho": errs["rho"],
                        "B_delta": compounding(np.array(errs["delta"]["mean"])).tolist(),
                        "D": M.plugin_tv(s_real, s_sim, prep.space.n_states, rng=run.rng("D", arm))})
        out["paradigms"][arm] = res
    out["eval_var"] = {f"{a} - {b}": float((returns[a] - returns[b]).var() / cfg.n_eval) for a, b in comparisons(cfg)}
    for name, user in models.sims.items():
        out["simulators"][name] = {**M.sycophancy(vocab, user, run.held), "nll_per_turn": user_nll(vocab, user, run.held).tolist()}
    for name, sim in models.sims.items():
        if name == "real":
            continue
        d = models.discriminator if name == "calibrated" else train_discriminator(
            vocab, run.build(f"discriminator_{name}", 2), sim, run.train, SFTConfig(cfg.disc_steps), run.gen("discriminator", name))
        out["simulators"][name]["discriminator_accuracy"] = discriminator_accuracy(vocab, d, sim, run.held, run.gen("disc_eval", name))
    return out


def run_task_seed(cfg: PipelineConfig, task_name: str, k: int) -> dict:
    """Every stage of one (task, seed) in order, resuming from what is saved under
    ``<out_dir>/<task>/seed<k>/``; the measurements (``measures.json``). A picklable top-level
    function: the job a worker process runs."""
    folder = seed_folder(cfg, task_name, k)
    if (folder / "measures.json").exists():
        return read_json(folder / "measures.json")
    run = seed_setup(cfg, task_name, k)
    models = user_model_stages(run)
    agents, curves = {}, {}
    for arm in arms(cfg):
        agents[arm], curves[arm] = rl_stage(run, arm, models)
    out = run.cache.json("measures", lambda: measure_stage(run, models, agents, curves))
    write_json(folder / "timings.json", run.cache.seconds)  # stages computed in the call that finished this (task, seed)
    return out
