"""Modular addition: data, teacher laws, the students' losses and the entry point's smoke preset."""

from __future__ import annotations

import math

import pytest
import torch

from experiments import modadd as exp
from shiftbounds import modadd_study as study
from shiftbounds.modadd import (
    ModAddTask,
    StudentConfig,
    chain_logits,
    consistent_targets,
    noisy_teacher_log_probs,
    prefix_has_error,
    running_sums,
    sample_prompts,
    student_prefixes,
    student_step_loss,
    with_chain,
)
from shiftbounds.nn.transformer import Transformer
from shiftbounds.utils.stats import seeds_for_mcnemar


def test_running_sums_and_consistent_targets():
    task = ModAddTask(p=5, m=4)
    prompts = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(running_sums(task, prompts), torch.tensor([[1, 3, 1, 0]]))
    wrong_chain = torch.tensor([[1, 4, 2, 1]])  # error at step 2
    seqs = with_chain(task, prompts, wrong_chain)
    torch.testing.assert_close(consistent_targets(task, seqs), torch.tensor([[1, 3, 2, 1]]))
    torch.testing.assert_close(prefix_has_error(task, seqs), torch.tensor([[False, False, True, True]]))


def test_noisy_teacher_laws():
    task = ModAddTask(p=5, m=3)
    seqs = with_chain(task, torch.tensor([[1, 1, 1]]), torch.tensor([[1, 3, 4]]))  # error at step 2
    clean = torch.log(torch.full((1, 3, 5), 1e-9)).clone()
    clean[..., 0] = 0.0
    clean = torch.log_softmax(clean, -1)
    mix = noisy_teacher_log_probs(task, clean, seqs, 0.2, "mixture").exp()
    torch.testing.assert_close(mix[0, :, 0], torch.full((3,), 0.8 + 0.2 / 5), atol=1e-6, rtol=0)
    ab = noisy_teacher_log_probs(task, clean, seqs, 0.2, "absorbing").exp()
    torch.testing.assert_close(ab[0, 2], torch.full((5,), 0.2), atol=1e-6, rtol=0)  # after the error: uniform
    torch.testing.assert_close(ab[0, :2], mix[0, :2])
    with pytest.raises(ValueError, match="law must be one of"):
        noisy_teacher_log_probs(task, clean, seqs, 0.2, "sticky")


@pytest.mark.parametrize("method", ["bc", "opd-F", "opd-R", "nail-F", "nail-R", "nail-Mixed"])
def test_every_method_gives_a_finite_differentiable_loss(method):
    task = ModAddTask(p=5, m=3)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    teacher, student = Transformer(task.model_config(16, 1)), Transformer(task.model_config(16, 1))
    signals = ("full",) if method.endswith(("-R", "-Mixed")) else ("full", "sampled")
    for signal in signals:
        cfg = StudentConfig(method=method, eta=0.1, law="absorbing", noised_student=method != "bc", teacher_signal=signal)
        student.zero_grad()
        loss = student_step_loss(task, cfg, student, teacher, sample_prompts(task, 8, g), g)
        assert math.isfinite(loss.item())
        loss.backward()
        assert all(p.grad is not None for p in student.parameters() if p.requires_grad)


def test_sampled_teacher_signal_is_an_unbiased_estimate_of_the_full_one():
    """GIVEN the same prefixes WHEN the sampled-signal loss (log-loss on one noisy-teacher token per
    position) is averaged over many teacher draws THEN it equals the full-signal cross-entropy, i.e.
    the forward KL plus the teacher's entropy (the two signals differ in information, not in target);
    BC's full signal is the forward KL at the teacher's own prefixes."""
    task = ModAddTask(p=5, m=3)
    torch.manual_seed(0)
    teacher, student = Transformer(task.model_config(16, 1)), Transformer(task.model_config(16, 1))
    prompts = sample_prompts(task, 4, torch.Generator().manual_seed(0)).repeat(2000, 1)
    full_cfg = StudentConfig(method="nail-F", eta=0.2, teacher_signal="full")
    kl = student_step_loss(task, full_cfg, student, teacher, prompts, torch.Generator().manual_seed(1)).item()
    sampled = student_step_loss(task, StudentConfig(method="nail-F", eta=0.2, teacher_signal="sampled"), student, teacher,
                                prompts, torch.Generator().manual_seed(1)).item()
    seqs = student_prefixes(task, full_cfg, student, prompts, torch.Generator().manual_seed(1))
    t_logp = noisy_teacher_log_probs(task, torch.log_softmax(chain_logits(task, teacher, seqs), -1), seqs, 0.2, "mixture")
    entropy = -(t_logp.exp() * t_logp).sum(-1).mean().item()
    assert sampled == pytest.approx(kl + entropy, abs=0.02)
    with pytest.raises(ValueError, match="needs the teacher's full distribution"):
        StudentConfig(method="nail-R", teacher_signal="sampled")
    with pytest.raises(ValueError, match="teacher_signal must be one of"):
        StudentConfig(teacher_signal="psychic")


