"""``shiftbounds``: the your-own-logs path from the command line.

``shiftbounds calibrate | measure | train | evaluate [--config FILE] [options]`` (``--help`` on each)

* ``calibrate`` — SFT a base model (a folder or Hub id) on the user turns of your logs into a
  calibrated user simulator (``<out-dir>/simulator``);
* ``measure`` — how human the simulator is on held-out logs: NLL of the people's turns by turn,
  optionally a freshly trained real-vs-simulated discriminator's AUC by turn (``--classifier``),
  and, with a task's probes, sycophancy (accept / reject / unclear replies to right and wrong
  confirmations), goal disclosure and goal consistency beside the logged people's; writes
  ``report.md``, ``report.json`` and ``report.{png,pdf}``;
* ``train`` — one paradigm (``static``, ``interactive``, ``calibrated``) from an SFT agent, with
  the task's judge as reward (``<out-dir>/agent``);
* ``evaluate`` — an agent against a simulator on held-out goals: the judge's mean reward with its
  interval, per-dialogue rewards and every transcript (``evaluation.json``, ``transcripts.jsonl``).

The task (its judge and probes) is a built-in name (``--task taskmaster4``) or your own objects as
``module:name`` import paths (``--judge mypkg.task:judge``, ``--probes mypkg.task:Probes``, a
``ProbeBuilder`` class); logs are JSONL files in the record format of docs/conversations.md. Every
option can come from a YAML or JSON file (``--config``), as for the experiments.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shiftbounds.conversations.calibration import CalibrationConfig, calibrate
from shiftbounds.conversations.measures import discriminator_auc_by_turn, nll_by_turn, sycophancy_report
from shiftbounds.conversations.models import load_chat_model
from shiftbounds.conversations.paradigms import PARADIGMS, ParadigmConfig, evaluate_agent, train_paradigm
from shiftbounds.conversations.records import read_conversations
from shiftbounds.conversations.simulators import PERSONA, LMUser
from shiftbounds.conversations.tasks import Taskmaster4Probes, taskmaster4_judge
from shiftbounds.figures.text import plot_simulator_report
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.io import atomic_write_text, markdown_table, write_json
from shiftbounds.utils.seeding import numpy_rng

TASKS = {"taskmaster4": {"judge": taskmaster4_judge, "probes": Taskmaster4Probes}}
"""Built-in tasks: their judge and probe builder."""


def load_object(spec: str, option: str) -> Any:
    """The object named by ``module:name`` (e.g. ``mypkg.task:judge``).

    Raises:
        ValueError: ``spec`` is not ``module:name`` or names nothing importable, naming ``option``.
    """
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"{option} must be module:name (e.g. mypkg.task:judge); got {spec!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{option} {spec!r} names nothing importable ({exc})") from exc


def task_part(task: str, spec: str, part: str) -> Any:
    """The task's ``judge`` or ``probes`` class: from ``spec`` (``module:name``) when given, else the
    built-in task ``task``; ``None`` when neither names one."""
    if spec:
        return load_object(spec, f"--{part}")
    if task:
        if task not in TASKS:
            raise ValueError(f"--task must be one of {tuple(TASKS)} (or pass --judge / --probes as module:name); got {task!r}")
        return TASKS[task][part]
    return None


@dataclass(frozen=True)
class CalibrateCommand:
    """Options of ``shiftbounds calibrate``."""

    logs: str = field(default="", metadata={"help": "JSONL logs to calibrate on (their user turns)"})
    base: str = field(default="", metadata={"help": "base model: a local folder or a Hub id"})
    steps: int = field(default=200, metadata={"help": "SFT steps"})
    batch: int = field(default=8, metadata={"help": "examples per step"})
    lr: float = field(default=5e-4, metadata={"help": "learning rate"})
    max_length: int = field(default=512, metadata={"help": "tokens per example"})
    persona: str = field(default=PERSONA, metadata={"help": "the simulator's system prompt; must contain {goal}"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out", metadata={"help": "the simulator goes to <out-dir>/simulator"})

    def __post_init__(self) -> None:
        if not self.logs or not self.base:
            raise ValueError(f"--logs and --base are required; got logs={self.logs!r}, base={self.base!r}")


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
    max_turns: int = field(default=400, metadata={"help": "at most this many user turns per split for the discriminator"})
    max_new_tokens: int = field(default=48, metadata={"help": "tokens per simulated reply"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out/measure", metadata={"help": "folder for report.md/json/png/pdf"})

    def __post_init__(self) -> None:
        if not self.logs or not self.simulator:
            raise ValueError(f"--logs and --simulator are required; got logs={self.logs!r}, simulator={self.simulator!r}")
        if self.classifier and not self.train_logs:
            raise ValueError("--classifier needs --train-logs (the discriminator is trained on other logs than it is tested on)")


@dataclass(frozen=True)
class TrainCommand:
    """Options of ``shiftbounds train``."""

    paradigm: str = field(default="calibrated", metadata={"help": f"one of {PARADIGMS}"})
    agent: str = field(default="", metadata={"help": "starting agent folder (e.g. an SFT agent)"})
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
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out/train", metadata={"help": "the agent goes to <out-dir>/agent"})

    def __post_init__(self) -> None:
        if self.paradigm not in PARADIGMS:
            raise ValueError(f"--paradigm must be one of {PARADIGMS}; got {self.paradigm!r}")
        if not self.agent or not self.logs or (self.paradigm != "static" and not self.simulator):
            raise ValueError("--agent and --logs are required, and --simulator for the interactive paradigms")


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
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="shiftbounds_out/evaluate", metadata={"help": "folder for evaluation.json and transcripts.jsonl"})

    def __post_init__(self) -> None:
        if not self.agent or not self.logs or not self.simulator:
            raise ValueError("--agent, --logs and --simulator are required")


def run_calibrate(cfg: CalibrateCommand) -> dict:
    folder = calibrate(read_conversations(cfg.logs), cfg.base, Path(cfg.out_dir) / "simulator",
                       CalibrationConfig(steps=cfg.steps, batch=cfg.batch, lr=cfg.lr, max_length=cfg.max_length,
                                         seed=cfg.seed, persona=cfg.persona))
    return {"simulator": str(folder)}


def run_measure(cfg: MeasureCommand) -> dict:
    held = read_conversations(cfg.logs)
    model, tok = load_chat_model(cfg.simulator)
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens)
    report: dict[str, Any] = {"config": asdict(cfg), "nll_by_turn": nll_by_turn(model, tok, held)}
    if cfg.classifier:
        report["discriminator_auc"] = discriminator_auc_by_turn(sim, cfg.classifier, read_conversations(cfg.train_logs), held,
                                                                steps=cfg.disc_steps, max_turns=cfg.max_turns, seed=cfg.seed)
    builder_cls = task_part(cfg.task, cfg.probes, "probes")
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
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens) if cfg.simulator else None
    pcfg = ParadigmConfig(steps=cfg.steps, batch=cfg.batch, num_generations=cfg.num_generations, lr=cfg.lr,
                          max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens, user_first=cfg.user_first, seed=cfg.seed)
    folder = train_paradigm(cfg.paradigm, cfg.agent, read_conversations(cfg.logs), judge, pcfg, Path(cfg.out_dir) / "agent",
                            sim.clone if sim is not None else None)
    return {"agent": str(folder)}


def run_evaluate(cfg: EvaluateCommand) -> dict:
    judge = task_part(cfg.task, cfg.judge, "judge")
    if judge is None:
        raise ValueError("evaluate needs a judge: --task or --judge module:name")
    model, tok = load_chat_model(cfg.agent)
    sim = LMUser.from_pretrained(cfg.simulator, max_new_tokens=cfg.max_new_tokens)
    res = evaluate_agent(model, tok, read_conversations(cfg.logs), sim.clone, judge, max_turns=cfg.max_turns,
                         max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, user_first=cfg.user_first,
                         seed=cfg.seed, return_transcripts=True)
    out = Path(cfg.out_dir)
    transcripts = res.pop("transcripts")
    write_json(out / "evaluation.json", {"config": asdict(cfg), **res})
    atomic_write_text(out / "transcripts.jsonl", "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in transcripts))
    return res


COMMANDS = {"calibrate": (CalibrateCommand, run_calibrate), "measure": (MeasureCommand, run_measure),
            "train": (TrainCommand, run_train), "evaluate": (EvaluateCommand, run_evaluate)}
PRESETS = {
    "calibrate": {"default": {"out_dir": "shiftbounds_out"}, "smoke": {"out_dir": "shiftbounds_out", "steps": 2, "batch": 2}},
    "measure": {"default": {"out_dir": "shiftbounds_out/measure"},
                "smoke": {"out_dir": "shiftbounds_out/measure", "disc_steps": 2, "max_turns": 16, "max_new_tokens": 4}},
    "train": {"default": {"out_dir": "shiftbounds_out/train"},
              "smoke": {"out_dir": "shiftbounds_out/train", "steps": 1, "batch": 2, "num_generations": 2, "max_turns": 1,
                        "max_new_tokens": 4}},
    "evaluate": {"default": {"out_dir": "shiftbounds_out/evaluate"},
                 "smoke": {"out_dir": "shiftbounds_out/evaluate", "max_turns": 1, "max_new_tokens": 4}},
}
"""Each command's presets (``smoke``: seconds, for tests)."""


def main(argv: list[str] | None = None) -> dict:
    """Dispatch ``argv`` (default: the command line) to one command; prints what it wrote."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        usage = __doc__.split("\n\n", 2)[1]
        if argv and argv[0] not in ("-h", "--help"):
            raise SystemExit(f"error: unknown command {argv[0]!r}; choose from {tuple(COMMANDS)}\n{usage}")
        print(__doc__)
        raise SystemExit(0 if argv else 2)
    cls, run = COMMANDS[argv[0]]
    cfg = parse_config(cls, cls.__doc__ or "", PRESETS[argv[0]], argv[1:], name=f"shiftbounds {argv[0]}")
    try:
        out = run(cfg)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    print(json.dumps({k: v for k, v in out.items() if k not in ("config", "rewards")}, default=_plain, indent=1)[:4000])
    print(f"wrote {cfg.out_dir}")
    return out


def _plain(x: Any) -> Any:
    return x.tolist() if isinstance(x, np.ndarray) else str(x)
