"""Prompted vs calibrated users on a pretrained chat model, development split only: which persona
wording a prompted user needs, and which calibration recipe, before any confirmatory study.

``python -m experiments.pretrained_users --base-model DIR [options]``

``DIR`` is a chat-model folder, e.g. SmolLM2-135M-Instruct from ``shiftbounds base-model``. On the
Taskmaster-4 calibration split (development: the split no RL run trains on), every user model
answers the same probes greedily (temperature 0): the history before the customer's first turn
(does the opening name the whole order, or only drinks of it?) and the agent's confirmation of the
order, right and with one slot changed (accept / reject / unclear). The user models are:

* the **prompted** base model, once under each ``--personas`` wording (few-shot ones included; a wording
  chosen on these probes is rechecked on later dialogues with ``--probe-from``);
* the base model **calibrated** on the train split's people, once per ``--recipes`` value
  (``turns``: one example per user turn; ``conversation``: whole conversations, roles flipped, the
  loss on every user turn), at equal steps, batch and learning rate;
* the logged **people** (their replies where logged).

The calibrated ones also get the NLL of the split's user turns by turn, beside the prompted base
under the first persona, and the two recipes their paired per-turn NLL difference (exact or Monte
Carlo sign-flip). Every share has a Clopper-Pearson interval.

Outputs in ``--out-dir``: ``users.json``, ``users.csv``, ``users.md``, ``users.{png,pdf}`` and
``config.json``. The calibrated models are saved as stages under ``stages/``, so a stopped run
resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from shiftbounds.conversations.calibration import RECIPES, CalibrationConfig, calibrate
from shiftbounds.conversations.measures import nll_by_turn, sycophancy_report, user_turn_nll, user_turns
from shiftbounds.conversations.models import check_model_folder, load_chat_model
from shiftbounds.conversations.simulators import PERSONA, LMUser
from shiftbounds.conversations.taskmaster import CUSTOMER_PERSONA
from shiftbounds.conversations.taskmaster_study import calibration_probes
from shiftbounds.conversations.tasks import load_taskmaster
from shiftbounds.conversations.user_study import report_row
from shiftbounds.figures.text import plot_user_comparison
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import derive_seed, numpy_rng
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import paired_difference

PERSONAS = (
    PERSONA,
    CUSTOMER_PERSONA,
    "You are a customer ordering at a coffee shop. For example, a customer who wants 1 hot mocha says: \"Hi, can I get "
    "1 hot mocha, please?\" Your order: {goal}. Say what you want, in one sentence, as that customer did.",
    "Play the customer, never the assistant. Your order: {goal}. First state your whole order. When the barista repeats "
    "the order, say yes if it is exactly your order and no, with the correction, if anything is wrong.",
)
"""The default persona and three wordings for a prompted coffee-shop customer (one few-shot)."""


@dataclass(frozen=True)
class UsersConfig:
    """Options of ``experiments.pretrained_users``."""

    base_model: str = field(default="", metadata={"help": "chat-model folder (e.g. from shiftbounds base-model); required"})
    data_dir: str = field(default="", metadata={"help": "folder holding taskmaster4/ (default: ../shared/data)"})
    n_probe: int = field(default=100, metadata={"help": "calibration-split dialogues probed"})
    probe_from: int = field(default=0, metadata={"earlier": 0, "help": "first calibration-split dialogue probed (later: dialogues an earlier "
                                                          "probe did not use, e.g. to recheck a persona chosen on the first ones)"})
    n_train: int = field(default=0, metadata={"help": "train-split dialogues to calibrate on (0: all)"})
    personas: tuple[str, ...] = field(default=PERSONAS, metadata={"help": "persona wordings of the prompted user"})
    recipes: tuple[str, ...] = field(default=RECIPES, metadata={"help": f"calibration recipes, from {RECIPES}"})
    steps: int = field(default=60, metadata={"help": "calibration steps"})
    batch: int = field(default=8, metadata={"help": "examples per calibration step"})
    lr: float = field(default=3e-5, metadata={"help": "calibration learning rate"})
    max_length: int = field(default=512, metadata={"help": "tokens per calibration example"})
    max_new: int = field(default=32, metadata={"help": "tokens per reply"})
    seed: int = field(default=0, metadata={"help": "seed of the split (as real_dialogue's), the calibration and the probes"})
    out_dir: str = field(default="results/pretrained_users/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        check_model_folder(self.base_model, "--base-model")
        if not self.base_model:
            raise ValueError("--base-model is required (a chat-model folder, e.g. from shiftbounds base-model)")
        if min(self.n_probe, self.steps, self.batch, self.max_new) < 1 or min(self.n_train, self.probe_from) < 0:
            raise ValueError(f"need --n-probe, --steps, --batch, --max-new >= 1 and --n-train, --probe-from >= 0; got {self}")
        if any("{goal}" not in p for p in self.personas) or not set(self.recipes) <= set(RECIPES):
            raise ValueError(f"every persona must contain '{{goal}}' and recipes come from {RECIPES}; got {self.personas}, {self.recipes}")


PRESETS = {"default": {}, "smoke": {"n_probe": 4, "n_train": 8, "steps": 2, "batch": 2, "max_new": 4, "max_length": 256}}


def run(cfg: UsersConfig) -> list[dict]:
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    data = load_taskmaster(cfg.data_dir or None, None, None, rng=numpy_rng(cfg.seed, "split"))
    train, dev = data["tm4"][0], data["tm4"][1][cfg.probe_from:]
    builder, probes = calibration_probes(data["tm4_raw"], dev, cfg.n_probe, cfg.seed)
    stages, seed = StageCache(out / "stages"), derive_seed(cfg.seed, "sycophancy")
    prog = Progress(1 + len(cfg.personas) + len(cfg.recipes), "pretrained_users")
    rows = [{"user": "people (logged replies)", **report_row(sycophancy_report(None, probes, builder))}]
    prog.update(note="people")
    for i, persona in enumerate(cfg.personas):
        user = LMUser.from_pretrained(cfg.base_model, persona=persona, max_new_tokens=cfg.max_new, temperature=0.0)
        report = stages.json(f"prompted_{i}", lambda u=user: sycophancy_report(u, probes, builder, seed=seed))
        rows.append({"user": f"prompted, persona {i}", "persona": persona, **report_row(report)})
        prog.update(note=f"prompted {i}: whole goal {rows[-1]['goal_disclosure']:.3f}")
    model, tok = load_chat_model(cfg.base_model)
    rows[1] |= {"nll": stages.json("nll_prompted", lambda: nll_by_turn(model, tok, dev[: cfg.n_probe], persona=cfg.personas[0]))["overall"]["value"]}
    turns, per_turn = user_turns(dev[: cfg.n_probe]), {}
    for recipe in cfg.recipes:
        ccfg = CalibrationConfig(steps=cfg.steps, batch=cfg.batch, lr=cfg.lr, max_length=cfg.max_length, seed=cfg.seed, recipe=recipe)
        folder = stages.folder_stage(f"calibrated_{recipe}", lambda f, c=ccfg: calibrate(train[: cfg.n_train or None], cfg.base_model, f, c))
        user = LMUser.from_pretrained(folder, max_new_tokens=cfg.max_new, temperature=0.0)
        report = stages.json(f"report_{recipe}", lambda u=user: sycophancy_report(u, probes, builder, seed=seed))
        nll = stages.json(f"nll_{recipe}", lambda u=user: nll_by_turn(u.model, u.tokenizer, dev[: cfg.n_probe]))
        per_turn[recipe] = stages.json(f"nll_per_turn_{recipe}", lambda u=user: user_turn_nll(u.model, u.tokenizer, turns).tolist())
        rows.append({"user": f"calibrated, {recipe}", **report_row(report), "nll": nll["overall"]["value"]})
        prog.update(note=f"calibrated ({recipe}): discrimination {rows[-1]['discrimination']:.3f}")
    recipes = paired_difference(*(np.array(per_turn[r]) for r in RECIPES), names=RECIPES) if set(RECIPES) <= set(per_turn) else None
    write_json(out / "users.json", {"config": asdict(cfg), "rows": rows, "recipe_nll_paired": recipes})
    write_csv(out / "users.csv", rows)
    keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k != "persona" and not k.endswith(("_low", "_high"))]
    shown = [{k: f"{r[k]:.3f}" if isinstance(r.get(k), float) else r.get(k) for k in keys} for r in rows]
    paired = "" if recipes is None else (f"\n\nPer-turn NLL, {recipes['difference']} on the same {recipes['n']} user turns: "
                                         f"{recipes['mean']:+.3f} [{recipes['low']:+.3f}, {recipes['high']:+.3f}], sign-flip p "
                                         f"{recipes['p']:.4g} ({recipes['p_method']}).")
    atomic_write_text(out / "users.md", "# Prompted vs calibrated users, development split (greedy)\n\n" + markdown_table(shown)
                      + paired + "\n\nPersonas:\n\n" + "".join(f"{i}. {p}\n" for i, p in enumerate(cfg.personas)))
    plot_user_comparison(rows, out / "users")
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    cfg = parse_config(UsersConfig, __doc__, PRESETS, argv, name="experiments.pretrained_users")
    rows = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "users.md").read_text())
    return rows


if __name__ == "__main__":
    main()