def test_warm_start_is_shared_and_copied():
    """Every method starts from a copy of the same warm start (BC for the given steps): training a
    student from it leaves the warm start unchanged, and zero-step students equal it."""
    from shiftbounds.modadd import train_student, warm_start

    task = ModAddTask(p=5, m=3)
    torch.manual_seed(0)
    teacher = Transformer(task.model_config(16, 1))
    cfg = StudentConfig(method="nail-F", eta=0.2, steps=2, batch=8, d_model=16, n_layer=1)
    init = warm_start(task, cfg, teacher, 3, torch.Generator().manual_seed(0))
    before = {k: v.clone() for k, v in init.state_dict().items()}
    student = train_student(task, cfg, teacher, torch.Generator().manual_seed(1), init=init)
    assert all(torch.equal(v, init.state_dict()[k]) for k, v in before.items())  # the warm start is not trained in place
    assert any(not torch.equal(v, student.state_dict()[k]) for k, v in before.items())


def test_nail_prefixes_are_greedy_and_opd_prefixes_sampled():
    """NAIL is taught at the chain the student would deploy (greedy decoding, identical under any
    generator); OPD at chains sampled from it (varying with the generator, mostly not greedy)."""
    task = ModAddTask(p=5, m=6)
    torch.manual_seed(0)
    student = Transformer(task.model_config(16, 1))
    prompts = sample_prompts(task, 64, torch.Generator().manual_seed(0))
    greedy_chain = chain_logits(task, student, student_prefixes(task, StudentConfig("nail-F"), student, prompts,
                                                                torch.Generator().manual_seed(1)))
    nail = [student_prefixes(task, StudentConfig("nail-F"), student, prompts, torch.Generator().manual_seed(k)) for k in (1, 2)]
    opd = [student_prefixes(task, StudentConfig("opd-F"), student, prompts, torch.Generator().manual_seed(k)) for k in (1, 2)]
    torch.testing.assert_close(nail[0], nail[1])
    chain = nail[0][:, -task.m:]
    # each greedy token is the argmax of the student's logits at its own prefix
    torch.testing.assert_close(chain, greedy_chain[..., : task.p].argmax(-1))
    assert (opd[0] != opd[1]).any()
    assert (opd[0][:, -task.m:] != chain).float().mean() > 0.3
    assert student.training  # left in training mode for the gradient step


def test_plain_and_noised_students():
    """The plain student fits ``pi_hat`` itself: at eta = 0 the noised student is the plain one; at
    eta > 0 the two losses differ."""
    task = ModAddTask(p=5, m=3)
    torch.manual_seed(0)
    teacher, student = Transformer(task.model_config(16, 1)), Transformer(task.model_config(16, 1))
    prompts = sample_prompts(task, 8, torch.Generator().manual_seed(0))

    def loss(eta, noised):
        cfg = StudentConfig(method="nail-F", eta=eta, noised_student=noised)
        return student_step_loss(task, cfg, student, teacher, prompts, torch.Generator().manual_seed(3)).item()

    assert loss(0.0, False) == pytest.approx(loss(0.0, True), abs=1e-7)
    assert abs(loss(0.3, False) - loss(0.3, True)) > 1e-4


def test_student_config_validation():
    with pytest.raises(ValueError, match="method must be one of"):
        StudentConfig(method="rlhf")
    with pytest.raises(ValueError, match="eta must lie in"):
        StudentConfig(eta=1.0)


def test_smoke_entry_point_runs_and_resumes(tmp_path, capsys):
    out = tmp_path / "ma"
    res = exp.main(["--preset", "smoke", "--out-dir", str(out)])
    assert {r["method"] for r in res["rows"]} == {"bc", "nail-F"}
    cells = {(r["m"], r["eta"], r["teacher_signal"], r["warm_start"]) for r in res["rows"]}
    assert cells == {(m, e, s, w) for m in (3, 4) for e in (0.0, 0.2) for s in ("sampled", "full") for w in (0, 5)}
    assert {p["difference"] for p in res["paired"]} == {"nail-F - bc"} and len(res["paired"]) == 2 * len(cells)
    for name in ("results.md", "runs.csv", "paired.csv", "solves.csv", "mcnemar.csv", "results.json", "modadd.png", "modadd.pdf"):
        assert (out / name).exists()
    methods = [r for r in res["solves"] if r["method"] != study.WARM_ROW]
    assert len(methods) == len(res["rows"]) and {t["difference"] for t in res["mcnemar"]} == {"nail-F - bc"}
    assert len([r for r in res["solves"] if r["method"] == study.WARM_ROW]) == len([c for c in cells if c[3] > 0])
    assert len(list((out / "runs").glob("warm_*.pt"))) == 2 * 2 * 2 * 2  # one warm start per (m, eta, signal, seed)
    assert all(t["consistent_accuracy"] > 0.15 for t in res["teachers"])  # 40 steps only: above chance (1/7)
    again = exp.run(exp.parse_config(study.ModAddConfig, "", exp.PRESETS, ["--preset", "smoke", "--out-dir", str(out)], name="experiments.modadd"))
    assert again["rows"] == res["rows"]  # every run resumed from disk
    retab = exp.main(["--preset", "smoke", "--out-dir", str(out), "--retabulate"])  # from results.json alone
    assert retab["rows"] == res["rows"] and retab["paired"] == res["paired"]
    assert all(p["holm verdict"] in (p["verdict"], "not significant") for p in res["paired"])
    with pytest.raises(SystemExit):
        exp.main(["--law", "sticky"])


