"""Prompted vs calibrated users on a pretrained chat model, on held-out goals, with the calibration
as the replication unit.

``python -m experiments.simulator_study --base-model DIR [options]``

``DIR`` is a chat-model folder, e.g. SmolLM2-135M-Instruct from ``shiftbounds base-model``. The
Taskmaster-4 split is real_dialogue's (``--seed``); the user models answer the **held-out** split's
histories greedily:

* the **prompted** base model under ``--persona`` (default: the coffee-shop customer wording chosen
  on the development split by ``experiments.pretrained_users``);
* the base model **calibrated** ``--fits`` times on the train split's people (``--recipe``, default
  whole conversations as chosen there), each fit on its own random ``--subset`` share of the split
  and with its own seed: the replication unit;
* the logged **people**.

Measures (docs/results.md, "at pretrained scale, on held-out goals"): NLL of the people's turns by
turn; a goal-aware discriminator's AUC by turn (a logistic probe on the base model's frozen
features, trained on the calibration split's histories, scored on the held-out split's); goal
disclosure and consistency; accept / reject / unclear replies to right and constructed wrong
confirmations. Pooled fits and the paired differences (calibrated minus prompted, same goals)
carry crossed bootstrap intervals over fits and goals, the paired ones at 99 % (0.05 over five
measures, Bonferroni).

Outputs in ``--out-dir``: ``study.json``, ``units.json`` (every user model's per-goal, per-turn and
per-history outcomes, from which the ledger recomputes the paired means), ``users.csv``, ``by_turn.csv``, ``paired.csv``,
``study.md``, ``study.{png,pdf}`` and ``config.json``; every fit and every user model's measures are
stages under ``stages/``, so a stopped run resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from shiftbounds.conversations.calibration import RECIPES, CalibrationConfig, calibrate
from shiftbounds.conversations.measures import user_turns
from shiftbounds.conversations.models import check_model_folder, load_chat_model
from shiftbounds.conversations.simulators import LMUser
from shiftbounds.conversations.taskmaster import CUSTOMER_PERSONA
from shiftbounds.conversations.taskmaster_study import calibration_probes
from shiftbounds.conversations.tasks import load_taskmaster
from shiftbounds.conversations.user_study import UserBench, study_users
from shiftbounds.figures.text import plot_user_study
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng, trainer_seed
from shiftbounds.utils.stages import StageCache


@dataclass(frozen=True)
class StudyConfig:
    """Options of ``experiments.simulator_study``."""

    base_model: str = field(default="", metadata={"help": "chat-model folder (e.g. from shiftbounds base-model); required"})
    data_dir: str = field(default="", metadata={"help": "folder holding taskmaster4/ (default: ../shared/data)"})
    n_probe: int = field(default=100, metadata={"help": "held-out dialogues probed (their user turns give the NLL)"})
    n_disc_train: int = field(default=100, metadata={"help": "calibration-split dialogues whose histories train the discriminator"})
    n_disc_held: int = field(default=150, metadata={"help": "held-out dialogues whose histories score the discriminator"})
    persona: str = field(default=CUSTOMER_PERSONA, metadata={"help": "the prompted user's persona (contains {goal})"})
    fits: int = field(default=3, metadata={"help": "independent calibrations (seed and train subset each)"})
    subset: float = field(default=2 / 3, metadata={"help": "share of the train split each calibration draws"})
    recipe: str = field(default="conversation", metadata={"help": f"calibration recipe, from {RECIPES}"})
    steps: int = field(default=60, metadata={"help": "calibration steps"})
    batch: int = field(default=8, metadata={"help": "examples per calibration step"})
    lr: float = field(default=3e-5, metadata={"help": "calibration learning rate"})
    max_length: int = field(default=512, metadata={"help": "tokens per calibration example"})
    max_new: int = field(default=32, metadata={"help": "tokens per reply"})
    seed: int = field(default=0, metadata={"help": "seed of the split (as real_dialogue's), the fits, the probes and the bootstrap"})
    out_dir: str = field(default="results/simulator_study/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        check_model_folder(self.base_model, "--base-model")
        if not self.base_model:
            raise ValueError("--base-model is required (a chat-model folder, e.g. from shiftbounds base-model)")
        if min(self.n_probe, self.n_disc_train, self.n_disc_held, self.fits, self.steps, self.batch, self.max_new) < 1:
            raise ValueError(f"need every count >= 1; got {self}")
        if not 0 < self.subset <= 1 or "{goal}" not in self.persona or self.recipe not in RECIPES:
            raise ValueError(f"need 0 < --subset <= 1 (got {self.subset}), a persona with '{{goal}}' and a recipe from {RECIPES} "
                             f"(got {self.recipe!r})")


PRESETS = {"default": {}, "smoke": {"n_probe": 4, "n_disc_train": 6, "n_disc_held": 6, "fits": 2, "subset": 0.01, "steps": 2,
                                    "batch": 2, "max_new": 4, "max_length": 256}}


def setup(cfg: StudyConfig) -> tuple[UserBench, list, StageCache]:
    """The bench every user model is measured on, the train split and the run's stages."""
    data = load_taskmaster(cfg.data_dir or None, None, None, rng=numpy_rng(cfg.seed, "split"))
    train, dev, held = data["tm4"]
    builder, probes = calibration_probes(data["tm4_raw"], held, cfg.n_probe, cfg.seed)
    bench = UserBench(load_chat_model(cfg.base_model), probes, builder, nll_turns=user_turns(held[: cfg.n_probe]),
                      disc_train=user_turns(dev[: cfg.n_disc_train], after_agent=True),
                      disc_held=user_turns(held[: cfg.n_disc_held], after_agent=True), seed=cfg.seed)
    return bench, train, StageCache(Path(cfg.out_dir) / "stages")


