"""The claims ledger: its rules decide what they say, its check recomputes every row from the per-seed
files (a planted change in a per-seed file is caught by recomputation, not by a checksum), and its data
file refuses what it cannot decide."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from experiments import claims
from shiftbounds.ledger import check, rules
from shiftbounds.ledger.decide import PERTURBED, REPEAT, Context, mcnemar, noninferior, pipeline_ordering
from shiftbounds.ledger.render import END, START, ledger, load_claims, stray_verdicts
from shiftbounds.utils.stats import sign_flip_p

ROOT = Path(__file__).resolve().parents[1]
U = "results/real_dialogue/paper_requests"
MAIN = "results/full_pipeline/default"


def test_the_shipped_ledger_recomputes_from_the_per_seed_files(capsys):
    assert claims.main(["--check"]) == 0, capsys.readouterr().err


# ----------------------------------------------------------------------------- planted changes
def _copy(dst: Path, *folders: str) -> None:
    for f in folders:
        shutil.copytree(ROOT / f, dst / f, ignore=shutil.ignore_patterns("*.png", "*.pdf", "stages", "chains"))


def _row(rows: list[dict], text: str) -> dict:
    return next(r for r in rows if text in r["claim"])


def _dialogue_only(tmp_path: Path, folder: str) -> dict:
    """The data file cut to the real-dialogue claims on ``folder`` (so a copy of that folder decides them)."""
    data = load_claims(claims.DATA)
    keep = [c for c in data["claims"] if folder in c.get("folders", []) or c.get("folder") == folder]
    return data | {"claims": keep}


def test_a_changed_per_seed_success_fails_the_check_and_moves_its_row(tmp_path):
    """GIVEN a copy of run U WHEN every Static Context RL success in its runs.csv rises by 0.05 (its
    paired.csv untouched) THEN the recomputed paired table disagrees with the shipped one, and the
    row "Interactive RL beats Static Context RL" moves from contradicted (its number with it)."""
    _copy(tmp_path, U)
    data = _dialogue_only(tmp_path, U)
    before = _row(ledger(data, tmp_path), "beats Static Context RL (every held-out goal, twelve seeds)")
    assert check.dialogue_paired(tmp_path, U) == []
    path = tmp_path / U / "runs.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["arm"] == "static":
            r["success"] = str(float(r["success"]) + 0.05)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    problems = check.dialogue_paired(tmp_path, U)
    assert any("static - sft" in p and "mean" in p for p in problems), problems
    after = _row(ledger(data, tmp_path), "beats Static Context RL (every held-out goal, twelve seeds)")
    interactive = _row(ledger(data, tmp_path), "Interactive RL against a prompted simulator beats Static Context RL (every")
    assert before["number"] != after["number"]
    assert interactive["verdict"] == "contradicted"  # Static is now further ahead of Interactive RL
    assert before["verdict"] == "supported" and after["verdict"] != "supported"


def test_a_changed_per_seed_return_in_the_main_job_fails_the_check(tmp_path):
    """GIVEN a copy of the main job's results.json WHEN one seed's Interactive RL J_real moves by 0.05
    THEN the recomputed paired table disagrees with the shipped paired.csv on that task's rows."""
    (tmp_path / MAIN).mkdir(parents=True)
    for name in ("results.json", "paired.csv", "headroom.csv"):
        shutil.copy(ROOT / MAIN / name, tmp_path / MAIN / name)
    assert check.pipeline_paired(tmp_path, MAIN) == []
    path = tmp_path / MAIN / "results.json"
    results = json.loads(path.read_text())
    results["runs"][0]["paradigms"]["interactive"]["J_real"] += 0.05
    path.write_text(json.dumps(results))
    problems = check.pipeline_paired(tmp_path, MAIN)
    assert problems and all(results["runs"][0]["task"] in p for p in problems)
    assert any("calibrated - interactive" in p for p in problems)
    assert check.pipeline_headroom(tmp_path, MAIN)


def test_a_stale_page_fails_the_check(tmp_path, capsys, monkeypatch):
    """The rendered README table must equal the shipped one byte for byte: a planted edit is reported
    (the tables' recomputation, tested above, is skipped here)."""
    monkeypatch.setattr(claims, "disagreements", lambda root, data: [])
    for f in ("results", "docs", "experiments"):
        (tmp_path / f).symlink_to(ROOT / f)
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text().replace(START, START + "\n| planted |"))
    assert claims.main(["--root", str(tmp_path), "--check"]) == 1
    assert "stale: " in capsys.readouterr().err