def test_solve_tables_count_solves_and_test_them_exactly():
    """GIVEN 10 seeds on which NAIL-F solves every time, OPD-F on the even seeds and BC never WHEN the
    solve tables are built THEN the rates carry Clopper-Pearson intervals, the three differences get
    McNemar's exact p (2 / 2^10 for NAIL-F - BC, 2 / 2^5 for the others) and only NAIL-F > BC survives
    Holm over the three."""
    cfg = study.ModAddConfig(m=(31,), etas=(0.2,), methods=("bc", "opd-F", "nail-F"), seeds=10, solve_threshold=0.9)
    cell = {"m": 31, "eta": 0.2, "teacher_signal": "full", "warm_start": 100}
    exact = {"nail-F": lambda k: 1.0, "opd-F": lambda k: 0.95 if k % 2 == 0 else 0.5, "bc": lambda k: 0.89}
    runs = [{**cell, "method": m, "seed": k, "chain_exact": f(k)} for m, f in exact.items() for k in range(10)]
    solves, tests = study.solve_tables(cfg, runs)
    rate = {r["method"]: r for r in solves}
    assert (rate["nail-F"]["solved"], rate["opd-F"]["solved"], rate["bc"]["solved"]) == (10, 5, 0)
    assert rate["nail-F"]["ci"] == "[0.692, 1.000]" and rate["bc"]["ci"] == "[0.000, 0.308]"
    by = {t["difference"]: t for t in tests}
    assert by["nail-F - bc"]["p"] == pytest.approx(2 / 2**10) and by["nail-F - bc"]["holm verdict"] == "nail-F > bc"
    assert by["nail-F - opd-F"]["p"] == pytest.approx(2 / 2**5) and by["nail-F - opd-F"]["holm verdict"] == "not significant"
    assert by["opd-F - bc"]["p"] == pytest.approx(2 / 2**5) and by["opd-F - bc"]["holm verdict"] == "not significant"


@pytest.mark.parametrize("method, same_as", [("bc", "sampled"), ("opd-F", "full"), ("nail-F", "full"), ("nail-R", "full")])
def test_the_papers_signal_gives_bc_samples_and_the_online_students_the_distribution(method, same_as):
    """``teacher_signal="paper"``: offline BC learns from chains sampled from the noisy teacher, the online
    students query its whole distribution at their own prefixes; each loss equals, draw for draw, the
    loss under the equal-information signal it resolves to."""
    task = ModAddTask(p=5, m=3)
    torch.manual_seed(0)
    teacher, student = Transformer(task.model_config(16, 1)), Transformer(task.model_config(16, 1))
    prompts = sample_prompts(task, 8, torch.Generator().manual_seed(0))
    paper = StudentConfig(method=method, eta=0.2, teacher_signal="paper")
    assert paper.signal == same_as
    losses = [student_step_loss(task, StudentConfig(method=method, eta=0.2, teacher_signal=s), student, teacher, prompts,
                                torch.Generator().manual_seed(3)).item() for s in ("paper", same_as)]
    assert losses[0] == losses[1]


