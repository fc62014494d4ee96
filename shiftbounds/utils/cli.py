"""One command-line convention for every entry point, built from a frozen config dataclass.

Every experiment, benchmark and ``paper_figures`` takes:

* ``--preset NAME`` — a named set of defaults; every entry point has ``smoke`` (the tests use it)
  and ``default`` (the default), some also ``cpu``, ``gpu`` or ``paper``;
* ``--config FILE`` — a JSON or YAML mapping of options (a run's own ``config.json`` reruns it);
  applied on top of the preset;
* one ``--field-name`` per field of the config (help text from the field's ``metadata["help"]``);
  tuples are written comma-separated (``--horizons 4,8,16``), booleans as ``--flag`` /
  ``--no-flag``; explicitly given options override preset and file; a config composed of the
  library's own configs (:mod:`shiftbounds.utils.configs`) takes dotted flags, ``--rl.steps 600``,
  shown in one section of ``--help`` per component (a component option's flat name, the one runs
  made before the component saved, is read too: ``--rl-steps 600``);
* ``--out-dir`` (default ``results/<entry point>/<preset>/``), ``--seed``, ``--threads``, and
  ``--executor local|ray`` (where independent jobs run, :mod:`shiftbounds.utils.workers`).

``--help`` shows the values of the chosen preset (and file): ``--preset smoke --help`` prints the
smoke defaults. Validation stays in the dataclass's ``__post_init__``: a bad option fails at start
with the dataclass's own message, which names the option.
"""

from __future__ import annotations

import argparse
import json
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch
import yaml

from shiftbounds.utils.configs import build, components, defaults, normalise, option_help, option_type, options, spellings
from shiftbounds.utils.io import StaleFolderError
from shiftbounds.utils.workers import EXECUTORS, set_executor

C = TypeVar("C")

REQUIRED_PRESETS = ("smoke", "default")


