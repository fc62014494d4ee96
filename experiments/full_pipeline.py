"""The main job: Static Context RL vs Interactive RL vs Calibrated Interactive RL, end to end.

``python -m experiments.full_pipeline [--preset smoke|default|gpu] [options]``

For every task and seed (docs/pipeline.md):

1. **logs** — ``pi_data`` talks to the real user; a train / held-out split (JSONL, documented in
   ``shiftbounds.dialogue.logs``);
2. **SFT agent** — the shared initialisation of every arm (reported as the ``sft`` row);
3. **calibrated simulator** — SFT of a transformer user model on the train logs' user turns (goal
   and history as input), a realism discriminator, and ``--realism-steps`` of
   discriminator-reward fine-tuning (a second calibrated simulator);
4. **RL** — one policy-gradient algorithm (group baseline, exact KL to the SFT agent), the same
   budget for each arm: Static Context RL on logged contexts with the judge's reward (myopic and
   one-step variants), Interactive RL against the prompted simulator, Calibrated Interactive RL
   against each calibrated simulator (paid by their simulator's acceptance);
5. **measurements** — ``J_real`` (judge, real user) and ``J_sim`` over training, per-turn
   ``eps_t``, ``Delta_t``, ``delta_t``, ``D_t``, ``rho_t`` with CIs (estimators in
   ``shiftbounds.dialogue.neural.measures``), the simulators' sycophancy and realism, and per-seed paired
   differences of ``J_real`` between arms.

Presets: ``smoke`` (about 15 s on 2 cores; the tests), ``default`` (the main results), ``gpu``
(wider models, more logs and steps; ``--device auto`` picks the GPU).

Outputs under ``--out-dir`` (default ``results/full_pipeline/<preset>/``): ``results.json``,
``results.md`` (main table with 95 % CIs over seeds and the paired differences), ``main.csv``,
``paired.csv``, ``per_turn.csv``, ``curves.csv``, ``simulators.csv``, ``config.json`` (settings
and environment; ``--config`` reruns it), ``timings.json`` / ``timings.md`` and figures (PNG +
PDF). Every stage is saved under ``<task>/seed<k>/`` and skipped on a rerun; RL resumes from its
last evaluation; a rerun with settings that change results is refused.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from shiftbounds.dialogue.exact.study import prompted_paradigm, reference_results
from shiftbounds.dialogue.logs import read_jsonl, split, write_jsonl
from shiftbounds.dialogue.neural import measures as M
from shiftbounds.dialogue.neural.rollout import ExplicitUser, NeuralUser, rollout
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
from shiftbounds.dialogue.prepare import make_task, prepare_task, sample_logs
from shiftbounds.dialogue.tasks import REAL_USERS, REWARD_SOURCES, TASKS, prompted_simulator
from shiftbounds.figures import plot_pipeline_curves, plot_pipeline_shifts, plot_pipeline_user_models
from shiftbounds.nn.transformer import load_model, save_model
from shiftbounds.theory.bounds import compounding
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import Progress, format_seconds
from shiftbounds.utils.seeding import numpy_rng, torch_generator, torch_init_seed
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import holm_verdicts, mean_ci, paired_difference


@dataclass(frozen=True)
class PipelineConfig:
    """Options of ``experiments.full_pipeline`` (each a flag)."""

    # --- tasks and data
    tasks: tuple[str, ...] = field(default=("guess_number", "booking"), metadata={"help": f"tasks, from {sorted(TASKS)}"})
    horizon: int = field(default=4, metadata={"help": "agent turns H"})
    n_logs: int = field(default=1500, metadata={"help": "logged dialogues of pi_data with the real user (train + held-out)"})
    held_out: float = field(default=0.2, metadata={"help": "held-out fraction of the logs"})
    real_user: str = field(default="memory", metadata={"help": f"the real user, from {sorted(REAL_USERS)}: 'memory' is consistent, impatient with repeated questions and clarifies more as the dialogue grows"})
    accept_wrong: float = field(default=0.3, metadata={"help": "prompted simulator: probability of accepting a wrong proposal"})
    leak: float = field(default=0.2, metadata={"help": "prompted simulator: probability of leaking the goal"})
    reward_source: str = field(default="acceptance", metadata={"help": f"what simulators pay during RL, from {REWARD_SOURCES}"})
    # --- models and stages
    d_model: int = field(default=64, metadata={"help": "width of every network"})
    n_layer: int = field(default=2, metadata={"help": "blocks of every network"})
    sft_steps: int = field(default=1000, metadata={"help": "SFT steps (agent and simulator)"})
    disc_steps: int = field(default=200, metadata={"help": "realism discriminator steps"})
    realism_steps: int = field(default=200, metadata={"help": "discriminator-reward fine-tuning steps of the simulator; > 0 adds the calibrated_realism arm (0 = off)"})
    rl_steps: int = field(default=1000, metadata={"help": "policy-gradient steps per paradigm (same for all)"})
    goals_per_step: int = field(default=16, metadata={"help": "goals (or logged contexts) per RL step"})
    group: int = field(default=4, metadata={"help": "group size of the baseline"})
    rl_lr: float = field(default=1e-3, metadata={"help": "RL learning rate"})
    kl_coef: float = field(default=0.05, metadata={"help": "KL(pi || pi_SFT) weight"})
    eval_every: int = field(default=100, metadata={"help": "RL steps between learning-curve points"})
    n_eval: int = field(default=2000, metadata={"help": "dialogues per final evaluation"})
    n_curve: int = field(default=400, metadata={"help": "dialogues per learning-curve point"})
    # --- run
    seeds: int = field(default=5, metadata={"help": "seeds (independent logs and training)"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda or auto (CUDA when available); generators stay on the CPU, so draws match across devices"})
    out_dir: str = field(default="results/full_pipeline/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ValueError(f"--tasks must name tasks from {sorted(TASKS)}; got unknown {bad}")
        if self.real_user not in REAL_USERS:
            raise ValueError(f"--real-user must be one of {sorted(REAL_USERS)}; got {self.real_user!r}")
        top = 4 if self.real_user == "memory" else 6
        if not 2 <= self.horizon <= top:
            raise ValueError(f"--horizon must lie in [2, {top}] with --real-user {self.real_user} (the exact views grow fast); got {self.horizon}")
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
        if self.n_eval < 10 or self.n_curve < 10:
            raise ValueError(f"--n-eval and --n-curve must be >= 10; got {self.n_eval}, {self.n_curve}")
        if self.d_model % 4:
            raise ValueError(f"--d-model must be a multiple of 4 (4 heads); got {self.d_model}")
        self.rl_config()  # validates the RL options
        SFTConfig(self.sft_steps)

    def rl_config(self) -> RLConfig:
        return RLConfig(self.rl_steps, self.goals_per_step, self.group, self.rl_lr, self.kl_coef, "myopic", self.eval_every)


PRESETS = {
    "default": {},
    "smoke": {"n_logs": 80, "sft_steps": 30, "disc_steps": 10, "realism_steps": 5, "rl_steps": 10, "eval_every": 5,
              "n_eval": 200, "n_curve": 50, "seeds": 2, "horizon": 3, "d_model": 32, "n_layer": 1},
    "gpu": {"n_logs": 5000, "d_model": 256, "n_layer": 4, "sft_steps": 3000, "disc_steps": 1000, "realism_steps": 500,
            "rl_steps": 3000, "goals_per_step": 64, "group": 8, "n_eval": 20000, "n_curve": 2000, "seeds": 5,
            "device": "auto"},
}


ARMS = {  # arm -> (paradigm, Static Context RL reward, training user)
    "static_myopic": ("static", "myopic", None),
    "static_one_step": ("static", "one_step", None),
    "interactive": ("interactive", "myopic", "prompted"),
    "calibrated": ("calibrated", "myopic", "calibrated"),
    "calibrated_realism": ("calibrated", "myopic", "calibrated_realism"),
}
PAIRS = (("calibrated", "interactive"), ("calibrated_realism", "interactive"), ("calibrated_realism", "calibrated"),
         ("interactive", "static_myopic"), ("interactive", "static_one_step"))


def arms(cfg: PipelineConfig) -> tuple[str, ...]:
    """The RL arms of a run: both Static Context RL variants, Interactive RL, Calibrated
    Interactive RL with the SFT simulator and (with ``--realism-steps`` > 0) with the realism-tuned one."""
    return tuple(a for a in ARMS if a != "calibrated_realism" or cfg.realism_steps > 0)


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda``, or ``auto`` (CUDA when available); a missing GPU is an error naming the option."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available here")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def _on(data: dict, device: torch.device) -> dict:
    return {k: v.to(device) for k, v in data.items()}


def run_task_seed(cfg: PipelineConfig, task_name: str, k: int) -> dict:
    """Every stage for one (task, seed), resuming from what is saved under ``<task>/seed<k>/``.

    Every stage draws from a generator keyed by (task, seed index, stage[, step]) from ``--seed``
    (:mod:`shiftbounds.utils.seeding`), and every network is initialised from its own key, so a
    stage computes the same whether the stages before it ran in this process or were loaded."""
    folder = Path(cfg.out_dir) / task_name / f"seed{k}"
    cache = StageCache(folder)
    if (folder / "measures.json").exists():
        return read_json(folder / "measures.json")
    dev = resolve_device(cfg.device)
    gen = lambda *key: torch_generator(cfg.seed, task_name, k, *key)  # noqa: E731 - one generator per keyed draw
    rng = lambda *key: numpy_rng(cfg.seed, task_name, k, *key)  # noqa: E731
    task = make_task(task_name, cfg.horizon, cfg.reward_source)
    prep = prepare_task(task, cfg.real_user)
    vocab = Vocab(task)
    mcfg = ModelConfig(cfg.d_model, cfg.n_layer)
    real = ExplicitUser(task, prep.real)
    prompted = ExplicitUser(task, prompted_simulator(cfg.accept_wrong, cfg.leak))
    label = f"{task_name} seed{k}"
    # ------------------------------------------------------------------ 1. logs
    logs_path = folder / "logs.jsonl"
    if not logs_path.exists():
        write_jsonl(logs_path, task, sample_logs(prep, cfg.n_logs, rng=rng("logs")))
    train_logs, held_logs = split(read_jsonl(logs_path, prep.space), cfg.held_out, rng=rng("split"))
    train, held = _on(encode(vocab, train_logs), dev), _on(encode(vocab, held_logs), dev)

    def build(name: str, n_classes: int | None = None):
        with torch_init_seed(cfg.seed, task_name, k, "init", name):
            return mcfg.build(vocab, n_classes).to(dev)

    def stage(name: str, steps: int, make):
        """Load ``<name>.pt`` or compute it with ``make(progress)`` (per-step progress with ETA) and save it."""
        def compute():
            prog = Progress(steps, f"{label} {name}", min_interval=5.0)
            return make(lambda step, loss: prog.update(1, note=f"loss {loss:.4f}"))
        return cache.torch(name, compute, load=lambda path: load_model(path).to(dev), save=save_model).eval()

    # ------------------------------------------------------------------ 2. SFT agent, 3. calibrated simulator
    sft_cfg = SFTConfig(cfg.sft_steps)
    sft_agent = stage("sft_agent", cfg.sft_steps, lambda pr: sft(vocab, build("agent"), train, "agent", sft_cfg, gen("sft_agent"), pr))
    sim_sft = stage("sim_sft", cfg.sft_steps, lambda pr: sft(vocab, build("sim"), train, "user", sft_cfg, gen("sim_sft"), pr))
    disc = stage("discriminator", cfg.disc_steps, lambda pr: train_discriminator(
        vocab, build("discriminator", 2), sim_sft, train, SFTConfig(cfg.disc_steps), gen("discriminator"), pr))
    users = {None: None, "prompted": prompted, "calibrated": NeuralUser(vocab, sim_sft)}
    sims = {"real": real, "prompted": prompted, "calibrated": sim_sft}
    if cfg.realism_steps:
        sim_realism = stage("sim_realism", cfg.realism_steps, lambda pr: realism_finetune(
            vocab, sim_sft, disc, train, SFTConfig(cfg.realism_steps, lr=3e-4), cfg.kl_coef, gen("sim_realism"), pr))
        users["calibrated_realism"] = NeuralUser(vocab, sim_realism)
        sims["calibrated_realism"] = sim_realism
    # ------------------------------------------------------------------ 4. RL, one algorithm for all paradigms
    agents, curves = {}, {}
    for arm in arms(cfg):
        paradigm, static_reward, user_key = ARMS[arm]
        train_user = users[user_key]

        def evaluate(agent, step, u=train_user, arm=arm):
            return M.evaluate_agent(vocab, agent, real, cfg.n_curve, gen("curve", arm, step), u)

        def run_rl(arm=arm, paradigm=paradigm, static_reward=static_reward, train_user=train_user, evaluate=evaluate):
            """RL of one arm, resumed from its checkpoint: ``(agent, curve)``."""
            prog = Progress(cfg.rl_steps, f"{label} rl_{arm}", min_interval=5.0)
            return train_agent(vocab, sft_agent, paradigm, replace(cfg.rl_config(), static_reward=static_reward),
                               gen("rl", arm), logs=train, user=train_user, evaluate=evaluate,
                               progress=lambda step, loss: prog.update(1, note=f"loss {loss:.4f}"),
                               checkpoint=folder / f"rl_{arm}.ckpt")

        rl: dict = {}  # the one RL run behind the agent and its curve (a rerun resumes from the final checkpoint)
        agents[arm] = cache.torch(f"agent_{arm}", lambda: rl.setdefault("out", run_rl())[0],
                                  load=lambda path: load_model(path).to(dev), save=save_model).eval()
        curves[arm] = cache.json(f"curve_{arm}", lambda: rl.setdefault("out", run_rl())[1])
    # ------------------------------------------------------------------ 5. measurements
    def measure() -> dict:
        # d^{pi_data}: a fresh sample of n_eval logging dialogues (the held-out logs are few, and a
        # plug-in TV is biased upwards by about sqrt(contexts / n))
        ref = _on(encode(vocab, sample_logs(prep, cfg.n_eval, rng=rng("pi_data_sample"))), dev)
        ref_states = M.summaries(prep.space, ref["actions"], ref["acts"])
        out = {"task": task_name, "seed": k, "sft": M.evaluate_agent(vocab, sft_agent, real, cfg.n_eval, gen("measure", "sft")),
               "paradigms": {}, "simulators": {}}
        for arm, agent in agents.items():
            train_user = users[ARMS[arm][2]]
            mg = gen("measure", arm)
            ev = M.evaluate_agent(vocab, agent, real, cfg.n_eval, mg, train_user)
            eps = M.eps_on_logs(vocab, agent, prep.space, prep.data_policy, ref, ref_states)
            goals = torch.randint(task.n_goals, (cfg.n_eval,), generator=mg).to(dev)
            ro_real = rollout(vocab, agent, real, goals, generator=mg)
            ro_sim = rollout(vocab, agent, train_user or real, goals, generator=mg, real=real)
            s_real = M.summaries(prep.space, ro_real.actions, ro_real.acts)
            s_sim = M.summaries(prep.space, ro_sim.actions, ro_sim.acts)
            res = {**ev, "eps": eps, "B_eps": compounding(np.array(eps["mean"])).tolist(),
                   "Delta": M.plugin_tv(s_real, ref_states, prep.space.n_states, rng=rng("Delta", arm)), "curve": curves[arm]}
            if train_user is not None:
                errs = M.simulator_errors(ro_sim, task)
                res.update({"delta": errs["delta"], "rho": errs["rho"],
                            "B_delta": compounding(np.array(errs["delta"]["mean"])).tolist(),
                            "D": M.plugin_tv(s_real, s_sim, prep.space.n_states, rng=rng("D", arm))})
            out["paradigms"][arm] = res
        for name, user in sims.items():
            out["simulators"][name] = {**M.sycophancy(vocab, user, held), "nll_per_turn": user_nll(vocab, user, held).tolist()}
        for name in sims:
            if name == "real":
                continue
            d = disc if name == "calibrated" else train_discriminator(
                vocab, build(f"discriminator_{name}", 2), sims[name], train, SFTConfig(cfg.disc_steps), gen("discriminator", name))
            out["simulators"][name]["discriminator_accuracy"] = discriminator_accuracy(vocab, d, sims[name], held, gen("disc_eval", name))
        return out

    out = cache.json("measures", measure)
    write_json(folder / "timings.json", cache.seconds)  # stages computed in the call that finished this (task, seed)
    return out


def exact_references(cfg: PipelineConfig, task_name: str) -> dict:
    """Exact ``J_real`` of the real-user optimum, ``pi_data`` and the exact Interactive-RL policy
    (the optimum against the prompted simulator), from the tabular engine: the same for every seed."""
    prep = prepare_task(make_task(task_name, cfg.horizon, cfg.reward_source), cfg.real_user)
    refs = reference_results(prep)
    return {"optimal": refs["optimal"]["J_real"], "pi_data": refs["pi_data"]["J_real"],
            "interactive_exact": prompted_paradigm(prep, cfg.accept_wrong, cfg.leak)["J_real"]}


def _ci_cells(prefix: str, x: np.ndarray) -> dict:
    e = mean_ci(x)
    return {prefix: e.value, prefix + "_ci": f"[{e.low:.3f}, {e.high:.3f}]"}


def paired_rows(cfg: PipelineConfig, runs: list[dict]) -> list[dict]:
    """Per-seed paired differences of ``J_real`` (the seeds share logs, SFT agent and simulators),
    with 95 % t-intervals over seeds; ``verdict`` names an ordering only when the CI excludes 0,
    ``holm verdict`` only when it also survives Holm's correction over the task's comparisons."""
    rows = []
    present = arms(cfg)
    pairs = [p for p in PAIRS if p[0] in present and p[1] in present] + [(a, "sft") for a in present]
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        val = lambda r, arm: r["sft"]["J_real"] if arm == "sft" else r["paradigms"][arm]["J_real"]  # noqa: E731
        ds = [paired_difference(np.array([val(r, a) for r in rs]), np.array([val(r, b) for r in rs]), (a, b)) for a, b in pairs]
        rows += [{"task": task, "difference": d["difference"], "mean": d["mean"], "ci": f"[{d['low']:.3f}, {d['high']:.3f}]",
                  "low": d["low"], "high": d["high"], "seeds": d["n"], "verdict": d["verdict"], "p": d["p"], "holm verdict": holm}
                 for d, holm in zip(ds, holm_verdicts(ds))]
    return rows


def summarise(cfg: PipelineConfig, runs: list[dict]) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Main table (exact references, the SFT agent, every arm), per-turn rows, learning-curve rows
    and simulator rows."""
    main, per_turn, curves, sims = [], [], [], []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        refs = exact_references(cfg, task)
        main += [{"task": task, "paradigm": "real-user optimum (exact)", "J_real": refs["optimal"]},
                 {"task": task, "paradigm": "pi_data (exact)", "J_real": refs["pi_data"]},
                 {"task": task, "paradigm": "Interactive RL optimum (exact)", "J_real": refs["interactive_exact"]},
                 {"task": task, "paradigm": "sft", **_ci_cells("J_real", np.array([r["sft"]["J_real"] for r in rs])),
                  "success": float(np.mean([r["sft"]["success"] for r in rs]))}]
        for arm in arms(cfg):
            ps = [r["paradigms"][arm] for r in rs]
            row = {"task": task, "paradigm": arm}
            for key in ("J_real", "success", "J_sim", "sim_gap"):
                if key in ps[0]:
                    row.update(_ci_cells(key, np.array([p[key] for p in ps])) if key in ("J_real", "sim_gap")
                               else {key: float(np.mean([p[key] for p in ps]))})
            row["sum_eps"] = float(np.mean([np.sum(p["eps"]["mean"]) for p in ps]))
            row["sum_Delta"] = float(np.mean([np.sum(p["Delta"]["mean"]) for p in ps]))
            if "delta" in ps[0]:
                row["sum_delta"] = float(np.mean([np.sum(p["delta"]["mean"]) for p in ps]))
                row["sum_rho"] = float(np.mean([np.sum(p["rho"]["mean"]) for p in ps]))
            main.append(row)
            for t in range(cfg.horizon):
                pr = {"task": task, "paradigm": arm, "t": t}
                for key in ("eps", "Delta", "delta", "D", "rho"):
                    if key in ps[0]:
                        pr[key] = float(np.mean([p[key]["mean"][t] for p in ps]))
                for key in ("B_eps", "B_delta"):
                    if key in ps[0]:
                        pr[key] = float(np.mean([p[key][t] for p in ps]))
                per_turn.append(pr)
            for p, r in zip(ps, rs):
                for c in p["curve"]:
                    curves.append({"task": task, "paradigm": arm, "seed": r["seed"], "step": c["step"],
                                   "agent_tokens": c["agent_tokens"], "J_real": c["J_real"], "J_sim": c.get("J_sim"),
                                   "pg": c.get("pg"), "kl": c.get("kl")})
        for name in rs[0]["simulators"]:
            ss = [r["simulators"][name] for r in rs]
            row = {"task": task, "user_model": name}
            for key in M.USER_RATES + ("discriminator_accuracy",):
                if key in ss[0]:
                    vals = np.array([float(s[key]) for s in ss])  # "nan" (no such turn) as JSON writes it
                    row[key] = float(vals[np.isfinite(vals)].mean()) if np.isfinite(vals).any() else float("nan")
            row["nll_per_turn"] = float(np.mean([np.mean(s["nll_per_turn"]) for s in ss]))
            sims.append(row)
    return main, per_turn, curves, sims