def test_curves_record_the_training_without_changing_it(tmp_path):
    """GIVEN the smoke preset with and without ``--curve-every`` WHEN both run THEN every student ends
    where it ends without the curve (evaluating does not train or draw), each curve starts at step 0
    and ends at the last step with the final exact match, and the curves table and figure are written."""
    argv = ["--preset", "smoke", "--m", "3", "--warm-starts", "0", "--teacher-signals", "paper"]
    plain = exp.main([*argv, "--out-dir", str(tmp_path / "plain")])
    curved = exp.main([*argv, "--curve-every", "4", "--out-dir", str(tmp_path / "curved")])
    strip = [{k: v for k, v in r.items() if k != "curve"} for r in curved["runs"]]
    assert strip == plain["runs"] and all("curve" not in r for r in plain["runs"])
    for r in curved["runs"]:
        assert [p["step"] for p in r["curve"]] == [0, 4, 8, 10]
        assert r["curve"][-1]["chain_exact"] == r["chain_exact"]
    for name in ("curves.csv", "curves.png", "curves.pdf", "speed.csv"):
        assert (tmp_path / "curved" / name).exists()
    assert {r["difference"] for r in curved["speed"]} == {"nail-F - bc"} and "solves first" in (tmp_path / "curved" / "results.md").read_text()
    assert not (tmp_path / "plain" / "curves.csv").exists()
    assert study.run_key(study.ModAddConfig(curve_every=4), "run") != study.run_key(study.ModAddConfig(), "run")
    with pytest.raises(ValueError, match="--curve-every must be >= 0"):
        study.ModAddConfig(curve_every=-1)


def test_speed_tables_count_who_solves_first():
    """GIVEN 8 seeds whose curves solve NAIL-F at step 10, BC at 20 on six seeds and never on two,
    and OPD-F at 10 (ties with NAIL) WHEN the speed table is made THEN NAIL-F is sooner than BC on
    all 8 (sign test p = 2 / 2^8), ties with OPD-F count for neither, and medians are reported."""
    cfg = study.ModAddConfig(methods=("bc", "opd-F", "nail-F"), seeds=8, etas=(0.2,), curve_every=10, steps=30)

    def run(method, seed, solve_at):
        curve = [{"step": s, "chain_exact": 1.0 if s >= solve_at else 0.0} for s in (0, 10, 20, 30)]
        return {"m": 8, "eta": 0.2, "teacher_signal": "full", "warm_start": 0, "method": method, "seed": seed, "curve": curve}

    runs = [run("nail-F", k, 10) for k in range(8)] + [run("opd-F", k, 10) for k in range(8)]
    runs += [run("bc", k, 20 if k < 6 else 99) for k in range(8)]
    rows = {r["difference"]: r for r in study.speed_tables(cfg, runs)}
    nail_bc = rows["nail-F - bc"]
    assert (nail_bc["first_sooner"], nail_bc["second_sooner"], nail_bc["seeds"]) == (8, 0, 8)
    assert nail_bc["p"] == pytest.approx(2 / 2 ** 8) and nail_bc["holm verdict"] == "nail-F solves sooner than bc"
    assert nail_bc["median_steps_first"] == 10 and nail_bc["median_steps_second"] == 20
    assert (rows["nail-F - opd-F"]["first_sooner"], rows["nail-F - opd-F"]["second_sooner"]) == (0, 0)
    assert rows["nail-F - opd-F"]["holm verdict"] == "not significant"
    assert study.steps_to_solve(runs[-1], 0.9) == float("inf")


def test_skip_leaves_out_cells_and_names_bad_specs():
    cfg = study.ModAddConfig(m=(31,), etas=(0.0, 0.2), teacher_signals=("paper", "full"), seeds=2, skip=("full@0.0",))
    cells = {(m, eta, sig) for m, eta, sig, _, _ in study.jobs(cfg)}
    assert cells == {(31, 0.0, "paper"), (31, 0.2, "paper"), (31, 0.2, "full")} and len(study.jobs(cfg)) == 6
    for bad in ("full", "full@0.1", "sampled@0.0", "full@zero"):
        with pytest.raises(ValueError, match="--skip takes SIGNAL@ETA"):
            study.ModAddConfig(etas=(0.0, 0.2), teacher_signals=("paper", "full"), skip=(bad,))


def test_the_confirmatory_preset_is_the_stated_design():
    """The preset behind the ledger's confirmatory rows holds what docs/results.md stated before it
    ran: m = 31 from random weights, the paper's signal at eta 0 and 0.2 with the full-signal control
    at 0.2 only, 29 seeds = the McNemar sizing at Holm's first bar, a seed no pilot used."""
    cfg = exp.parse_config(study.ModAddConfig, "", exp.PRESETS, ["--preset", "confirm"], name="experiments.modadd")
    assert (cfg.m, cfg.etas, cfg.warm_starts, cfg.steps, cfg.solve_threshold) == ((31,), (0.0, 0.2), (0,), 800, 0.9)
    assert cfg.seeds == seeds_for_mcnemar(0.3, 0.3, alpha=0.05 / 2) == 29
    assert {(eta, sig) for _, eta, sig, _, _ in study.jobs(cfg)} == {(0.0, "paper"), (0.2, "paper"), (0.2, "full")}
    assert cfg.seed not in {exp.PRESETS[p].get("seed", 0) for p in exp.PRESETS if p != "confirm"} | {2000}
