"""Where GRPO's signal can come from on Taskmaster-4, before training: how often an agent's rollouts
against its training simulator disagree in goal success at a goal (only such groups carry a policy
gradient for success), and how its greedy success depends on the simulator stating the goal.

``python -m experiments.grpo_signal --stages DIR [options]``

``DIR`` is the ``stages/`` folder of an ``experiments.real_dialogue`` run. The agent
(``--agent``, a folder in ``DIR``: the SFT agent by default, or an RL agent such as
``agent_calibrated_seed0``) meets the ``--simulator`` (a training simulator, or an evaluation
user to see where the agent fails against it) on the first ``--n-goals`` goals of the
calibration split (never the held-out goals), once greedily and ``--draws`` times at the rollout
temperature (``shiftbounds.conversations.signal.rollout_signal``), and how each greedy dialogue
ends (``shiftbounds.conversations.tasks.taskmaster4_failure_mode``: no order, a first order with the
wrong drinks, quantity or options, or a right one followed by more), beside how often the logged
agent the SFT agent learned from orders at its first turn rather than asking. Outputs in ``--out-dir``:
``signal.json``, ``signal.md``, ``config.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from shiftbounds.conversations import taskmaster_study as study
from shiftbounds.conversations.models import load_chat_model
from shiftbounds.conversations.paradigms import SYSTEM
from shiftbounds.conversations.signal import rollout_signal, share
from shiftbounds.conversations.tasks import (
    FAILURE_MODES,
    Taskmaster4Probes,
    load_taskmaster,
    orders_at_first_turn,
    taskmaster4_failure_mode,
    taskmaster4_judge,
)
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.io import atomic_write_text, markdown_table, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng

SIMULATORS = ("calibrated", "prompted", "rule-based", study.LOGGED_CALIBRATED, *study.EVAL_USERS)


@dataclass(frozen=True)
class SignalConfig:
    """Options of ``experiments.grpo_signal``."""

    stages: str = field(default="", metadata={"help": "stages/ folder of a real_dialogue run (required)"})
    agent: str = field(default="agent_sft", metadata={"help": "the agent's folder in --stages"})
    simulator: str = field(default="calibrated", metadata={"help": "the user the agent meets: a training simulator or an evaluation "
                                                                   f"user ({', '.join(SIMULATORS)})"})
    data_dir: str = field(default="", metadata={"help": "folder holding taskmaster4/ (default: ../shared/data)"})
    n_goals: int = field(default=256, metadata={"help": "calibration-split goals"})
    draws: int = field(default=4, metadata={"help": "sampled dialogues per goal"})
    group: int = field(default=4, metadata={"help": "GRPO's group size (generations per goal), <= --draws"})
    temperature: float = field(default=0.7, metadata={"help": "the agent's rollout temperature"})
    user_temperature: float = field(default=0.0, metadata={"help": "the user models' sampling temperature"})
    user_view: str = field(default="as_user", metadata={"help": "the prompted simulator's view, as the run's"})
    accept_wrong: float = field(default=0.3, metadata={"help": "the rule-based customer's accept-wrong rate, as the run's"})
    leak: float = field(default=0.2, metadata={"help": "the rule-based customer's leak rate, as the run's"})
    turns: int = field(default=2, metadata={"help": "agent turns per dialogue"})
    max_new: int = field(default=192, metadata={"help": "tokens per agent turn"})
    user_new: int = field(default=48, metadata={"help": "tokens per user turn"})
    seed: int = field(default=0, metadata={"help": "seed of the split (as the run's) and of the dialogues"})
    out_dir: str = field(default="results/grpo_signal/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        study.require_stages(self.stages)
        if not (Path(self.stages) / self.agent / "config.json").is_file():
            raise ValueError(f"--agent must name a model folder in {self.stages}; got {self.agent!r}")
        if self.simulator not in SIMULATORS:
            raise ValueError(f"--simulator must be one of {', '.join(SIMULATORS)}; got {self.simulator!r}")
        if self.n_goals < 1 or not 2 <= self.group <= self.draws or self.temperature <= 0 or min(self.turns, self.max_new, self.user_new) < 1:
            raise ValueError(f"need --n-goals >= 1, 2 <= --group <= --draws, --temperature > 0 and --turns, --max-new, --user-new >= 1; "
                             f"got {self.n_goals}, {self.group}, {self.draws}, {self.temperature}, {self.turns}, {self.max_new}, {self.user_new}")


PRESETS = {"default": {}, "smoke": {"n_goals": 3, "draws": 2, "group": 2, "max_new": 12, "user_new": 8}}


def failure_rows(modes: dict) -> list[dict]:
    """One row per failure mode (:data:`~shiftbounds.conversations.tasks.FAILURE_MODES`), its count
    where the opening stated the whole goal and where it did not."""
    return [{"how the dialogue ended": m, **{side: counts.get(m, 0) for side, counts in modes.items()}} for m in FAILURE_MODES]


def logged_first_turns(convs, discloses) -> dict:
    """How the logged agent of ``convs`` (the SFT agent's training dialogues) answers the customer's
    opening: the share of its first turns that place an order at once, over every dialogue and over
    those whose opening does not state the whole goal (where an agent would have to ask)."""
    rows = []
    for c in convs:
        messages = [m.as_dict() for m in c.messages]
        opening = next((m["content"] for m in messages if m["role"] == "user"), None)
        first = orders_at_first_turn(messages)
        if opening is not None and first is not None:
            rows.append((first, discloses(opening, c.goal)))
    flags, told = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    return {"logged agent orders at its first turn": share(flags),
            "logged agent orders at its first turn, opening does not state the goal": share(flags[~told]) if (~told).any() else None}


def run(cfg: SignalConfig) -> dict:
    stages = Path(cfg.stages)
    data = load_taskmaster(cfg.data_dir or None, None, None, rng=numpy_rng(cfg.seed, "split"))
    goals = study.evaluation_goals(data["tm4"][1], cfg.n_goals)
    folders = {k: stages / k for k in ("base", "user_calibrated", "user_heldout", "user_independent")}
    users = study.user_models(folders, user_new=cfg.user_new, accept_wrong=cfg.accept_wrong, leak=cfg.leak, view=cfg.user_view,
                              temperature=cfg.user_temperature)
    model, tok = load_chat_model(stages / cfg.agent)
    probes = Taskmaster4Probes(fold=True)
    res = rollout_signal(model, tok, goals, users[cfg.simulator].clone, taskmaster4_judge, draws=cfg.draws, group=cfg.group,
                         temperature=cfg.temperature, max_turns=cfg.turns, max_new_tokens=cfg.max_new,
                         discloses=probes.discloses, failure_mode=taskmaster4_failure_mode,
                         system=SYSTEM, seed=cfg.seed,
                         progress=Progress(cfg.draws + 1, "grpo_signal"))
    res |= logged_first_turns(data["tm4"][0], probes.discloses)
    out = Path(cfg.out_dir)
    write_json(out / "signal.json", {"config": asdict(cfg), "signal": res})
    shares = [{"measure": k, "value": v["value"], "low": v["low"], "high": v["high"], "n": v["n"]}
              for k, v in res.items() if isinstance(v, dict) and "value" in v]
    atomic_write_text(out / "signal.md", f"# GRPO signal: {cfg.agent} against the {cfg.simulator} simulator, {res['n_goals']} "
                      f"calibration goals\n\n{markdown_table(shares)}\n\nGoals by successes of {cfg.draws} draws at temperature "
                      f"{cfg.temperature}: {res['goals_by_successes']}; share of goals at which a group of {cfg.group} is mixed: "
                      f"{res['mixed_group_share']:.3f}\n\nHow the greedy dialogues end (`failure_modes`):\n\n"
                      f"{markdown_table(failure_rows(res['failure_modes']))}\n")
    write_json(out / "config.json", asdict(cfg))
    return res


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(SignalConfig, __doc__, PRESETS, argv, name="experiments.grpo_signal")
    res = run(cfg)
    print((Path(cfg.out_dir) / "signal.md").read_text())
    return res


if __name__ == "__main__":
    main()
