"""The stages of the Taskmaster study (``experiments.real_dialogue`` calls them in order): a base
model made for the corpus, the user models, realism, discriminators and sycophancy measurements,
the RL arms and their evaluation against every evaluation user.

Taskmaster-4 orders are the task (judge: :func:`~shiftbounds.conversations.tasks.taskmaster4_judge`);
Taskmaster-3 dialogues, which carry no goal, serve the realism measures. Every stage is a function
of explicit inputs; caching and seeding are the caller's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.calibration import GOAL_HEADER, TrainingConfig, pretrain
from shiftbounds.conversations.measures import discriminator_auc_by_turn, nll_by_turn, sycophancy_report
from shiftbounds.conversations.models import build_tiny_chat_model, load_chat_model
from shiftbounds.conversations.paradigms import SYSTEM, ParadigmConfig, evaluate_agent, train_paradigm
from shiftbounds.conversations.records import Conversation
from shiftbounds.conversations.rule_user import is_acceptance
from shiftbounds.conversations.simulators import CorrectedUser, LMUser, LoggedOpeningUser, OrderingUser
from shiftbounds.conversations.tasks import (
    ProbeBuilder,
    ProbeSet,
    Taskmaster4Probes,
    taskmaster4_correction,
    taskmaster4_credit,
    taskmaster4_judge,
    taskmaster4_placed,
    taskmaster4_stop,
)
from shiftbounds.utils.seeding import derive_seed, numpy_rng

LOGGED_CALIBRATED = "logged opening, then calibrated"
"""The training simulator that opens with the training dialogue's logged human request and
continues as the calibrated simulator: turn 1 exactly as people open (no simulator-induced shift
there), the later turns calibrated."""
HALF_LOGGED_CALIBRATED = "calibrated, half its openings logged"
"""The calibrated simulator opening half of the dialogues (drawn per dialogue) with the logged request."""
ARMS = {"static": ("static", None), "interactive_rule": ("interactive", "rule-based"),
        "interactive_prompted": ("interactive", "prompted"), "calibrated": ("calibrated", "calibrated"),
        "calibrated_opening": ("calibrated", LOGGED_CALIBRATED), "calibrated_half_opening": ("calibrated", HALF_LOGGED_CALIBRATED)}
"""Each RL arm: its paradigm and the simulator it trains against."""
PAPER_ARMS = ("static", "interactive_rule", "interactive_prompted", "calibrated")
"""The arms of the paper's comparison (the default of ``experiments.real_dialogue``)."""
EVAL_USERS = ("held-out user model", "held-out user model + wrong-order rule", "logged opening, then held-out model + rule",
              "independent user model")
"""The evaluation users: the held-out user model, the same with the wrong-order rule, the latter
after the held-out dialogue's logged human opening (a real request, whatever the model would say),
and the independent user model (another base model: its own tokenizer, size, pretraining seed and
corpus, never the agents' training split; then the same SFT on the held-out split)."""


def require_stages(stages: str) -> Path:
    """``stages`` as a path, once it is a real_dialogue run's ``stages/`` folder (it holds ``base/``).

    Raises:
        ValueError: it is not.
    """
    if not stages or not (Path(stages) / "base" / "config.json").is_file():
        raise ValueError(f"--stages must be a real_dialogue run's stages/ folder holding base/; got {stages!r}")
    return Path(stages)


def make_base(folder: Path, convs: Sequence[Conversation], *, vocab_size: int, d_model: int, n_layer: int, max_len: int,
              cfg: TrainingConfig, persona: str, goal_annotated: bool, seed: int) -> None:
    """A tiny chat model whose tokenizer is trained on ``convs`` and the prompts, pretrained on
    ``convs`` (and, with ``goal_annotated``, each goal-carrying one led by its goal), saved in ``folder``."""
    texts = [m.content for c in convs for m in c.messages] + [SYSTEM, persona, GOAL_HEADER]
    with tempfile.TemporaryDirectory() as tmp:
        init = build_tiny_chat_model(Path(tmp), texts, vocab_size=vocab_size, d_model=d_model, n_layer=n_layer,
                                     max_len=max(1024, max_len), seed=derive_seed(seed, "base"))
        pretrain(list(convs), init, folder, cfg, GOAL_HEADER if goal_annotated else None)


