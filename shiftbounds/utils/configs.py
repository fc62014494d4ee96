"""Composed configs: an experiment's config built from the library's own config dataclasses.

A field declared with :func:`component` holds another frozen config dataclass (``rl: RLConfig``):

.. code-block:: python

    rl: RLConfig = component(RLConfig(), "policy-gradient RL, the same for every arm",
                             flat={"steps": "rl_steps", "lr": "rl_lr", "group": "group"})

The keys of ``flat`` are the component's options, in that order; the component's other fields stay
at the given default (what the library sets per call). An option has one name, ``rl.steps``: the
flag ``--rl.steps``, the preset or config-file key ``"rl.steps"``, or ``{"rl": {"steps": ...}}``
nested in a file. Its ``flat`` name (``rl_steps``) is what runs made before the component existed
call it: it is still read (a shipped ``config.json`` loads as before), and a run's ``config.json``
and ``results.json`` are written in that flat layout (:func:`flat_dict`), so those files keep
their bytes. The pure functions here are what :mod:`shiftbounds.utils.cli` and the resume guard use.

An option added after runs were made says so once, in its field: ``metadata={"earlier": v}`` (a
component: ``earlier={option: v}``), ``v`` being the value those runs were computed with (their
``config.json`` lacks it). The resume guard reads a saved folder with them (:func:`earlier_values`);
a study whose ``results.json`` must keep its bytes records its config without them (:func:`recorded`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

C = TypeVar("C")


def component(default: Any, help: str, *, flat: Mapping[str, str], earlier: Mapping[str, Any] | None = None,
              interleave: Mapping[str, str] | None = None) -> Any:
    """A field holding the config dataclass ``default``, whose options are ``flat``'s keys (each read
    also under its ``flat`` name); ``help`` titles its section of ``--help``; ``earlier``: the options
    added after runs were made, with the values those runs had; ``interleave``: option -> a plain field
    of the enclosing config that the flat layout writes right after that option (where the runs made
    before the component had it)."""
    if not dataclasses.is_dataclass(default) or isinstance(default, type):
        raise TypeError(f"component needs a config dataclass instance as its default; got {default!r}")
    unknown = sorted((set(flat) | set(earlier or {}) | set(interleave or {})) - {f.name for f in dataclasses.fields(default)})
    if unknown:
        raise TypeError(f"component {type(default).__name__}: no fields {unknown}")
    return dataclasses.field(default_factory=lambda: default, metadata={"help": help, "flat": dict(flat), "component": True,
                                                                        "earlier": dict(earlier or {}), "interleave": dict(interleave or {})})


def components(cls: type) -> dict[str, dataclasses.Field]:
    """The component fields of the config class ``cls``, by name."""
    return {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("component")}


def options(cls: type) -> dict[str, tuple[str, ...]]:
    """Every option of ``cls`` in order, as ``path -> (accepted spellings...)``: a plain field is its
    own name; a component option is ``"name.option"``, also spelt with its flat name."""
    out: dict[str, tuple[str, ...]] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("component"):
            for sub, flat in f.metadata["flat"].items():
                out[f"{f.name}.{sub}"] = (f"{f.name}.{sub}", flat)
        else:
            out[f.name] = (f.name,)
    return out


def spellings(cls: type) -> dict[str, str]:
    """Each accepted spelling of an option of ``cls`` -> its path (:func:`options`)."""
    return {s: path for path, names in options(cls).items() for s in names}


def option_type(cls: type, path: str) -> Any:
    """The type of the option ``path`` of ``cls``."""
    head, _, sub = path.partition(".")
    hints = typing.get_type_hints(cls)
    return typing.get_type_hints(hints[head])[sub] if sub else hints[head]


def option_help(cls: type, path: str) -> str:
    """The help text of the option ``path`` (a field's ``metadata["help"]``)."""
    head, _, sub = path.partition(".")
    f = {f.name: f for f in dataclasses.fields(cls)}[head]
    if sub:
        f = {g.name: g for g in dataclasses.fields(f.default_factory())}[sub]
    return f.metadata.get("help", "")


def defaults(cls: type) -> dict[str, Any]:
    """The default of every option of ``cls`` that has one, by path."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("component"):
            default = f.default_factory()
            out.update({f"{f.name}.{sub}": getattr(default, sub) for sub in f.metadata["flat"]})
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def normalise(cls: type, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` keyed by path, from keys in any spelling (``rl.steps``, ``rl_steps``, or a nested
    ``{"rl": {...}}``; dashes read as underscores), and the keys that name no option of ``cls``."""
    names, comps = spellings(cls), components(cls)
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in values.items():
        key = str(key).replace("-", "_")
        if key in comps and isinstance(value, Mapping):
            inner, bad = normalise(cls, {f"{key}.{k}": v for k, v in value.items()})
            out.update(inner)
            unknown += bad
        elif key in names:
            out[names[key]] = value
        else:
            unknown.append(key)
    return out, unknown


def build(cls: type[C], values: Mapping[str, Any]) -> C:
    """``cls`` from option values in any spelling (:func:`normalise`), each component starting from
    its default; an unknown option, or a component's own ``ValueError``, is a ``ValueError`` naming it."""
    by_path, unknown = normalise(cls, values)
    if unknown:
        raise ValueError(f"unknown options {sorted(unknown)}; expected some of {list(options(cls))}")
    kwargs: dict[str, Any] = {k: v for k, v in by_path.items() if "." not in k}
    for name, f in components(cls).items():
        mine = {k.split(".", 1)[1]: v for k, v in by_path.items() if k.startswith(name + ".")}
        try:
            kwargs[name] = dataclasses.replace(f.default_factory(), **mine)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"--{name}.*: {exc}") from None
    return cls(**kwargs)


