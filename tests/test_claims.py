"""The claims ledger agrees with the shipped results, and the check cannot pass vacuously: a
verdict flipped in a copy of the results makes the shipped ledger stale."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from experiments import claims

ROOT = Path(__file__).resolve().parents[1]


def test_ledger_and_readme_table_agree_with_the_shipped_results(capsys):
    assert claims.main(["--check"]) == 0, capsys.readouterr().err


def _copy_inputs(dst: Path) -> None:
    files = {f for c in claims.CLAIMS for f in c.files} | {"README.md", "docs/claims.md"}
    for f in files:
        if (ROOT / f).is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / f, dst / f)


def _edit_rows(path: Path, edit) -> None:
    """Rewrite the CSV at ``path`` with ``edit(row)`` applied to every row (in place)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        edit(r)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_a_flipped_verdict_in_the_results_makes_the_check_fail(tmp_path):
    """GIVEN a copy of every file the ledger reads WHEN behaviour cloning's fitted rate at eta = 0.3
    is moved so that its interval excludes -log q THEN that claim's verdict moves from supported to
    contradicted and the shipped ledger is reported stale."""
    _copy_inputs(tmp_path)
    assert claims.main(["--root", str(tmp_path), "--check"]) == 0
    target = "With a noisy expert, behaviour cloning's sample complexity grows exponentially in H at rate -log q (lock)"
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == "supported"

    def move(r):
        if r["method"] == "bc" and r["eta"] == "0.3":
            r["slope_ci"] = "[0.300, 0.400]"

    _edit_rows(tmp_path / "results/noisy_expert/default/growth.csv", move)
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == "contradicted"
    assert claims.main(["--root", str(tmp_path), "--check"]) == 1


def test_a_verdict_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="verdict must be one of"):
        claims.Verdict("probably", "0.1", "none")


def test_no_verdict_words_outside_the_generated_blocks():
    """The README and docs state verdicts only through the generated ledger: a verdict word
    (supported, contradicted, refuted) outside the claims block and outside code spans fails,
    and a planted one is caught."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "claims.md")]
    found = {p.name: claims.stray_verdicts(p.read_text(encoding="utf-8")) for p in pages}
    assert not any(found.values()), found
    planted = f"Intro.\n{claims.START}\n| **supported** |\n{claims.END}\nThe ordering is supported by both runs; `contradicted` is a word."
    assert claims.stray_verdicts(planted) == ["supported"]


@pytest.mark.parametrize("holm, verdict", [("calibrated > sft", "supported"), ("calibrated < sft", "contradicted"),
                                           ("not significant", "not significant")])
def test_the_real_dialogue_row_reads_the_held_out_users_holm_verdict(tmp_path, holm, verdict):
    """The confirmatory row follows the Holm verdict of Calibrated - SFT against the held-out user
    model in both runs of the preset, and no other evaluation user's row: planted verdicts move it,
    and runs that disagree call no ordering."""
    _copy_inputs(tmp_path)

    def plant(folder, held_out):
        def set_verdict(r):
            r["holm verdict"] = held_out if r["evaluation user"] == "held-out user model" else "calibrated > sft"

        _edit_rows(tmp_path / folder / "paired.csv", set_verdict)

    target = "On real dialogues (Taskmaster-4), Calibrated Interactive RL ends above the SFT agent it starts from"
    plant(claims.REAL, holm)
    plant(claims.REAL_ONE_PROCESS, holm)
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == verdict
    plant(claims.REAL_ONE_PROCESS, "not significant" if holm != "not significant" else "calibrated > sft")  # the runs disagree
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == "not significant"


HELD, LOGGED = "held-out user model", "logged opening, then held-out model + rule"
CONFIRMATORY = [(claims.REAL_OPENING, "calibrated_opening", HELD, "On real dialogues (Taskmaster-4), Calibrated Interactive RL "
                 "whose simulator opens with the logged human request ends above the SFT agent it starts from"),
                (claims.REAL_POWERED, "calibrated", HELD, "On real dialogues (Taskmaster-4), Calibrated Interactive RL ends above "
                 "the SFT agent it starts from (powered: every held-out goal, eight fresh seeds)"),
                (claims.REAL_CALIBRATION, "calibrated_opening", LOGGED, f"{claims.ON_REQUESTS} (the logged request, then the calibrated "
                 "simulator) ends above the SFT agent against people's logged requests (every held-out goal, ten fresh seeds)"),
                (claims.REAL_REQUESTS, "calibrated_opening", HELD, f"{claims.ON_REQUESTS} (the logged request, then the calibrated "
                 "simulator) ends above the SFT agent against the held-out user model (every held-out goal, twelve fresh seeds)")]


@pytest.mark.parametrize("folder, arm, user, target", CONFIRMATORY, ids=["logged_opening", "every_goal", "rl_on_calibration", "requests"])
@pytest.mark.parametrize("mean, p, verdict", [(0.02, 0.0068, "supported"), (0.02, 0.03, "not significant"),
                                              (0.02, 0.0078, "not significant"), (-0.02, 0.0068, "contradicted"),
                                              (0.0, 1.0, "not significant"), (0.008, 29 / 4096, "supported"),
                                              (0.008, 30 / 4096, "not significant"), (0.008, 34 / 4096, "not significant")])
def test_a_confirmatory_row_needs_p_below_the_bonferroni_bar(tmp_path, folder, arm, user, target, mean, p, verdict):
    """A confirmatory run's row is decided by its primary evaluation user's test at 0.05 over the
    number of confirmatory runs (seven): a p of 0.0078, below 0.05 / 6 but above 0.05 / 7, is not
    significant; 29 of 4096 sign patterns pass the bar 0.05 / 7 and 30 do not, so T's 34 (which
    passed 0.05 / 6 before U joined the family) do not; another evaluation user's row does not move it."""
    assert claims.CONFIRMATORY_RUNS == 7
    _copy_inputs(tmp_path)

    def plant(r):
        held = r["evaluation user"] == user and r["difference"] == f"{arm} - sft"
        r["mean"], r["p"] = (str(mean), str(p)) if held else ("0.05", "0.0078")

    _edit_rows(tmp_path / folder / "paired.csv", plant)
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == verdict


