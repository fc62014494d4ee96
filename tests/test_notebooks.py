"""Every notebook runs top to bottom (the committed outputs are what a reader sees; this checks
that they still regenerate). A notebook that raises fails the suite."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


def test_notebooks_import_only_from_the_package():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            for line in cell.source.splitlines():
                if line.startswith(("import ", "from ")):
                    module = line.split()[1].split(".")[0]
                    assert module in {"numpy", "matplotlib", "shiftbounds", "pathlib", "json", "tempfile", "IPython"}, (path.name, line)