def fitted(cfg: StudyConfig, train: list, stages: StageCache, k: int) -> LMUser:
    """Calibration ``k`` as a greedy user model."""
    return LMUser.from_pretrained(fit_folder(cfg, train, stages, k), max_new_tokens=cfg.max_new, temperature=0.0)


def fit_folder(cfg: StudyConfig, train: list, stages: StageCache, k: int) -> Path:
    """Calibration ``k``: the base calibrated on its own random ``--subset`` of ``train`` with its own seed (a stage)."""
    pick = sorted(numpy_rng(cfg.seed, "calibration subset", k).choice(len(train), max(1, round(cfg.subset * len(train))), replace=False))
    fit = CalibrationConfig(steps=cfg.steps, batch=cfg.batch, lr=cfg.lr, max_length=cfg.max_length, recipe=cfg.recipe,
                            seed=trainer_seed(cfg.seed, "calibration", k))
    return stages.folder_stage(f"calibrated_{k}", lambda f: calibrate([train[j] for j in pick], cfg.base_model, f, fit))


def run(cfg: StudyConfig) -> dict:
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    bench, train, stages = setup(cfg)
    prog = Progress(cfg.fits + 1, "simulator_study")
    prompted = LMUser.from_pretrained(cfg.base_model, persona=cfg.persona, max_new_tokens=cfg.max_new, temperature=0.0)
    result = study_users(bench, prompted, [lambda k=k: fitted(cfg, train, stages, k) for k in range(cfg.fits)], stages=stages, progress=prog)
    write_json(out / "study.json", {"config": asdict(cfg)} | {k: v for k, v in result.items() if k != "units"})
    write_json(out / "units.json", result["units"])
    for name in ("rows", "by_turn", "paired"):
        write_csv(out / f"{'users' if name == 'rows' else name}.csv", result[name])
    fmt = lambda rows: [{k: f"{v:.3f}" if isinstance(v, float) else v for k, v in r.items() if not k.endswith(("_low", "_high"))}  # noqa: E731
                        for r in rows]
    atomic_write_text(out / "study.md", "# Prompted vs calibrated users, held-out goals (greedy)\n\n" + markdown_table(fmt(result["rows"]))
                      + "\n\n## Calibrated - prompted, same goals (crossed bootstrap over fits and goals)\n\n"
                      + markdown_table(fmt(result["paired"])) + "\n\n## By user turn\n\n" + markdown_table(fmt(result["by_turn"])) + "\n")
    plot_user_study(result, out / "study")
    return result


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(StudyConfig, __doc__, PRESETS, argv, name="experiments.simulator_study")
    result = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "study.md").read_text())
    return result


if __name__ == "__main__":
    main()