CURVES = [(claims.REAL, 6, "On real dialogues (Taskmaster-4), Calibrated Interactive RL's goal success rises during "
           "training against its own training simulator (greedy agent at checkpoints, held-out goals)"),
          (claims.REAL_POWERED, 8, "On real dialogues (Taskmaster-4), Calibrated Interactive RL's goal success rises during "
           "training against its own training simulator (powered: every held-out goal, eight fresh seeds)"),
          (claims.REAL_CALIBRATION, 10, f"{claims.ON_REQUESTS}: goal success rises during training against its own training simulator "
           "(every held-out goal, ten fresh seeds)"),
          (claims.REAL_REQUESTS, 12, f"{claims.ON_REQUESTS}: goal success rises during training against its own training simulator "
           "(every held-out goal, twelve fresh seeds)")]
SPLITS = {"more than half rise": (lambda h: (h + 1, 0), "supported"), "half rise": (lambda h: (h, 0), "not significant"),
          "half rise, half fall": (lambda h: (h, h), "not significant"), "more than half fall": (lambda h: (0, h + 1), "contradicted")}


@pytest.mark.parametrize("folder, n, target", CURVES, ids=["cpu", "every_goal", "rl_on_calibration", "requests"])
@pytest.mark.parametrize("split", SPLITS)
def test_a_training_curve_row_needs_most_seeds_to_rise(tmp_path, folder, n, target, split):
    """A checkpoint-curve row counts the seeds whose rise interval lies above 0 (or below): more
    than half of the run's seeds decides; half is not enough."""
    counts, verdict = SPLITS[split]
    up, down = counts(n // 2)
    _copy_inputs(tmp_path)
    seeds = iter(range(100))

    def plant(r):
        if r["arm"] in ("calibrated", "calibrated_opening") and r["curve"] == "goal success at checkpoints (greedy, evaluation goals)":
            k = next(seeds)
            r["rise_low"], r["rise_high"] = ("0.01", "0.05") if k < up else ("-0.05", "-0.01") if k < up + down else ("-0.01", "0.01")

    _edit_rows(tmp_path / folder / "training.csv", plant)
    assert next(seeds) == n  # every seed of the run was planted
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == verdict


@pytest.mark.parametrize("static, prompted, verdict", [
    ("calibrated > static", "calibrated > interactive_prompted", "supported"),
    ("calibrated > static", "not significant", "not significant"),
    ("calibrated < static", "calibrated < interactive_prompted", "contradicted"),
    ("calibrated < static", "calibrated > interactive_prompted", "not significant")])
def test_the_paper_comparison_row_needs_both_orderings_after_holm(tmp_path, static, prompted, verdict):
    """The paper's comparison on real dialogues follows the Holm verdicts of Calibrated against Static
    and against Interactive RL (prompted) for the held-out user model, both of them; another
    evaluation user's verdicts do not move it."""
    _copy_inputs(tmp_path)
    planted = {"calibrated - static": static, "calibrated - interactive_prompted": prompted}

    def plant(r):
        held = r["evaluation user"] == "held-out user model"
        r["holm verdict"] = planted.get(r["difference"], "not significant") if held else r["difference"].replace(" - ", " > ")

    _edit_rows(tmp_path / claims.REAL_PAPER / "paired.csv", plant)
    target = "On real dialogues (Taskmaster-4), Calibrated Interactive RL beats the other paradigms"
    assert {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}[target] == verdict


@pytest.mark.parametrize("static, prompted, verdicts", [
    ((0.02, 2 / 4096), (0.1, 2 / 4096), ("supported", "supported")),
    ((0.02, 0.005), (0.1, 0.0005), ("supported", "supported")),  # Holm's second step: 0.005 < 0.05 / 7
    ((0.02, 0.005), (0.1, 0.004), ("not significant", "not significant")),  # the first step fails: 0.004 >= 0.05 / 14
    ((0.02, 0.008), (0.1, 0.0005), ("not significant", "supported")),  # 0.008 >= 0.05 / 7
    ((-0.02, 0.0005), (0.1, 0.0005), ("contradicted", "supported")),
    ((0.0, 1.0), (0.1, 0.0005), ("not significant", "supported"))])
def test_a_confirmatory_family_is_decided_by_holm_under_the_bonferroni_bar(tmp_path, static, prompted, verdicts):
    """Run U's stated family of two (Calibrated against Static Context RL and against Interactive RL,
    held-out user model): Holm's steps at 0.05 / 7 / 2 and 0.05 / 7, each comparison in the direction
    of its mean; another evaluation user's rows do not move it."""
    folder = tmp_path / "u"
    folder.mkdir()
    planted = {**dict(zip(claims.U_FAMILY, (static, prompted))), "static - sft": (-0.1, 2 / 4096)}
    rows = [{"evaluation user": user, "difference": d, "mean": str(planted[d][0] if user == HELD else -0.1),
             "low": "0", "high": "0", "p": str(planted[d][1] if user == HELD else 2 / 4096), "n": "12"}
            for user in (HELD, LOGGED) for d in (*claims.U_FAMILY, "static - sft")]
    with open(folder / "paired.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    got = tuple(claims._confirmatory("u", claims.U_FAMILY, i, "note", seeds="seeds")(tmp_path) for i in range(2))
    assert tuple(v.verdict for v in got) == verdicts
    assert got[0].family.startswith("Holm over the stated family of 2 (calibrated_opening - static, calibrated_opening - "
                                    "interactive_prompted) at 0.00714 (Bonferroni over the 7 confirmatory RL runs")


U_ROWS = [f"{claims.ON_REQUESTS} (the logged request, then the calibrated simulator) beats Static Context RL on the same "
          "requests against the held-out user model (every held-out goal, twelve seeds)",
          f"{claims.ON_REQUESTS} (the logged request, then the calibrated simulator) beats Interactive RL against a prompted "
          "simulator on the same goals, against the held-out user model (every held-out goal, twelve seeds)"]


@pytest.mark.parametrize("static_p, verdicts", [(2 / 4096, ("supported", "supported")), (0.005, ("supported", "supported")),
                                                (0.008, ("not significant", "supported"))])
def test_run_us_rows_read_its_stated_family(tmp_path, static_p, verdicts):
    """The two rows of run U read its stated family in the shipped folder (Interactive RL's p planted
    at 2 / 4096): Static Context RL's p of 0.005 passes Holm's second step (0.05 / 7), 0.008 does not."""
    _copy_inputs(tmp_path)

    def plant(r):
        if r["evaluation user"] == HELD and r["difference"] in claims.U_FAMILY:
            r["mean"], r["p"] = "0.02", str(static_p if r["difference"].endswith("static") else 2 / 4096)

    _edit_rows(tmp_path / claims.REAL_PAPER_REQUESTS / "paired.csv", plant)
    got = {r["claim"]: r["verdict"] for r in claims.ledger(tmp_path)}
    assert tuple(got[c] for c in U_ROWS) == verdicts