def override(cfg: C, **values: Any) -> C:
    """``dataclasses.replace`` for a composed config: ``values`` in any spelling (``rl_steps=...``)."""
    return build(type(cfg), {**current(cfg), **values})


def current(cfg: Any) -> dict[str, Any]:
    """Every option of ``cfg`` by path."""
    return {path: _get(cfg, path) for path in options(type(cfg))}


def _get(cfg: Any, path: str) -> Any:
    head, _, sub = path.partition(".")
    value = getattr(cfg, head)
    return getattr(value, sub) if sub else value


def flat_dict(cfg: Any) -> dict[str, Any]:
    """``dataclasses.asdict(cfg)`` with each component written in its flat layout (its options under
    their flat names, where the component's field stands): the form of every run's ``config.json``."""
    out: dict[str, Any] = {}
    moved = {name for f in dataclasses.fields(cfg) for name in f.metadata.get("interleave", {}).values()}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in moved:
            continue
        if f.metadata.get("component"):
            for sub, flat in f.metadata["flat"].items():
                out[flat] = getattr(value, sub)
                if sub in f.metadata["interleave"]:
                    name = f.metadata["interleave"][sub]
                    out[name] = _copy(getattr(cfg, name))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[f.name] = flat_dict(value)
        else:
            out[f.name] = _copy(value)
    return out


def earlier_values(cls: type) -> dict[str, Any]:
    """The options of ``cls`` added after runs were made, by the name a ``config.json`` uses (a
    component option's flat name), with the value those runs were computed with."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("component"):
            out.update({f.metadata["flat"][sub]: v for sub, v in f.metadata["earlier"].items()})
        elif "earlier" in f.metadata:
            out[f.name] = f.metadata["earlier"]
    return out


def recorded(cfg: Any) -> dict[str, Any]:
    """``cfg`` as a ``results.json`` records it: :func:`flat_dict`, less each option added since at
    its earlier value, so that a folder made before the option retabulates to the same bytes."""
    earlier = earlier_values(type(cfg))
    return {k: v for k, v in flat_dict(cfg).items() if not (k in earlier and v == earlier[k])}


def _copy(value: Any) -> Any:
    """As ``asdict`` copies a value: containers rebuilt, dataclasses inside flattened."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return flat_dict(value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_copy(v) for v in value)
    if isinstance(value, dict):
        return type(value)((_copy(k), _copy(v)) for k, v in value.items())
    return value
