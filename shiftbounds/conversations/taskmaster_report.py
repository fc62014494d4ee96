"""The Taskmaster study's tables (``experiments.real_dialogue``): per-goal outcomes, the family of
paired comparisons, the summary of a run (success per arm and evaluation user, sim-to-real gaps,
paired differences with Holm inside each family, training trends) and its report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from shiftbounds.conversations.taskmaster_run import CHECKPOINT_CURVE, RealDialogueConfig, baselines, fixed_agents
from shiftbounds.conversations.taskmaster_study import ARMS, EVAL_USERS
from shiftbounds.utils.configs import flat_dict
from shiftbounds.utils.io import markdown_table
from shiftbounds.utils.stats import holm_verdicts, mean_ci, paired_difference, paired_trend, trend


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


def success_table(cfg: RealDialogueConfig, by: dict, arms: list[str], users: list[str]) -> list[dict]:
    """Success per arm and evaluation user (mean over seeds, 95 % t-interval cut to [0, 1]) and, for an
    arm with a training simulator, its success there and the sim-to-real gaps (paired by seed)."""
    table = []
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
    return table


def paired_family(cfg: RealDialogueConfig, by: dict, users: list[str]) -> list[dict]:
    """Per-seed paired differences, :func:`comparisons` per evaluation user (one Holm family each),
    then every RL arm against the SFT agent on its own training simulator (one family over the arms)."""
    paired = []
    for user in users:
        rows = [{"evaluation user": user, **paired_difference(np.array([by[a, s][user]["mean"] for s in cfg.seeds]),
                                                              np.array([by[b, s][user]["mean"] for s in cfg.seeds]), (a, b))}
                for a, b in comparisons(cfg.arms, baselines(cfg))]
        paired += [{**r, "holm verdict": v} for r, v in zip(rows, holm_verdicts(rows))]
    own = [(a, ARMS[a][1]) for a in cfg.arms if ARMS[a][1] and all(ARMS[a][1] in by["sft", s] for s in cfg.seeds)]
    rows = [{"evaluation user": f"its training simulator ({sim})", **paired_difference(
        np.array([by[a, s][sim]["mean"] for s in cfg.seeds]), np.array([by["sft", s][sim]["mean"] for s in cfg.seeds]), (a, "sft"))}
        for a, sim in own]
    return paired + [{**r, "holm verdict": v} for r, v in zip(rows, holm_verdicts(rows))]


def training_trends(runs: list[dict]) -> tuple[list[dict], dict, dict]:
    """The GRPO runs' trends (goal success and reward per step, and each checkpoint curve's fitted
    rise), the success curves and the checkpoint curves' means, from the runs' training records."""
    training = [{"arm": r["arm"], "seed": r["seed"], "curve": curve, **trend(r[key]), "zero_variance_steps": r["zero_variance_steps"]}
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
    return training, curves, checkpoints


def signal_rows(arms: tuple[str, ...], training: list[dict]) -> list[dict]:
    """Per arm: the runs in which no group ever had reward variance (no policy gradient: the agent is
    its start), the zero-variance steps, and the runs whose curves rise."""
    success = [t for t in training if t.get("curve") == "goal success"]

    def rising(rows: list[dict]) -> int:
        return sum(t["rise_low"] is not None and t["rise_low"] > 0 for t in rows)

    return [{"arm": arm, "runs": len(rows), "runs without reward variance": sum(t["zero_variance_steps"] == t["steps"] for t in rows),
             "zero-variance steps": sum(t["zero_variance_steps"] for t in rows), "steps": sum(t["steps"] for t in rows),
             "runs whose goal success rises (interval above 0)": rising(rows),
             **({f"runs whose {CHECKPOINT_CURVE} rises (interval above 0)": rising(ckpt)}
                if (ckpt := [t for t in training if t.get("curve") == CHECKPOINT_CURVE and t["arm"] == arm]) else {})}
            for arm in arms if (rows := [t for t in success if t["arm"] == arm])]


def summarise(cfg: RealDialogueConfig, runs: list[dict], measures: dict, training: list[dict] | None = None,
              curves: dict | None = None, checkpoints: dict | None = None) -> dict:
    """The results of a run: :func:`success_table`, :func:`paired_family`, every evaluation as a row,
    the GRPO training trends (:func:`training_trends`; ``training``, ``curves`` and ``checkpoints``
    as saved, when retabulating) and :func:`signal_rows`, with the measurements."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    arms = [*fixed_agents(cfg), *cfg.arms]
    users = [u for u in EVAL_USERS if all(u in by[a, s] for a in arms for s in cfg.seeds)]  # a run from before a user existed has fewer
    flat = [{"arm": r["arm"], "seed": r["seed"], "user": u, "success": v["mean"], "n": v["n"]}
            for r in runs for u, v in r.items() if isinstance(v, dict) and "mean" in v]  # an evaluation, not the checkpoint curve
    if training is None:
        training, curves, checkpoints = training_trends(runs)
    return {"config": flat_dict(replace(cfg, workers=0)), "evaluation_users": users, "table": success_table(cfg, by, arms, users),
            "paired": paired_family(cfg, by, users), "runs": flat, "training": training, "training_curves": curves or {},
            "checkpoint_curves": checkpoints or {}, "training_signal": signal_rows(cfg.arms, training), **measures,
            "note": "The evaluation users are models of people, not people: a user model trained on the held-out split "
                    "of human dialogues, the same model with a rule that rejects a wrong order it would accept, and an "
                    "independent user model (another base model's size, tokenizer, seed and pretraining corpus, trained on "
                    f"the same held-out split). Evaluation goals: the {cfg.eval_split} split. RL dialogues: the {cfg.rl_split} split."}


def per_turn_rows(results: dict) -> list[dict]:
    """Each user model's NLL and each simulator's discriminator AUC by user-turn bucket, one row each."""
    per_turn = [{"corpus": corpus, "user_model": name, "turns": b, "nll_per_token": v["value"], "nll_low": v["low"],
                 "nll_high": v["high"], "n": v["n"]}
                for corpus in ("tm4", "tm3") for name, r in results["realism"][corpus].items() for b, v in r["by_turn"].items()]
    per_turn += [{"corpus": "tm3", "user_model": name, "turns": b, "discriminator_auc": v["value"], "auc_low": v["low"],
                  "auc_high": v["high"], "n": v["n"]}
                 for name, d in results["discriminator"].items() for b, v in d["by_turn"].items()]
    return per_turn


def results_md(results: dict) -> str:
    """The run's ``results.md``: goal success, the paired family, training, the user models' realism,
    the discriminators, sycophancy and disclosure, and the logged confirmations."""
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
    return md