def user_models(folders: dict[str, Path], *, user_new: int, accept_wrong: float, leak: float, view: str,
                temperature: float = 1.0) -> dict:
    """The simulators and evaluation users, each loaded once (clones share the weights) and sampling
    at ``temperature``; the prompted simulator reads the dialogue in ``view``, the calibrated ones in
    the view they were trained in."""
    kw = dict(max_new_tokens=user_new, stop=taskmaster4_stop, temperature=temperature)
    held = LMUser.from_pretrained(folders["user_heldout"], name="held-out user model", **kw)
    users = {"rule-based": OrderingUser(accept_wrong, leak),
             "prompted": LMUser.from_pretrained(folders["base"], name="prompted", view=view, **kw),
             "calibrated": LMUser.from_pretrained(folders["user_calibrated"], **kw),
             EVAL_USERS[0]: held,
             EVAL_USERS[1]: CorrectedUser(held, judge=taskmaster4_judge, placed=taskmaster4_placed, accepts=is_acceptance,
                                          correction=taskmaster4_correction, name=EVAL_USERS[1])}
    users[EVAL_USERS[2]] = LoggedOpeningUser(users[EVAL_USERS[1]], name=EVAL_USERS[2])
    users[LOGGED_CALIBRATED] = LoggedOpeningUser(users["calibrated"], name=LOGGED_CALIBRATED)
    users[HALF_LOGGED_CALIBRATED] = LoggedOpeningUser(users["calibrated"], name=HALF_LOGGED_CALIBRATED, share=0.5)
    users[EVAL_USERS[3]] = LMUser.from_pretrained(folders["user_independent"], name=EVAL_USERS[3], **kw)
    return users


def realism(folders: dict[str, Path], calib: Sequence[Conversation], tm3_held: Sequence[Conversation], max_len: int,
            view: str) -> dict:
    """NLL of held-out human user turns by turn, per user model (each in its own view; the prompted
    simulator in ``view``), on Taskmaster-4 and Taskmaster-3."""
    def nll(key: str, convs: Sequence[Conversation]) -> dict:
        u = LMUser.from_pretrained(folders[key], **({"view": view} if key == "base" else {}))
        return nll_by_turn(u.model, u.tokenizer, convs, persona=u.persona, view=u.view, max_len=max_len)

    tm4 = {name: nll(key, calib) for name, key in (("prompted", "base"), ("calibrated", "user_calibrated"),
                                                    ("held-out user model", "user_heldout"), (EVAL_USERS[3], "user_independent"))}
    tm3 = {name: nll(key, tm3_held) for name, key in (("prompted", "base"), ("calibrated (Taskmaster-3)", "user_calibrated_tm3"))}
    return {"tm4": tm4, "tm3": tm3}


def discriminators(users: dict, folders: dict[str, Path], tm3_train: Sequence[Conversation], tm3_held: Sequence[Conversation], *,
                   user_new: int, user_temperature: float, steps: int, batch: int, lr: float, max_len: int, n_disc: int, seed: int) -> dict:
    """Real-vs-simulated AUC by turn on Taskmaster-3 for the prompted and the calibrated simulator."""
    sims = {"prompted": users["prompted"],
            "calibrated (Taskmaster-3)": LMUser.from_pretrained(folders["user_calibrated_tm3"], max_new_tokens=user_new,
                                                                temperature=user_temperature)}
    return {name: discriminator_auc_by_turn(sim, str(folders["base"]), tm3_train, tm3_held, steps=steps, batch=batch, lr=lr,
                                            max_len=max_len, max_turns=n_disc, seed=derive_seed(seed, "discriminator", name))
            for name, sim in sims.items()}


def calibration_probes(raw: dict, calib: Sequence[Conversation], n: int, seed: int) -> tuple[Taskmaster4Probes, ProbeSet]:
    """The probe builder and the sycophancy and disclosure probes of the first ``n`` calibration
    dialogues (``raw``: the unfolded records by id, ``load_taskmaster``'s ``tm4_raw``)."""
    builder = Taskmaster4Probes(fold=True)
    return builder, builder.build([raw[c.id] for c in calib[:n]], rng=numpy_rng(seed, "probes"))


