"""Quotes checked in place: every number a docs page quotes in a ``<!-- results: FILE ... -->``
block is found at the row and column it comes from, not merely somewhere in the named files.

A shipped file is read as **records**: a CSV row, a Markdown table row, or a JSON object (its
numbers keyed by their path inside it, down to three levels). A quoted number matches a value when
the value rounds to it at the quoted precision. Then:

* **tables** — each row of a Markdown table in the block is covered by records of the named files
  (each interval, e.g. ``0.41 [0.37, 0.45]``, all in one record); down each column, the cells
  that start with a number have it under one key common to all of them, or all in one record (a
  table laid out transposed): the column they come from; and a row whose first cell is the name of
  a row of the files (e.g. an arm, ``static_awr``) is read from a record of that name: the row it
  comes from;
* **prose** — each interval ``v [low, high]`` outside a table is found in one record (the triple
  together), and every other number somewhere in the named files.

:func:`check_page` returns the problems, each naming the page's block, the table row or the number.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

BLOCK = re.compile(r"<!-- results: ([^>]+?) -->(.*?)<!-- /results -->", re.S)
DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?!\w|\.\d)")
INTERVAL = re.compile(r"([-+]?\d+\.\d+) \[([-+]?\d+\.\d+), ([-+]?\d+\.\d+)\]")
_NUMBERS = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_DEPTH = 3


def _numbers(text: object) -> list[float]:
    return [float(x) for x in _NUMBERS.findall(str(text))]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class Record:
    """One row of a shipped file: ``values`` (key -> its numbers), ``names`` (its text fields,
    normalised by :func:`_name`) and ``file``."""

    def __init__(self, values: dict[str, list[float]], texts: list[str], file: Path) -> None:
        self.values, self.file = values, file
        self.names = {_name(t) for t in texts}

    def holds(self, quoted: list[str]) -> bool:
        """Every quoted number is one of this record's values."""
        return all(any(matches(q, v) for vs in self.values.values() for v in vs) for q in quoted)

    def keys_of(self, quoted: str) -> set[str]:
        return {k for k, vs in self.values.items() if any(matches(quoted, v) for v in vs)}


def matches(quoted: str, value: float) -> bool:
    """``value`` rounds to ``quoted`` at its number of decimals."""
    d = len(quoted.split(".")[1]) if "." in quoted else 0
    return abs(round(value, d) - float(quoted)) < 10 ** -(d + 3)


def _table_rows(lines: list[str]) -> Iterator[list[str]]:
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not set("".join(cells)) <= set("-: "):
            yield cells


def _markdown_tables(text: str) -> list[list[list[str]]]:
    """The Markdown tables of ``text``, each as its rows of cells (header first)."""
    out, run = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            run.append(line)
        elif run:
            out.append(list(_table_rows(run)))
            run = []
    return out


def _json_records(node: object, path: str, out: list[Record], file: Path) -> None:
    if isinstance(node, dict):
        values: dict[str, list[float]] = {}
        texts: list[str] = []

        def flatten(n: object, key: str, depth: int) -> None:
            if isinstance(n, bool) or depth > _DEPTH:
                return
            if isinstance(n, (int, float)):
                values[key] = [float(n)]
            elif isinstance(n, str):
                texts.append(n if depth <= 1 else "")
                if _numbers(n):
                    values[key] = _numbers(n)
            elif isinstance(n, dict):
                for k, v in n.items():
                    flatten(v, f"{key}.{k}" if key else str(k), depth + 1)
            elif isinstance(n, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in n):
                for i, x in enumerate(n):
                    values[f"{key}[{i}]"] = [float(x)]

        flatten(node, "", 0)
        if values:
            keys = [k for k in path.split("/") if k and "[" not in k]
            out.append(Record(values, [*texts, *keys], file))  # named by the keys it sits under too
        for k, v in node.items():
            _json_records(v, f"{path}/{k}", out, file)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _json_records(v, f"{path}[{i}]", out, file)


