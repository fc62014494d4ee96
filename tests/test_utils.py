"""Plumbing: atomic files, statistics, CLI from dataclasses, progress."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.stats import norm

from shiftbounds.utils.cli import build_parser, load_config_file, parse_config
from shiftbounds.utils.io import atomic_replace, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import Progress, format_seconds
from shiftbounds.utils.stats import (
    auc_ci,
    holm,
    holm_verdicts,
    linear_slope,
    loglog_slope,
    mean_ci,
    paired_trend,
    proportion_ci,
    roc_auc,
    trend,
)


def test_write_json_roundtrip_and_no_temp_left(tmp_path):
    p = write_json(tmp_path / "a" / "r.json", {"x": np.float64(1.5), "y": np.arange(3), "z": float("nan")})
    assert read_json(p) == {"x": 1.5, "y": [0, 1, 2], "z": "nan"}
    assert [f.name for f in p.parent.iterdir()] == ["r.json"]


def test_read_json_names_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match=r"bad\.json is not valid JSON"):
        read_json(bad)


def test_guard_resume_records_then_refuses_changed_settings(tmp_path):
    cfg = {"steps": 10, "lr": 1e-3, "out_dir": "a", "device": "cpu"}
    guard_resume(tmp_path, cfg, ignore=("out_dir",))
    assert read_json(tmp_path / "config.json")["config"] == cfg
    guard_resume(tmp_path, {**cfg, "out_dir": "b"}, ignore=("out_dir",))  # ignored keys never matter
    with pytest.raises(ValueError, match=r"device: saved 'cpu', now 'cuda'.*steps: saved 10, now 20") as err:
        guard_resume(tmp_path, {**cfg, "steps": 20, "device": "cuda"}, ignore=("out_dir",))
    assert "lr" not in str(err.value)
    guard_resume(tmp_path, {**cfg, "steps": 20}, ignore=("steps", "out_dir", "device"))


def test_guard_resume_refuses_another_thread_count_where_it_changes_results(tmp_path):
    import torch

    cfg = {"steps": 10}
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        guard_resume(tmp_path, cfg, environment=("torch_threads",))
        guard_resume(tmp_path, cfg, environment=("torch_threads",))  # the same count resumes
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match=r"torch_threads: saved 1, now 2"):
            guard_resume(tmp_path, cfg, environment=("torch_threads",))
        guard_resume(tmp_path, cfg)  # a run whose results do not depend on it resumes
    finally:
        torch.set_num_threads(before)


def test_guard_resume_warns_and_keeps_the_environment_when_a_folder_moves_machine(tmp_path, monkeypatch):
    """GIVEN a folder started on one CPU WHEN it is resumed on another THEN the resume goes on, warns
    naming the saved and current CPU, and keeps the earlier environment; the same machine is silent."""
    import warnings

    from shiftbounds.utils import io

    cfg = {"steps": 10}
    here = io.run_environment()
    guard_resume(tmp_path, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        guard_resume(tmp_path, cfg)  # the same machine: no warning
    assert "earlier_environments" not in read_json(tmp_path / "config.json")
    monkeypatch.setattr(io, "run_environment", lambda: {**here, "cpu_model": "Another CPU"})
    with pytest.warns(UserWarning, match=r"cpu_model: saved .*, now 'Another CPU'"):
        guard_resume(tmp_path, cfg)
    saved = read_json(tmp_path / "config.json")
    assert saved["environment"]["cpu_model"] == "Another CPU"
    assert [e["cpu_model"] for e in saved["earlier_environments"]] == [here["cpu_model"]]
    monkeypatch.setattr(io, "run_environment", lambda: {**here, "cpu_model": "Another CPU", "torch_threads": 7})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        guard_resume(tmp_path, cfg)  # the thread count alone does not move a one-thread run's rounding
    assert len(read_json(tmp_path / "config.json")["earlier_environments"]) == 1


def test_csv_and_markdown(tmp_path):
    rows = [{"a": 1, "b": 0.123456}, {"a": 2, "c": "x"}]
    text = write_csv(tmp_path / "t.csv", rows).read_text()
    assert text.splitlines()[0] == "a,b,c"
    md = markdown_table(rows)
    assert md.splitlines()[2] == "| 1 | 0.1235 |"


def test_loglog_slope_recovers_power_and_ci_covers():
    rng = np.random.default_rng(0)
    x = np.repeat([2, 4, 8, 16, 32], 8)
    y = 3 * x**2.0 * np.exp(rng.normal(0, 0.05, x.size))
    est = loglog_slope(x, y, rng=rng, n_boot=500)
    assert est.contains(2.0) and est.high - est.low < 0.1
    est = linear_slope(x, np.log(y), rng=rng, n_boot=200)
    assert est.low <= est.value <= est.high
    with pytest.raises(ValueError, match="positive"):
        loglog_slope(x, -y, rng=rng)
    with pytest.raises(ValueError, match="two distinct"):
        loglog_slope([2, 2], [1, 2], rng=rng)


def test_mean_and_proportion_ci():
    e = mean_ci(np.array([1.0, 2.0, 3.0]))
    assert e.value == 2.0 and e.low < 2.0 < e.high
    assert mean_ci(np.array([5.0])).low == 5.0
    p = proportion_ci(0, 10)
    assert p.low == pytest.approx(0.0, abs=1e-12) and 0.2 < p.high < 0.35
    with pytest.raises(ValueError, match="successes=11, n=10"):
        proportion_ci(11, 10)


@dataclass(frozen=True)
class _Cfg:
    n: int = field(default=3, metadata={"help": "a count"})
    xs: tuple[int, ...] = field(default=(1, 2), metadata={"help": "values"})
    flag: bool = field(default=False, metadata={"help": "a flag"})
    t: float | None = field(default=None, metadata={"help": "an optional float"})
    out_dir: str = field(default="results/demo/default", metadata={"help": "folder", "resume": False})

    def __post_init__(self):
        if self.n < 1:
            raise ValueError(f"--n must be >= 1; got {self.n}")


def test_trend_quarters_and_fitted_rise():
    line = trend([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    assert line["steps"] == 8 and line["first_quarter"] == 0.5 and line["last_quarter"] == 6.5
    assert line["fitted_rise"] == pytest.approx(7.0) and line["rise_low"] == pytest.approx(7.0) == line["rise_high"]  # no residual
    flat = trend([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    assert flat["first_quarter"] == 1.0 and flat["last_quarter"] == 0.0 and flat["fitted_rise"] == pytest.approx(-3 / 7)
    assert flat["rise_low"] < 0 < flat["rise_high"]  # an alternating series has no trend to speak of
    # the interval is scipy's slope standard error, scaled to the series' length
    rng = np.random.default_rng(0)
    v = 0.01 * np.arange(40) + rng.normal(0, 0.1, 40)
    fit = stats.linregress(np.arange(40), v)
    t = trend(v)
    assert t["rise_high"] - t["fitted_rise"] == pytest.approx(stats.t.ppf(0.975, 38) * fit.stderr * 39)
    assert trend([0.25]) == {"steps": 1, "first_quarter": 0.25, "last_quarter": 0.25, "fitted_rise": 0.0, "rise_low": None,
                             "rise_high": None}
    with pytest.raises(ValueError, match="non-empty 1-d series"):
        trend([])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(2, 30), st.integers(0, 2**32 - 1))
@example(2, 2, 0)
def test_paired_trend_is_the_slope_of_the_mean_curve(n_steps, n_units, seed):
    """The mean of the per-unit rises is the rise of the mean curve's least-squares line (linearity),
    to rounding; its interval is the t-interval of the per-unit rises."""
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.integers(1, 5, n_steps))
    y = rng.integers(0, 2, (n_steps, n_units)).astype(float)
    t = paired_trend(steps, y)
    assert t["fitted_rise"] == pytest.approx(np.polyfit(steps, y.mean(axis=1), 1)[0] * (steps[-1] - steps[0]), abs=1e-12)
    rises = [np.polyfit(steps, y[:, j], 1)[0] * (steps[-1] - steps[0]) for j in range(n_units)]
    e = mean_ci(np.array(rises))
    assert t["rise_low"] == pytest.approx(e.low, abs=1e-12) and t["rise_high"] == pytest.approx(e.high, abs=1e-12)
    assert t["first"] == y[0].mean() and t["last"] == y[-1].mean() and (t["checkpoints"], t["units"]) == (n_steps, n_units)


def test_paired_trend_reads_goals_not_checkpoint_noise():
    """Every goal won from the third checkpoint on: a rise whose interval is the spread over goals;
    goals that never change: a rise of exactly 0; bad shapes named."""
    y = np.zeros((5, 8))
    y[2:, :4] = 1.0
    t = paired_trend([0, 10, 20, 30, 40], y)
    assert t["first"] == 0.0 and t["last"] == 0.5 and 0 < t["rise_low"] < t["fitted_rise"] < t["rise_high"]
    flat = paired_trend([0, 1], np.ones((2, 3)))
    assert flat["fitted_rise"] == flat["rise_low"] == flat["rise_high"] == 0.0
    with pytest.raises(ValueError, match=r"outcomes of shape \(steps, units >= 2\); got steps \[0.0, 1.0\] and outcomes of shape \(3, 2\)"):
        paired_trend([0, 1], np.ones((3, 2)))
    with pytest.raises(ValueError, match="increasing steps"):
        paired_trend([1, 1], np.ones((2, 2)))


def test_auc_interval_covers_the_binormal_auc():
    """Hanley-McNeil intervals cover the true AUC of two unit normals ``d`` apart about 95 % of the time."""
    rng = np.random.default_rng(7)
    true, n = float(norm.cdf(0.5 / np.sqrt(2))), 60
    hits = sum(auc_ci(roc_auc(np.r_[rng.normal(0.5, 1, n), rng.normal(0, 1, n)], np.r_[np.ones(n), np.zeros(n)]), n, n).contains(true)
               for _ in range(400))
    assert 0.90 <= hits / 400 <= 0.98
    assert auc_ci(0.6, 400, 400).high - auc_ci(0.6, 400, 400).low < auc_ci(0.6, 40, 40).high - auc_ci(0.6, 40, 40).low
    e = auc_ci(1.0, 5, 5)
    assert e.low <= e.high == 1.0
    with pytest.raises(ValueError, match="auc=1.5"):
        auc_ci(1.5, 3, 3)


def test_cli_presets_overrides_help_and_config_file(tmp_path, capsys):
    presets = {"default": {}, "smoke": {"n": 1}}
    cfg = parse_config(_Cfg, "doc", presets, ["--preset", "smoke", "--xs", "4,5", "--flag"], name="experiments.demo")
    assert cfg == _Cfg(n=1, xs=(4, 5), flag=True, out_dir="results/demo/smoke")
    assert parse_config(_Cfg, "doc", presets, ["--no-flag"], name="experiments.demo").out_dir == "results/demo/default"
    assert parse_config(_Cfg, "doc", presets, ["--t", "0.5"], name="experiments.demo").t == 0.5  # an X | None option reads X
    with pytest.raises(SystemExit):
        parse_config(_Cfg, "doc", presets, ["--preset", "smoke", "--help"], name="experiments.demo")
    shown = capsys.readouterr().out
    assert "a count (default: 1)" in shown and "--no-flag" in shown  # the smoke preset's value, not the dataclass's
    with pytest.raises(SystemExit):
        parse_config(_Cfg, "doc", presets, ["--n", "0"], name="experiments.demo")
    assert "--n must be >= 1; got 0" in capsys.readouterr().err
    (tmp_path / "c.yaml").write_text("n: 7\nxs: [1, 2]\n")
    (tmp_path / "c.json").write_text(json.dumps({"config": {"n": 8, "xs": [3]}, "environment": {}}))
    assert parse_config(_Cfg, "doc", presets, ["--config", str(tmp_path / "c.yaml"), "--n", "9"], name="x").n == 9
    assert parse_config(_Cfg, "doc", presets, ["--config", str(tmp_path / "c.yaml")], name="x").xs == (1, 2)
    assert parse_config(_Cfg, "doc", presets, ["--config", str(tmp_path / "c.json")], name="x").n == 8
    (tmp_path / "bad.json").write_text(json.dumps({"nn": 1}))
    with pytest.raises(ValueError, match=r"unknown options \['nn'\]"):
        load_config_file(tmp_path / "bad.json", _Cfg)
    with pytest.raises(ValueError, match="needs the presets"):
        build_parser(_Cfg, "doc", {"default": {}}, name="demo")


def test_progress_prints_eta():
    buf = io.StringIO()
    p = Progress(3, "job", stream=buf, min_interval=0.0)
    for _ in range(3):
        p.update(note="step")
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("[job] 3/3") and "ETA 0s" in lines[-1]
    assert format_seconds(3725) == "1h02m" and format_seconds(65) == "1m05s"


def test_guard_resume_skips_config_fields_marked_resume_false(tmp_path):
    @dataclass(frozen=True)
    class Cfg:
        steps: int = 10
        out_dir: str = field(default="a", metadata={"resume": False})

    orphan = tmp_path / "seed0" / ".agent.pt.x1y2.tmp"  # what a process killed mid-write leaves
    orphan.parent.mkdir()
    orphan.write_text("partial")
    seen = []  # the temporary name every atomic write uses is one guard_resume removes
    atomic_replace(tmp_path / "seed0" / "agent.pt", lambda tmp: (seen.append(Path(tmp).name), Path(tmp).write_text("x")))
    guard_resume(tmp_path, Cfg())
    assert not orphan.exists() and seen[0].startswith(".agent.pt.") and Path(seen[0]).match(".*.tmp")
    assert read_json(tmp_path / "config.json")["config"] == {"steps": 10, "out_dir": "a"}
    guard_resume(tmp_path, Cfg(out_dir="elsewhere"))
    with pytest.raises(ValueError, match="steps: saved 10, now 11"):
        guard_resume(tmp_path, Cfg(steps=11))

    @dataclass(frozen=True)
    class Later(Cfg):  # a setting added after the folder was made
        fast: bool = True

    with pytest.raises(ValueError, match="fast: saved False, now True"):  # the folder was made the old way
        guard_resume(tmp_path, Later(), legacy={"fast": False})
    guard_resume(tmp_path, Later(fast=False), legacy={"fast": False})
    assert read_json(tmp_path / "config.json")["config"]["fast"] is False  # now recorded

    @dataclass(frozen=True)
    class Listed(Later):  # a tuple setting added later: its legacy value is compared as JSON reads it back
        users: tuple[str, ...] = ()

    guard_resume(tmp_path, Listed(fast=False), legacy={"users": ()})
    with pytest.raises(ValueError, match=r"users: saved \[\], now \['a'\]"):
        guard_resume(tmp_path, Listed(fast=False, users=("a",)))


def test_stage_cache_computes_once_then_loads(tmp_path):
    from shiftbounds.utils.stages import StageCache

    calls = []

    def make():
        calls.append(1)
        return {"x": len(calls)}

    cache = StageCache(tmp_path / "stages")
    assert cache.json("a", make) == {"x": 1} and set(cache.seconds) == {"a"}
    again = StageCache(tmp_path / "stages")
    assert again.json("a", make) == {"x": 1} and calls == [1] and again.seconds == {}  # loaded, not recomputed
    saved = []
    value = again.torch("m", lambda: [1, 2], load=lambda p: ("loaded", p.name), save=lambda v, p: (saved.append(p.name), p.write_text("x")))
    assert value == [1, 2] and saved == ["m.pt"]
    assert again.torch("m", lambda: [3], load=lambda p: ("loaded", p.name), save=None) == ("loaded", "m.pt")
    quiet = StageCache(tmp_path / "other", save=False)
    assert quiet.json("b", make) == {"x": 2} and not (tmp_path / "other").exists()
    assert again.saved("a") and again.saved("m") and not again.saved("b") and not quiet.saved("b")  # what was written, only
    again.folder_stage("f", lambda tmp: tmp.mkdir())
    assert again.saved("f")
    # each saved stage's seconds are kept beside it, for any later call; an unsaved one's are not
    kept = StageCache(tmp_path / "stages").saved_seconds()
    assert kept == {"a": cache.seconds["a"], "f": again.seconds["f"], "m": again.seconds["m"]} and not quiet.saved_seconds()
    (tmp_path / "stages" / "a.json").unlink()  # a stage deleted to be recomputed has no seconds until it is
    assert set(StageCache(tmp_path / "stages").saved_seconds()) == {"f", "m"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=20))
@example([0.01, 0.04, 0.03, 0.005])
def test_holm_lies_between_bonferroni_and_no_correction(p):
    rejected = holm(p)
    m = len(p)
    assert all(r <= (q < 0.05) for r, q in zip(rejected, p))  # never more than each test alone
    assert all(r >= (q < 0.05 / m) for r, q in zip(rejected, p))  # never fewer than Bonferroni
    if p == [0.01, 0.04, 0.03, 0.005]:  # 0.005 < 0.05/4, 0.01 < 0.05/3, then 0.03 >= 0.05/2 stops
        assert rejected == [True, False, False, True]
    with pytest.raises(ValueError, match="p-values in"):
        holm([0.2, 1.5])
    rows = [{"p": q, "verdict": f"row {i}"} for i, q in enumerate(p)]
    assert holm_verdicts(rows) == [f"row {i}" if r else "not significant" for i, r in enumerate(rejected)]


def test_run_graph_starts_each_job_after_its_needs_and_refuses_cycles():
    """In one process the jobs run in their order as far as their needs allow (a need that is no
    job counts as done); on two spawned workers the results are the same; a cycle is named."""
    import operator

    from shiftbounds.utils.workers import run_graph

    order: list[str] = []

    def job(name: str) -> str:
        order.append(name)
        return name.upper()

    jobs = {"eval": (job, "eval"), "agent": (job, "agent"), "base": (job, "base"), "users": (job, "users")}
    needs = {"eval": ("agent", "users"), "agent": ("base", "saved elsewhere"), "users": ("base",)}
    out = run_graph(lambda f, name: f(name), jobs, needs, 1)
    assert order == ["base", "agent", "users", "eval"] and list(out) == list(jobs) and out["eval"] == "EVAL"
    spawned = run_graph(operator.mul, {k: (k, 3) for k in ("ab", "c", "d")}, {"ab": ("c",), "c": ("d",)}, 2)
    assert spawned == {"ab": "ababab", "c": "ccc", "d": "ddd"}
    with pytest.raises(ValueError, match="need each other"):
        run_graph(operator.mul, {"a": ("a", 1), "b": ("b", 1), "c": ("c", 1)}, {"a": ("b",), "b": ("a",)}, 2)
    with pytest.raises(ValueError, match="workers must be >= 1; got 0"):
        run_graph(operator.mul, {}, {}, 0)


def test_atomic_torch_save_gives_the_same_bytes_for_the_same_object(tmp_path):
    """GIVEN one state dict WHEN it is saved twice to different files THEN the files are byte-identical
    (the temporary sibling's random name does not reach the archive)."""
    import torch

    from shiftbounds.utils.io import atomic_torch_save

    obj = {"w": torch.arange(6.0).reshape(2, 3), "config": {"d": 2}}
    atomic_torch_save(obj, tmp_path / "a.pt")
    atomic_torch_save(obj, tmp_path / "b.pt")
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "a.pt", weights_only=True)["w"], obj["w"])