# ----------------------------------------------------------------------------- the rules
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=2, max_size=12))
@example([0, 0]).via("every difference zero: no outcome can reject")
@example([1, 1]).via("two pairs: 2 / 4")
def test_smallest_sign_flip_p_is_the_exact_p_of_the_absolute_differences(d):
    """The closed form ``2^(zeros + 1) / 2^n`` equals the exact sign-flip p of ``|d|`` (every sign alike)."""
    a = np.abs(np.array(d, dtype=float))
    exact = 1.0 if not a.any() else sign_flip_p(a)[0]
    assert rules.smallest_sign_flip_p(d) == pytest.approx(exact)


def test_an_ordering_family_decides_by_holm_and_names_what_cannot_reject():
    rng = np.random.default_rng(0)
    fam = rules.family_ordering({"a - b": 0.3 + 0.01 * rng.standard_normal(12), "a - c": 0.01 * rng.standard_normal(12),
                                 "a - d": np.array([0.2] * 5), "a - e": np.zeros(8)}, 0.05)
    assert fam["a - b"]["verdict"] == "a > b"
    assert fam["a - c"]["verdict"] == "not significant"
    assert fam["a - d"]["verdict"] == "uninformative" and fam["a - d"]["constant"]  # 5 pairs: smallest p 1/16
    assert fam["a - e"]["verdict"] == "uninformative"  # a model built to fool the test: no difference at all
    assert "constant over the 5 replicates" in rules.show_mean(fam["a - d"]) and "[" not in rules.show_mean(fam["a - d"])
    bars = sorted(r["bar"] for r in fam.values())
    assert bars == pytest.approx([0.05 / 4, 0.05 / 3, 0.05 / 2, 0.05])


def test_holm_is_strict_about_a_p_at_its_bar():
    d = np.array([0.1] * 6)  # p = 2/64 = 0.03125
    assert rules.family_ordering({"x - y": d}, 0.05)["x - y"]["verdict"] == "x > y"
    assert rules.family_ordering({"x - y": d}, 0.03125)["x - y"]["verdict"] == "uninformative"


@pytest.mark.parametrize("low, high, verdict", [(1.9, 2.1, "supported"), (1.5, 2.1, "not significant"),
                                                (0.4, 0.8, "contradicted"), (0.0, 9.0, "not significant")])
def test_equivalence_needs_the_whole_interval_inside_the_margin(low, high, verdict):
    assert rules.equivalence(low, high, 2.0, 0.25) == verdict


def test_a_censored_interval_never_supports_a_ratio():
    assert rules.within_factor(40.0, float("inf"), 45.0, 1.25) == "not significant"
    assert rules.within_factor(40.0, 50.0, 45.0, 1.25) == "supported"
    assert rules.within_factor(100.0, float("inf"), 45.0, 1.25) == "contradicted"


@pytest.mark.parametrize("only_a, only_b, verdict", [(0, 0, "uninformative"), (2, 0, "uninformative"), (5, 0, "uninformative"),
                                                     (6, 0, ">"), (0, 8, "<"), (6, 3, "not significant")])
def test_mcnemar_is_uninformative_with_too_few_discordant_pairs(only_a, only_b, verdict):
    """With d discordant pairs the smallest two-sided p is 2 / 2^d: 5 pairs (0.0625) can never reach 0.05."""
    assert rules.mcnemar_verdict(only_a, only_b, 0.05, 0.05) == verdict


def test_rates_carry_exact_intervals_inside_0_1():
    assert rules.show_rate(10, 10).startswith("10/10 = 1.00 [0.69, 1.00]")
    assert rules.show_rate(0, 3).endswith("[0.00, 0.71]")


def test_combine_and_direction():
    assert rules.combine(["supported", "supported"]) == "supported"
    assert rules.combine(["supported", "uninformative"]) == "not significant"
    assert rules.direction(["a > b", "a > b"], "a", "b") == "supported"
    assert rules.direction(["a < b", "a < b"], "a", "b") == "contradicted"
    assert rules.direction(["uninformative", "uninformative"], "a", "b") == "uninformative"
    with pytest.raises(ValueError, match="verdict must be one of"):
        rules.Verdict("probably", "0.1", "none")


# ----------------------------------------------------------------------------- the data file
def _data_file(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(claims.DATA.read_text())
    edit(data)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["claims"][0].pop("replication"), "missing fields \\['replication'\\]"),
    (lambda d: d["claims"][0].update(kind="vibes"), "kind 'vibes' not in"),
    (lambda d: d["claims"][2].update(margin="generous"), "margins \\['generous'\\]"),
])
def test_the_data_file_refuses_a_claim_it_cannot_decide(tmp_path, edit, match):
    with pytest.raises(ValueError, match=match):
        load_claims(_data_file(tmp_path, edit))


