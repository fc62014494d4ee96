"""The code base passes the configured linter (``ruff check``; rules in ``pyproject.toml``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def _imports(path: Path) -> set[str]:
    """Modules a file imports (``import a.b`` and ``from a.b import c``), by parsing it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


LAYERS = ({"utils"}, {"tabular", "losses", "nn"}, {"theory", "constructions"}, {"shift", "imitation", "crossover", "modadd"},
          {"dialogue", "bound_sweep", "noisy_expert", "modadd_study"}, {"conversations"}, {"distill", "figures", "ledger"}, {"cli", "main_job", "taskmaster_job"})


def _unit(module: str) -> str:
    """The top-level unit of a package module: ``shiftbounds.a.b`` -> ``a``."""
    return module.split(".")[1] if module.count(".") else module


def test_package_layers_import_only_downwards():
    """Every subpackage or module of ``shiftbounds`` sits in one layer of the package docstring and
    imports only from lower layers: no cycle, no arrow running back up. ``from shiftbounds import x``
    counts as importing ``x``."""
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    pkg = ROOT / "shiftbounds"
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.parts in (("shiftbounds", "__init__"), ("shiftbounds", "__main__")):  # the package itself and its command
            continue
        unit = rel.parts[1]
        assert unit in rank, f"{rel}: its unit {unit!r} is in no layer of LAYERS (and of the package docstring)"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module == "shiftbounds":
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shiftbounds."):
                targets = [_unit(node.module)]
            elif isinstance(node, ast.Import):
                targets = [_unit(a.name) for a in node.names if a.name.startswith("shiftbounds.")]
            for t in targets:
                if t != unit:
                    assert rank[t] < rank[unit], f"{rel} ({unit}, layer {rank[unit] + 1}) imports {t} (layer {rank[t] + 1})"
    doc = (pkg / "__init__.py").read_text()
    for u in rank:
        assert f"``shiftbounds.{u}``" in doc, f"the package docstring does not place {u}"


OPTIONAL_EXTRAS = {"peft", "ray", "mdptoolbox"}
"""The only libraries imported inside a function: the optional extras (``lora``, ``ray``, ``bench``),
so that the package imports without them."""


def test_imports_sit_at_module_level():
    """Every import sits at module level, so a file's head shows its real dependencies; the only
    exceptions are the optional extras, imported where they are chosen. No import is relative."""
    for folder in ("shiftbounds", "experiments", "benchmarks", "paper_figures"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level:
                    raise AssertionError(f"{path.relative_to(ROOT)}:{node.lineno} imports relatively")
                if isinstance(node, (ast.Import, ast.ImportFrom)) and node.col_offset:
                    names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    roots = {n.split(".")[0] for n in names}
                    assert roots <= OPTIONAL_EXTRAS, (f"{path.relative_to(ROOT)}:{node.lineno} imports {sorted(roots)} inside a "
                                                      f"block; only the optional extras {sorted(OPTIONAL_EXTRAS)} may be")


def test_dialogue_views_do_not_import_each_other():
    """The exact and neural views of ``shiftbounds.dialogue`` share only the core; the core imports
    neither view."""
    pkg = ROOT / "shiftbounds" / "dialogue"
    views = {"exact": "shiftbounds.dialogue.neural", "neural": "shiftbounds.dialogue.exact"}
    for view, other in views.items():
        for path in (pkg / view).rglob("*.py"):
            bad = {m for m in _imports(path) if m.startswith(other)}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
    for path in pkg.glob("*.py"):
        bad = {m for m in _imports(path) if m.startswith(tuple(views.values()))}
        assert not bad, f"core module {path.relative_to(ROOT)} imports a view: {sorted(bad)}"


def test_log_softmax_only_in_the_loss_module():
    """Logits are normalised in one place (``shiftbounds.losses``); model code aside, no other
    module of the package, the experiments or the benchmarks calls ``log_softmax``."""
    for folder in ("shiftbounds", "experiments", "benchmarks", "paper_figures"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "losses.py" or "nn" in path.relative_to(ROOT).parts:
                continue
            assert "log_softmax(" not in path.read_text(), path.relative_to(ROOT)


def test_atomic_writes_only_in_the_io_module():
    """Every atomic write goes through ``shiftbounds.utils.io.atomic_replace``, whose temporary
    names ``guard_resume`` cleans after a killed run; a temporary file named elsewhere (a model
    checkpoint's used to be) would survive a kill and a resume."""
    for folder in ("shiftbounds", "experiments", "benchmarks", "paper_figures"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.relative_to(ROOT).as_posix() == "shiftbounds/utils/io.py":
                continue
            text = path.read_text()
            for call in ("mkstemp(", "os.replace(", "NamedTemporaryFile("):
                assert call not in text, f"{path.relative_to(ROOT)} calls {call}"


ENTRY_POINT_LINES = 150
"""An experiment file's budget: config, presets and a ``main`` that calls the library in order."""


def test_entry_points_stay_within_their_line_budget():
    """Every ``experiments/*.py`` is at most :data:`ENTRY_POINT_LINES` lines."""
    for path in sorted((ROOT / "experiments").glob("*.py")):
        if path.name == "__init__.py":
            continue
        n = len(path.read_text().splitlines())
        assert n <= ENTRY_POINT_LINES, f"experiments/{path.name}: {n} lines, over the budget of {ENTRY_POINT_LINES}"


FUNCTION_LINES = 65
"""A library function's budget, docstring included: about 60 lines (``train_agent`` is the longest, at 65)."""


def test_library_functions_stay_short():
    """Every function of the package, nested ones included, is at most :data:`FUNCTION_LINES` lines long
    (a longer one is split into named steps)."""
    long = []
    for path in sorted((ROOT / "shiftbounds").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, "functions over the budget: " + "; ".join(long)