def records(path: Path) -> list[Record]:
    """The records of one shipped results file (``.csv``, ``.md`` or ``.json``)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        return [Record({k: _numbers(v) for k, v in row.items() if k is not None and v and _numbers(v)},
                       [v for v in row.values() if isinstance(v, str) and not _is_number(v)], path)
                for row in csv.DictReader(text.splitlines())]
    if path.suffix == ".md":
        prose = "\n".join(line for line in text.splitlines() if not line.startswith("|"))
        return [Record({h: _numbers(c) for h, c in zip(t[0], row) if _numbers(c)}, [c for c in row if not _is_number(c)], path)
                for t in _markdown_tables(text) for row in t[1:]] + [Record({"prose": _numbers(prose)}, [], path)]
    if path.suffix == ".json":
        out: list[Record] = []
        _json_records(json.loads(text), "", out, path)
        return out
    raise ValueError(f"a results block may name .csv, .md or .json files; got {path}")


def _cover(cells: list[tuple[int, list[str]]], pool: list[Record]) -> list[Record] | None:
    """Records covering every cell (greedy: most cells first, then the smallest record), or None."""
    chosen: list[Record] = []
    left = list(cells)
    while left:
        best = max(pool, key=lambda r: (sum(r.holds(q) for _, q in left), -len(r.values)), default=None)
        if best is None or not any(best.holds(q) for _, q in left):
            return None
        chosen.append(best)
        left = [(j, q) for j, q in left if not best.holds(q)]
    return chosen


def _units(cell: str) -> list[list[str]]:
    """A cell's quoted numbers in the groups that must come from one record: each interval
    ``v [low, high]`` together, every other number alone."""
    triples = [list(m.groups()) for m in INTERVAL.finditer(cell)]
    rest = DECIMAL.findall(INTERVAL.sub(" ", cell))
    return triples + [[q] for q in rest]


def _name(text: str) -> str:
    """A row name as compared: lowercased, without Markdown code marks and outer spaces."""
    return text.strip().strip("`*").strip().lower()


def _key_names(record: Record, quoted: str) -> set[str]:
    """The names of the keys holding ``quoted`` in ``record``, whole and by their dotted parts."""
    return {_name(part) for k in record.keys_of(quoted) for part in [k, *k.split(".")]}


def check_table(rows: list[list[str]], pool: list[Record]) -> list[str]:
    """Problems with one docs table read from ``pool``: rows not covered, rows read from records
    (or keys) that name other things, columns whose cells come neither from one key (a table laid
    out as its files are) nor from one record (a table laid out transposed)."""
    problems: list[str] = []
    columns: dict[int, list[tuple[set[str], set[int]]]] = {}
    known = {n for r in pool for n in r.names}
    for row in rows[1:]:
        cells = [(j, u) for j, c in enumerate(row) for u in _units(c)]
        if not cells:
            continue
        cover = _cover(cells, pool)
        if cover is None:
            problems.append(f"row {row[0]!r}: its numbers are not all in records of the named files")
            continue
        label = _name(row[0])
        if label and label in known:  # the row names a row of the files: each number must be read from it (or, transposed, its key)
            stray = [q[0] for _, q in cells if not any(r.holds(q) and (label in r.names or label in _key_names(r, q[0])) for r in pool)]
            if stray:
                problems.append(f"row {row[0]!r}: {', '.join(stray)} not read from the files' row {label!r}")
        for j in dict.fromkeys(j for j, _ in cells if _NUMBERS.match(row[j].strip("` *"))):
            q = next(u for i, u in cells if i == j)  # a cell's first number places it (a censored "never [..]" is not placed)
            found = [r for r in pool if r.holds(q)]
            columns.setdefault(j, []).append(({k for r in found for k in r.keys_of(q[0])}, {id(r) for r in found}))
    for j, cells in columns.items():
        if len(cells) > 1 and not set.intersection(*(k for k, _ in cells)) and not set.intersection(*(r for _, r in cells)):
            problems.append(f"column {rows[0][j] if j < len(rows[0]) else j!r}: its cells come from different columns")
    return problems


def check_block(files: list[Path], body: str) -> list[str]:
    """Problems with one results block (its tables and its prose)."""
    pool = [r for f in files for r in records(f)]
    problems = [p for t in _markdown_tables(body) for p in check_table(t, pool)]
    prose = "\n".join(line for line in body.splitlines() if not line.startswith("|"))
    for m in INTERVAL.finditer(prose):
        if not any(r.holds(list(m.groups())) for r in pool):
            problems.append(f"interval {m.group(0)!r} is not one record's value and bounds")
    every = [v for r in pool for vs in r.values.values() for v in vs]
    problems += [f"{q} is not in the named files" for q in DECIMAL.findall(prose) if not any(matches(q, v) for v in every)]
    return problems


def check_page(root: Path, page: str) -> dict[str, list[str]]:
    """Each results block of ``page`` (by its file list) with its problems; blocks with none are left out."""
    out = {}
    for files, body in BLOCK.findall((root / page).read_text(encoding="utf-8")):
        paths = [root / f for f in files.split()]
        missing = [str(p) for p in paths if not p.is_file()]
        problems = [f"cites files that are not shipped: {missing}"] if missing else check_block(paths, body)
        if problems:
            out[files] = problems
    return out