def run(cfg: PipelineConfig) -> dict:
    """Run (or resume) every stage, write every output, return the results dict.

    Refuses an ``--out-dir`` made under settings that change results (naming them). Every output
    file except ``timings.json`` / ``timings.md`` (wall seconds) is the same, byte for byte,
    whether the run went through at once or was killed and resumed any number of times."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    prog = Progress(len(cfg.tasks) * cfg.seeds, "full_pipeline (task, seed) runs")
    runs, times = [], {}
    for task in cfg.tasks:
        for k in range(cfg.seeds):
            t0 = time.perf_counter()
            runs.append(run_task_seed(cfg, task, k))
            times[f"{task}/seed{k}"] = time.perf_counter() - t0
            prog.update(1, note=f"{task} seed{k} done")
    main, per_turn, curves, sims = summarise(cfg, runs)
    paired = paired_rows(cfg, runs)
    results = {"config": asdict(cfg), "main": main, "paired": paired, "per_turn": per_turn, "simulators": sims,
               "curves": curves, "runs": runs}
    write_json(out / "results.json", results)
    write_csv(out / "main.csv", main)
    write_csv(out / "paired.csv", paired)
    write_csv(out / "per_turn.csv", per_turn)
    write_csv(out / "curves.csv", curves)
    write_csv(out / "simulators.csv", sims)
    md = (f"# Full pipeline: three paradigms, small transformers\n\nH = {cfg.horizon}; {cfg.n_logs} logged dialogues "
          f"({cfg.held_out:.0%} held out); real user: {cfg.real_user}; prompted simulator accept-wrong {cfg.accept_wrong}, leak {cfg.leak}; "
          f"{cfg.rl_steps} RL steps x {cfg.goals_per_step * cfg.group} dialogues (same agent-token budget for every "
          f"arm); {cfg.seeds} seeds, 95 % CIs over seeds. J_real: judged return against the real user "
          f"(explicit ground-truth model); J_sim: the training simulator's own acceptance return. Exact rows come from "
          f"the tabular engine; `sft` is the shared starting point of every arm.\n\n"
          + markdown_table(main, ["task", "paradigm", "J_real", "J_real_ci", "success", "J_sim", "sim_gap", "sim_gap_ci",
                                  "sum_eps", "sum_Delta", "sum_delta", "sum_rho"])
          + "\n## Paired differences of J_real over seeds (95 % CI; an ordering only where it excludes 0; Holm: also after correction over the task's comparisons)\n\n"
          + markdown_table(paired, ["task", "difference", "mean", "ci", "p", "verdict", "holm verdict"])
          + "\n## User models at held-out logged histories\n\n"
          + markdown_table(sims, ["task", "user_model", *M.USER_RATES, "nll_per_turn", "discriminator_accuracy"])
          + "\nDiscriminator accuracy: a classifier of real vs simulated user turns trained on the train logs, "
            "scored on held-out logs (0.5 = indistinguishable). Wall times: timings.md.\n")
    atomic_write_text(out / "results.md", md)
    stage_s = [read_json(p) for p in sorted(out.glob("*/seed*/timings.json"))]
    names = list(dict.fromkeys(n for t in stage_s for n in t))
    stage_rows = [{"stage": n, "mean_seconds": float(np.mean([t[n] for t in stage_s if n in t])),
                   "runs": sum(n in t for t in stage_s)} for n in names]
    write_json(out / "timings.json", {"per_task_seed_this_call": times, "stages": stage_rows})
    atomic_write_text(out / "timings.md", "# Wall time\n\nPer (task, seed) in the last call:\n\n"
                      + "\n".join(f"- {k}: {format_seconds(v)}" for k, v in times.items())
                      + "\n\nPer stage, over the (task, seed) runs whose stages were computed:\n\n"
                      + (markdown_table(stage_rows) if stage_rows else "(none)\n"))
    plot_pipeline_curves(results, out / "learning_curves")
    plot_pipeline_shifts(results, out / "per_turn_shifts")
    plot_pipeline_user_models(results, out / "user_models")
    return results


def main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--task" in argv:  # the real-data path: ``--task taskmaster4`` runs experiments.real_dialogue
        i = argv.index("--task")
        if i + 1 >= len(argv) or argv[i + 1] != "taskmaster4":
            raise SystemExit("--task takes 'taskmaster4' (the real-data path); synthetic tasks use --tasks")
        from experiments import real_dialogue

        return real_dialogue.main(argv[:i] + argv[i + 2:])
    cfg = parse_config(PipelineConfig, __doc__, PRESETS, argv, name="experiments.full_pipeline")
    results = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "results.md").read_text())
    print(f"wrote {cfg.out_dir}: results.md, results.json, main.csv, paired.csv, per_turn.csv, curves.csv, simulators.csv, "
          "timings.md, figures")
    return results


if __name__ == "__main__":
    main()