def sycophancy(users: dict, probes: ProbeSet, builder: ProbeBuilder, seed: int) -> dict:
    """The sycophancy report of the logged people and of every simulator and evaluation user."""
    who = {"people (logged replies)": None, **{k: users[k] for k in ("rule-based", "prompted", "calibrated", *EVAL_USERS[:2], EVAL_USERS[3])}}
    return {name: sycophancy_report(u, probes, builder, seed=derive_seed(seed, "sycophancy")) for name, u in who.items()}


def with_openings(convs: Sequence[Conversation]) -> list[Conversation]:
    """``convs``, each goal also carrying its dialogue's logged opening (read only by the
    logged-opening users)."""
    return [Conversation(c.id, {**c.goal, "opening": next(m.content for m in c.messages if m.role == "user")}, c.messages)
            for c in convs]


def evaluation_goals(held: Sequence[Conversation], n: int) -> list[Conversation]:
    """The first ``n`` dialogues of an evaluation split, with their logged openings (:func:`with_openings`)."""
    return with_openings(held[:n])


def evaluate(folder: Path, users: dict, names: Sequence[str], goals: Sequence[Conversation], *, turns: int, max_new: int,
             temperature: float, seed: int) -> dict:
    """The agent in ``folder`` against each evaluation user ``names`` on ``goals`` (paired draws)."""
    return evaluate_model(*load_chat_model(folder), users, names, goals, turns=turns, max_new=max_new,
                          temperature=temperature, seed=seed)


def evaluate_model(model: PreTrainedModel, tok: PreTrainedTokenizerBase, users: dict, names: Sequence[str], goals: Sequence[Conversation], *, turns: int, max_new: int,
                   temperature: float, seed: int) -> dict:
    """:func:`evaluate` of a loaded agent: the same draws for every agent at ``seed``, so a training
    curve's checkpoints (:func:`train_arm`) and the saved agents read the same dialogues."""
    return {name: evaluate_agent(model, tok, goals, users[name].clone, taskmaster4_judge, max_turns=turns, max_new_tokens=max_new,
                                 temperature=temperature, system=SYSTEM, user_first=True, seed=derive_seed(seed, "evaluation"))
            for name in names}


def train_arm(arm: str, sft_folder: Path, train: Sequence[Conversation], users: dict, cfg: ParadigmConfig, folder: Path,
              sim_temperature: float | None = None, curve: dict | None = None) -> Path:
    """One RL arm of :data:`ARMS` from the SFT agent, saved in ``folder``: paid by goal success and,
    with ``cfg.credit_weight`` > 0, by partial credit beside it (:func:`~shiftbounds.conversations.tasks.taskmaster4_credit`).
    ``sim_temperature``: the LM training simulator's sampling temperature in the rollouts (``None``:
    its own; the rule-based customer has none). A simulator that opens with the logged request
    trains on the training dialogues' openings.

    ``curve`` (an arm with a training simulator): ``{"every": k, "users": names, "goals": ...,
    "turns", "max_new", "temperature", "seed"}`` as :func:`evaluate_model` takes them; every ``k``
    steps the agent's goal success against its training simulator (at the simulator's own
    temperature, as the evaluation meets it) and against the evaluation users ``names`` is measured
    per goal, so the last checkpoint is the saved agent's evaluation there."""
    paradigm, sim = ARMS[arm]
    user = users[sim] if sim else None
    if sim_temperature is not None and hasattr(user, "at_temperature"):
        user = user.at_temperature(sim_temperature)
    if isinstance(user, LoggedOpeningUser):
        train = with_openings(train)
    checkpoint, every = None, 0
    if curve is not None and sim is not None:
        kw = {k: v for k, v in curve.items() if k not in ("every", "users")}
        every, names = curve["every"], list(dict.fromkeys((sim, *curve.get("users", ()))))

        def checkpoint(model: PreTrainedModel, tok: PreTrainedTokenizerBase):
            return {name: e["rewards"] for name, e in evaluate_model(model, tok, users, names, **kw).items()}

    return train_paradigm(paradigm, sft_folder, list(train), taskmaster4_judge, cfg, folder, user.clone if user else None,
                          taskmaster4_credit, checkpoint, every)