def default_threads() -> int:
    """Half the machine's cores (at least 1): two runs sharing the machine do not oversubscribe it."""
    return max(1, (os.cpu_count() or 2) // 2)


def set_threads(n: int) -> int:
    """Set torch's intra-op (and, where still possible, inter-op) thread pools to ``n``; once per process."""
    if n < 1:
        raise ValueError(f"--threads must be >= 1; got {n}")
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # already set, or parallel work has started: the intra-op pool is what matters
        pass
    return n


def exit_on_stale(run, cfg):
    """``run(cfg)``, with a refused output folder (:class:`~shiftbounds.utils.io.StaleFolderError`)
    reported as a one-line error (exit status 1) instead of a traceback."""
    try:
        return run(cfg)
    except StaleFolderError as exc:
        raise SystemExit(f"error: {exc}") from None


def _parse_tuple(item_type: type):
    def parse(text: str) -> tuple:
        try:
            return tuple(item_type(v) for v in text.split(",") if v.strip())
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected comma-separated {item_type.__name__} values; got {text!r}") from exc

    return parse


def _converter(tp: Any):
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        return _parse_tuple(args[0] if args else str)
    if origin in (typing.Union, types.UnionType):  # Optional[X], X | None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return _converter(inner)
    if origin is typing.Literal:
        return str
    return tp


def _check_value(path: Path, name: str, value: Any, tp: Any) -> Any:
    """``value`` for the field ``name`` of type ``tp`` (lists become tuples), or a ``ValueError``
    naming the file, the option, the value and the type expected."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(inner) < len(typing.get_args(tp)):
            return None
        tp, origin = inner[0], typing.get_origin(inner[0])
    if origin is tuple:
        if isinstance(value, (list, tuple)):
            items = typing.get_args(tp)
            if not items:
                return tuple(value)
            if len(items) == 1 or items[1] is Ellipsis:
                return tuple(_check_value(path, name, v, items[0]) for v in value)
            if len(items) == len(value):
                return tuple(_check_value(path, name, v, t) for v, t in zip(value, items))
        expected = "a list"
    elif origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        expected = f"one of {typing.get_args(tp)}"
    elif tp is bool:
        if isinstance(value, bool):
            return value
        expected = "true or false"
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        expected = "an integer"
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        expected = "a number"
    elif tp is str:
        if isinstance(value, str):
            return value
        expected = "a string"
    else:
        return value
    raise ValueError(f"--config {path}: option {name} must be {expected}; got {value!r}")


def load_config_file(path: str | os.PathLike, cls: type, *, section: str | None = None,
                     sections: Mapping[str, type] | None = None) -> dict[str, Any]:
    """The options in a JSON or YAML file (``.json``, ``.yaml``, ``.yml``) as field values of ``cls``.

    A run's ``config.json`` (``{"config": {...}, "environment": {...}}``) gives its ``config``
    part. Lists become tuples for tuple fields; a value of the wrong type (``steps: abc``) is an
    error naming the option. With ``sections`` (the commands of one program, name -> config class),
    one file serves every command: a top-level mapping named after a command holds that command's
    own options, and the other top-level options are shared, each applied to the commands that have
    it (an option no command has is an error). An unknown option, malformed YAML or JSON, or a file
    that is not a mapping is an error naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config {path}: no such file")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"--config {path} is not valid YAML ({' '.join(str(exc).split())})") from None
    elif path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--config {path} is not valid JSON ({exc})") from exc
    else:
        raise ValueError(f"--config {path}: expected a .json, .yaml or .yml file")
    if isinstance(data, Mapping) and isinstance(data.get("config"), Mapping):
        data = data["config"]
    if not isinstance(data, Mapping):
        raise ValueError(f"--config {path} must hold a mapping of options; got {type(data).__name__}")
    names = spellings(cls)
    data = {str(k) if sections and str(k) in sections else str(k).replace("-", "_"): v for k, v in data.items()}
    if sections:
        own = data.get(section, {}) if section else {}
        if not isinstance(own, Mapping):
            raise ValueError(f"--config {path}: section {section} must be a mapping of options; got {own!r}")
        known = {s for c in sections.values() for s in spellings(c)} | {n for c in sections.values() for n in components(c)}
        shared = {k: v for k, v in data.items() if k not in sections}
        unknown = sorted(k for k in shared if k not in known)
        if unknown:
            raise ValueError(f"--config {path}: unknown options {unknown}; expected options of {sorted(sections)} "
                             f"or sections named after them")
        data = {k: v for k, v in shared.items() if k in names or k in components(cls)} | {str(k).replace("-", "_"): v for k, v in own.items()}
    data, unknown = normalise(cls, data)
    if unknown:
        raise ValueError(f"--config {path}: unknown options {sorted(unknown)}; expected some of {sorted(names)}")
    return {k: _check_value(path, k, v, option_type(cls, k)) for k, v in data.items()}


def _base_values(cls: type, presets: Mapping[str, Mapping[str, Any]], preset: str, config_file: str | None,
                 name: str, sections: Mapping[str, type] | None = None) -> dict[str, Any]:
    values = defaults(cls)
    given, unknown = normalise(cls, presets[preset])
    if unknown:
        raise ValueError(f"{name}: preset {preset!r} sets unknown options {sorted(unknown)}")
    values.update(given)
    from_file = load_config_file(config_file, cls, section=name.rsplit(" ", 1)[-1], sections=sections) if config_file else {}
    values.update(from_file)
    if "out_dir" in values and "out_dir" not in presets[preset] and "out_dir" not in from_file:
        values["out_dir"] = f"results/{name}/{preset}"
    return values


def build_parser(cls: type, description: str, presets: Mapping[str, Mapping[str, Any]], *, name: str,
                 preset: str = "default", config_file: str | None = None,
                 sections: Mapping[str, type] | None = None) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with ``--preset``, ``--config``, ``--threads`` and one option per field of
    ``cls``, whose shown defaults are those of ``preset`` (and ``config_file``; ``sections``: see
    :func:`load_config_file`)."""
    missing = [p for p in REQUIRED_PRESETS if p not in presets]
    if missing:
        raise ValueError(f"{name}: every entry point needs the presets {REQUIRED_PRESETS}; missing {missing}")
    base = _base_values(cls, presets, preset, config_file, name, sections)
    parser = argparse.ArgumentParser(prog=f"python -m {name}" if "." in name else None, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(presets), default="default",
                        help=f"named set of defaults (the values below are {preset!r}'s); options given explicitly override it")
    parser.add_argument("--config", metavar="FILE", help="JSON or YAML file of options, e.g. a run's config.json, applied "
                                                         "on top of the preset")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help=f"torch threads for this process (default: half the cores, {default_threads()})")
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="where independent jobs run: local worker processes, or Ray tasks on the cluster ray.init() "
                             "finds (RAY_ADDRESS) or a local one; the outputs are the same bytes (default: local)")
    groups = {name: parser.add_argument_group(f"--{name}.*: {f.metadata['help']}") for name, f in components(cls).items()}
    for path, names in options(cls).items():
        tp = option_type(cls, path)
        shown = base.get(path)
        if isinstance(shown, tuple):
            shown = ",".join(str(v) for v in shown)
        kwargs: dict[str, Any] = {"default": None, "dest": path, "help": option_help(cls, path) + f" (default: {shown})"}
        if tp is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"], kwargs["metavar"] = _converter(tp), path.rsplit(".", 1)[-1].upper()
            if typing.get_origin(tp) is typing.Literal:
                kwargs["choices"] = typing.get_args(tp)
        flags = ["--" + n.replace("_", "-") for n in names]  # --rl.goals-per-step, and its flat name --goals-per-step
        groups.get(path.split(".")[0], parser).add_argument(*flags, **kwargs)
    return parser


def _prog(name: str) -> str:
    """How the command is typed: ``python -m experiments.x``, or a console script's words."""
    return name if " " in name else f"python -m {name}"


def parse_config(cls: type[C], description: str, presets: Mapping[str, Mapping[str, Any]], argv: list[str] | None = None,
                 *, name: str, apply_threads: bool = True, sections: Mapping[str, type] | None = None) -> C:
    """Parse ``argv`` into a validated config (and set the thread count).

    ``name`` is the entry point's module (``experiments.full_pipeline``); its last part names the
    default output folder ``results/<name>/<preset>``. A bad option exits with the config's own message (which names the option), as ``argparse`` does for
    a malformed value. ``sections``: the sibling commands of a program whose one ``--config`` file
    serves them all (:func:`load_config_file`; ``name``'s last word names this command's section).
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default="default")
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    # experiments.x -> results/x/<preset>; benchmarks.x -> results/benchmarks/x/<preset>
    short = name.rsplit(".", 1)[-1] if not name.startswith("benchmarks.") else name.replace(".", "/")
    preset = known.preset if known.preset in presets else "default"
    try:
        parser = build_parser(cls, description, presets, name=short, preset=preset, config_file=known.config, sections=sections)
    except ValueError as exc:
        argparse.ArgumentParser(prog=_prog(name)).error(str(exc))
    parser.prog = _prog(name)
    args = parser.parse_args(argv)
    values = _base_values(cls, presets, args.preset, args.config, short, sections)
    for path in options(cls):
        v = getattr(args, path)
        if v is not None:
            values[path] = v
    try:
        cfg = build(cls, values)
        if apply_threads:
            set_threads(args.threads)
        set_executor(args.executor)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    return cfg
