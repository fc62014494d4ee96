"""How often a user model states its whole goal in its opening, by view, persona prompt and sampling
temperature: the development probe behind the real-dialogue run's user settings.

``python -m experiments.disclosure_probe --stages DIR [options]``

``DIR`` is the ``stages/`` folder of an ``experiments.real_dialogue`` run (its ``base``,
``user_calibrated`` and ``user_heldout`` model folders). Every user model answers the first
``--n-probe`` disclosure probes of the Taskmaster-4 calibration split (the history before the
customer's first turn) at each ``--temperatures`` value; the prompted simulator (the base model) also
in both views and under each ``--personas`` prompt. The share that names every drink and option of
the goal (``Taskmaster4Probes.discloses``) and the share that names only drinks of the goal
(``consistent``) are reported with 95 % intervals (``utils.stats.proportion_ci``); people's own openings give 0.889 on the
whole calibration split. Outputs in ``--out-dir``: ``disclosure.json``, ``disclosure.csv``,
``disclosure.md``, ``config.json``.

``--ask TEXT``: where an opening does not name the whole goal, the agent answers it with TEXT and
the user model replies once; ``whole goal after asking`` is the share of those openings whose
opening and reply together name it (what an agent that asks before ordering could learn); a reply
that repeats the question earns nothing from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from shiftbounds.conversations.measures import replies
from shiftbounds.conversations.simulators import PERSONA, VIEWS, LMUser
from shiftbounds.conversations.taskmaster_study import calibration_probes, require_stages
from shiftbounds.conversations.tasks import load_taskmaster
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.io import atomic_write_text, markdown_table, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import proportion_ci

PERSONAS = (PERSONA, "You are the customer. You want {goal}. Order it.", "Customer's order today: {goal}.",
            "Order for customer A: 1 hot mocha. A says: I'd like 1 hot mocha. Order for you: {goal}. You say what you want.")
"""The default persona prompt and three rewordings tried on the prompted simulator."""


@dataclass(frozen=True)
class DisclosureConfig:
    """Options of ``experiments.disclosure_probe``."""

    stages: str = field(default="", metadata={"help": "stages/ folder of a real_dialogue run (required)"})
    data_dir: str = field(default="", metadata={"help": "folder holding taskmaster4/ (default: ../shared/data)"})
    n_probe: int = field(default=150, metadata={"help": "calibration-split openings probed"})
    temperatures: tuple[float, ...] = field(default=(1.0, 0.5, 0.0), metadata={"help": "user sampling temperatures"})
    personas: tuple[str, ...] = field(default=PERSONAS, metadata={"help": "persona prompts tried on the prompted simulator"})
    max_new: int = field(default=48, metadata={"help": "tokens per opening"})
    ask: str = field(default="", metadata={"help": "an agent turn asked after each opening that does not name the whole goal "
                                                   "(empty: none)"})
    seed: int = field(default=0, metadata={"help": "seed of the split (as the run's) and of the replies"})
    out_dir: str = field(default="results/disclosure_probe/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        require_stages(self.stages)
        if self.n_probe < 1 or self.max_new < 1 or not self.temperatures or min(self.temperatures) < 0:
            raise ValueError(f"need --n-probe, --max-new >= 1 and temperatures >= 0; got {self.n_probe}, {self.max_new}, {self.temperatures}")
        if any("{goal}" not in p for p in self.personas):
            raise ValueError(f"every persona must contain '{{goal}}'; got {self.personas}")


PRESETS = {"default": {}, "smoke": {"n_probe": 4, "temperatures": (1.0, 0.0), "max_new": 4}}


def asked(user, probes, openings: list[str], ask: str, discloses, seed: int) -> dict:
    """Where an opening does not name the whole goal: the agent says ``ask``, the user replies once
    (drawn from the probe's seed), and the share of those openings that, with the reply (less any
    verbatim copy of ``ask``), name it."""
    silent = [i for i, (r, p) in enumerate(zip(openings, probes)) if not discloses(r, p.goal)]
    if not silent:
        return {"asked": 0, "whole goal after asking": None, "whole goal after asking low": None, "whole goal after asking high": None}
    answers = replies(user, [(probes[i].goal, [*probes[i].messages, {"role": "user", "content": openings[i]},
                                               {"role": "assistant", "content": ask}], seed + len(probes) + i) for i in silent])
    # the question itself, repeated in a reply, states nothing (a user that parrots the agent earns 0)
    e = proportion_ci(sum(discloses(f"{openings[i]} {a.replace(ask, ' ')}", probes[i].goal) for i, a in zip(silent, answers)),
                      len(silent))
    return {"asked": len(silent), "whole goal after asking": e.value, "whole goal after asking low": e.low,
            "whole goal after asking high": e.high}


def run(cfg: DisclosureConfig) -> list[dict]:
    data = load_taskmaster(cfg.data_dir or None, None, None, rng=numpy_rng(cfg.seed, "split"))
    builder, probeset = calibration_probes(data["tm4_raw"], data["tm4"][1], cfg.n_probe, cfg.seed)
    probes = probeset.disclosure
    stages = Path(cfg.stages)
    cases = [("calibrated", "user_calibrated", None, None), ("held-out user model", "user_heldout", None, None),
             ("independent user model", "user_independent", None, None)]
    cases += [("prompted", "base", view, persona) for view in VIEWS for persona in cfg.personas]
    prog = Progress(len(cases) * len(cfg.temperatures), "disclosure_probe")
    rows = []
    for name, folder, view, persona in cases:
        for t in cfg.temperatures:
            kw = {k: v for k, v in (("view", view), ("persona", persona)) if v is not None}
            user = LMUser.from_pretrained(stages / folder, max_new_tokens=cfg.max_new, temperature=t, **kw)
            openings = replies(user, [(p.goal, list(p.messages), cfg.seed + i) for i, p in enumerate(probes)])
            row = {"user model": name, "view": user.view, "persona": user.persona, "temperature": t, "n": len(probes)}
            for measure, test in (("names whole goal", builder.discloses), ("names only goal drinks", builder.consistent)):
                k = sum(test(r, p.goal) for r, p in zip(openings, probes))
                e = proportion_ci(k, len(probes))
                row |= {measure: e.value, f"{measure} low": e.low, f"{measure} high": e.high}
            if cfg.ask:
                row |= asked(user, probes, openings, cfg.ask, builder.discloses, cfg.seed)
            rows.append(row | {"example opening": openings[0]})
            prog.update(note=f"{name} ({user.view}), t={t}: {row['names whole goal']:.3f}")
    out = Path(cfg.out_dir)
    write_json(out / "disclosure.json", {"config": asdict(cfg), "rows": rows})
    write_csv(out / "disclosure.csv", rows)
    atomic_write_text(out / "disclosure.md", "# Opening disclosure by view, persona and temperature\n\n" + markdown_table(
        [{k: v for k, v in r.items() if k != "example opening"} for r in rows]))
    write_json(out / "config.json", asdict(cfg))
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    cfg = parse_config(DisclosureConfig, __doc__, PRESETS, argv, name="experiments.disclosure_probe")
    rows = run(cfg)
    print((Path(cfg.out_dir) / "disclosure.md").read_text())
    return rows


if __name__ == "__main__":
    main()