def test_a_missing_data_file_is_one_line_naming_it(capsys):
    with pytest.raises(SystemExit) as e:
        claims.main(["--data", "/no/such/claims.yaml"])
    assert e.value.code != 0 and "/no/such/claims.yaml" in capsys.readouterr().err


def test_every_shipped_real_dialogue_run_on_held_out_goals_is_in_the_sequence():
    """The level of the real-dialogue rows counts every run scored on the held-out goals: a shipped
    folder with RL arms evaluated there and missing from the data file's list fails."""
    listed = {r["folder"] for r in load_claims(claims.DATA)["real_dialogue"]["runs"]}
    for cfg_path in (ROOT / "results/real_dialogue").glob("*/config.json"):
        cfg = json.loads(cfg_path.read_text())["config"]
        scored_held_out = cfg.get("eval_split") in (None, "held-out") and cfg.get("arms")
        if scored_held_out:
            assert str(cfg_path.parent.relative_to(ROOT)) in listed, cfg_path.parent


def test_no_verdict_words_outside_the_generated_blocks():
    """The README and docs state verdicts only through the generated ledger: a verdict word outside
    the claims block and outside code spans fails, and a planted one is caught."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "claims.md")]
    found = {p.name: stray_verdicts(p.read_text(encoding="utf-8")) for p in pages}
    assert not any(found.values()), found
    planted = f"Intro.\n{START}\n| **supported** |\n{END}\nThe ordering is supported by both runs; `contradicted` is a word."
    assert stray_verdicts(planted) == ["supported"]


# ----------------------------------------------------------------------------- modular addition's confirmatory rows
def _modadd_folder(root: Path, solves: dict[tuple[str, float, str], list[bool]]) -> None:
    """A run folder with ``runs.csv`` (one row per method, cell and seed; solved -> exact match 1.0)."""
    folder = root / "results/modadd/x"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"config": {"solve_threshold": 0.9}}))
    rows = [{"m": 31, "eta": eta, "teacher_signal": sig, "warm_start": 0, "method": method, "seed": k, "chain_exact": float(s),
             "answer_exact": float(s)} for (method, eta, sig), ss in solves.items() for k, s in enumerate(ss)]
    with (folder / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _claim(kind: str, eta: float, signal: str, **extra) -> dict:
    return {"kind": kind, "folder": "results/modadd/x", "m": 31, "eta": eta, "signal": signal,
            "differences": ["nail-F - bc", "nail-F - opd-F"], **extra}


def test_modadd_rows_read_their_own_signal_and_decide_by_their_rules(tmp_path):
    """GIVEN 29 seeds where, at eta 0.2 with the paper's signal, NAIL solves all and BC / OPD only the
    first 10 / 19, and with the full signal every method solves all; at eta 0 BC and OPD solve all and
    NAIL all but one WHEN the confirmatory rows are decided THEN the paper-signal ordering is supported,
    the full-signal control (no discordance) is uninformative; at eta 0 one BC-only solve of 29 leaves
    non-inferiority undecided (exact upper bound 0.178 > margin 0.15), none supports it (0.119),
    and NAIL solving 5 of 29 contradicts it; a folder that is not shipped is untested."""
    n = 29
    solves = {("nail-F", 0.2, "paper"): [True] * n, ("bc", 0.2, "paper"): [k < 10 for k in range(n)],
              ("opd-F", 0.2, "paper"): [k < 29 - 10 for k in range(n)]}
    solves |= {(m, 0.2, "full"): [True] * n for m in ("nail-F", "bc", "opd-F")}
    solves |= {("nail-F", 0.0, "paper"): [k != 3 for k in range(n)], ("bc", 0.0, "paper"): [True] * n,
               ("opd-F", 0.0, "paper"): [True] * n}
    _modadd_folder(tmp_path, solves)
    ctx = Context(tmp_path, 0.05, 0.005, {"solve_rate": 0.15})
    claimed = {"claimed": ["nail-F - bc", "nail-F - opd-F"]}
    paper = mcnemar(_claim("mcnemar", 0.2, "paper", **claimed), ctx)
    assert paper.verdict == "supported" and "19 only first, 0 only second of 29" in paper.number and "10 only first" in paper.number
    assert mcnemar(_claim("mcnemar", 0.2, "full", **claimed), ctx).verdict == "uninformative"
    clean = noninferior(_claim("noninferior", 0.0, "paper", margin="solve_rate"), ctx)
    assert clean.verdict == "not significant" and "only second solves 1 of 29 seeds (upper bound 0.178)" in clean.number
    for change, verdict in ((("nail-F", [True] * n), "supported"), (("nail-F", [k < 5 for k in range(n)]), "contradicted")):
        shutil.rmtree(tmp_path / "results")
        _modadd_folder(tmp_path, {**solves, (change[0], 0.0, "paper"): change[1]})
        assert noninferior(_claim("noninferior", 0.0, "paper", margin="solve_rate"), ctx).verdict == verdict
    assert mcnemar(_claim("mcnemar", 0.2, "paper", folder="results/modadd/none"), ctx).verdict == "untested"


@given(successes=st.integers(0, 40), extra=st.integers(1, 40))
@example(successes=0, extra=29)
def test_upper_rate_bound_is_the_exact_one_sided_clopper_pearson_bound(successes, extra):
    """At the bound the probability of so few successes is alpha (for successes < n); 0 of 29 at 0.025 is 1 - 0.025^(1/29)."""
    n = successes + extra
    upper = rules.upper_rate_bound(successes, n, 0.025)
    assert sps.binom.cdf(successes, n, upper) == pytest.approx(0.025, rel=1e-6)
    if successes == 0:
        assert upper == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
    with pytest.raises(ValueError, match="need 0 <= successes <= n"):
        rules.upper_rate_bound(n + 1, n, 0.025)


def test_an_undecided_ordering_says_what_would_decide_it(tmp_path):
    """GIVEN the main job's files WHEN an ordering is not significant THEN its evidence names the
    seeds the run's power.csv asks for and whether they fit :data:`REACH_HOURS`; WHEN the planted
    power.csv asks for a handful of seeds THEN it says in reach, and for an unbounded number out of reach."""
    for folder in (MAIN, REPEAT):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("guess_number", "booking", "*.png", "*.pdf"))
    ctx = Context(tmp_path, 0.05, 0.005, {})
    claim = {"kind": "pipeline_ordering", "a": "calibrated", "b": "interactive", "family": "run"}
    shipped = pipeline_ordering(claim, ctx)
    assert shipped.verdict == "not significant" and "asks for guess_number 193, booking 348 seeds" in shipped.number
    assert "10.4 h: out of reach (over 3 h)" in shipped.number
    power = tmp_path / MAIN / "power.csv"
    rows = power.read_text().splitlines()
    planted = [r.replace(",193,", ",10,").replace(",348,", ",12,") for r in rows]
    power.write_text("\n".join(planted) + "\n")
    assert "guess_number 10, booking 12 seeds" in pipeline_ordering(claim, ctx).number
    assert "h: in reach" in pipeline_ordering(claim, ctx).number
    power.write_text("\n".join(r.replace(",12,", ",> 10000,") for r in planted) + "\n")
    assert "booking more than 10000 seeds: out of reach" in pipeline_ordering(claim, ctx).number


def test_perturbed_main_job_runs_join_the_ordering_when_shipped(tmp_path):
    """GIVEN copies of the main job and its repeat WHEN a perturbed-weights run (--perturb-init 1)
    equal to the main job is added THEN the supported headline ordering stays supported and names
    it; WHEN that run's calibrated and static_myopic J_real are swapped on every seed THEN the
    ordering is no longer called (every run must call it)."""
    claim = {"kind": "pipeline_ordering", "a": "calibrated", "b": "static_myopic", "family": "secondary"}
    for folder in (MAIN, REPEAT):
        (tmp_path / folder).mkdir(parents=True)
        for name in ("results.json", "paired.csv", "power.csv", "timings.json"):
            shutil.copy(ROOT / folder / name, tmp_path / folder / name)
    ctx = Context(tmp_path, 0.05, 0.005, {})
    assert pipeline_ordering(claim, ctx).verdict == "supported"
    perturbed = tmp_path / PERTURBED[0]
    shutil.copytree(tmp_path / MAIN, perturbed)
    same = pipeline_ordering(claim, ctx)
    assert same.verdict == "supported" and "perturbed 1:" in same.number and "all 6 call it" in same.family
    results = json.loads((perturbed / "results.json").read_text())
    for r in results["runs"]:
        p = r["paradigms"]
        p["calibrated"]["J_real"], p["static_myopic"]["J_real"] = p["static_myopic"]["J_real"], p["calibrated"]["J_real"]
    (perturbed / "results.json").write_text(json.dumps(results))
    assert pipeline_ordering(claim, ctx).verdict != "supported"
