"""Command lines built from frozen config dataclasses, with named presets.

Each field becomes ``--field-name``; its help text is the field's ``metadata["help"]``, and the
default shown is the preset's. Tuples are written comma-separated (``--horizons 4,8,16``).
Validation stays in the dataclass's ``__post_init__``: a bad option fails at start with the
dataclass's own message, which names the option.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Mapping, TypeVar

C = TypeVar("C")


def _parse_tuple(item_type: type):
    def parse(text: str) -> tuple:
        try:
            return tuple(item_type(v) for v in text.split(",") if v.strip())
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected comma-separated {item_type.__name__} values; got {text!r}") from exc

    return parse


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false; got {text!r}")


def _converter(tp: Any):
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        return _parse_tuple(args[0] if args else str)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return _converter(inner)
    if tp is bool:
        return _parse_bool
    if origin is typing.Literal:
        return str
    return tp


def build_parser(cls: type, description: str, presets: Mapping[str, Mapping[str, Any]],
                 default_preset: str) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with ``--preset`` and one option per field of ``cls``."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(presets), default=default_preset,
                        help="named set of defaults; options given explicitly override it")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        kwargs: dict[str, Any] = {"type": _converter(tp), "default": None,
                                  "help": f.metadata.get("help", "") + f" (default: {f.default!r})"}
        if typing.get_origin(tp) is typing.Literal:
            kwargs["choices"] = typing.get_args(tp)
        parser.add_argument("--" + f.name.replace("_", "-"), **kwargs)
    return parser


def config_from_args(cls: type[C], args: argparse.Namespace, presets: Mapping[str, Mapping[str, Any]]) -> C:
    """The config of the chosen preset, with explicitly given options applied on top."""
    values = dict(presets[args.preset])
    for f in dataclasses.fields(cls):
        v = getattr(args, f.name)
        if v is not None:
            values[f.name] = v
    return cls(**values)


def parse_config(cls: type[C], description: str, presets: Mapping[str, Mapping[str, Any]], default_preset: str,
                 argv: list[str] | None = None) -> C:
    """Parse ``argv`` into a validated config; a bad option exits with the config's own message
    (which names the option), as ``argparse`` does for a malformed value."""
    parser = build_parser(cls, description, presets, default_preset)
    args = parser.parse_args(argv)
    try:
        return config_from_args(cls, args, presets)
    except ValueError as exc:
        parser.error(str(exc))
