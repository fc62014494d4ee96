r"""The conversational record format, one dialogue per JSONL line (or ``datasets.Dataset`` row).

A record::

    {"id": "tm4-0001", "goal": {"order": [{"item": "latte", "quantity": 1}]},
     "messages": [{"role": "user", "content": "Hi, a latte please"},
                  {"role": "assistant", "content": "Hot or iced?"},
                  {"role": "tool", "content": "{\"add_order_item\": {...}}"}]}

``id`` is a non-empty string, unique in a file; ``goal`` is any JSON value (the user's hidden goal:
what a user simulator is told and what the task's judge scores against); ``messages`` is a
non-empty list of ``{"role", "content"}`` with ``role`` in :data:`ROLES` and ``content`` a string.
As in TRL's conversational datasets, a first message with role ``"system"`` is the logged system
prompt (kept as :attr:`Conversation.system`; a system message anywhere else is an error), and the
standard extra keys :data:`EXTRA_KEYS` (``name``, ``tool_calls``, ``tool_call_id``) are kept with
their message (``content`` may then be ``null`` when ``tool_calls`` carries the turn).
:func:`read_conversations` checks every record before returning any, and a bad one raises
:class:`ConversationFormatError` naming the file, the line and the field. Records that parse but
that training or a judge may trip on (two user messages in a row, empty text, no user or no agent
turn, a ``null`` goal) are kept and counted in one ``UserWarning`` (:func:`irregularities`).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Dataset

from shiftbounds.conversations.taskmaster import goal_text
from shiftbounds.dialogue.tasks import user_acts
from shiftbounds.utils.io import atomic_write_text, jsonl_records

ROLES = ("user", "assistant", "tool")
"""Message roles of a logged conversation's turns (a leading ``system`` message is its system prompt)."""
ConversationData = Any
"""What every function taking logs accepts: Conversations, a ``datasets.Dataset``, record dicts or
a JSONL path (:func:`as_conversations`)."""
EXTRA_KEYS = ("name", "tool_calls", "tool_call_id")
"""The standard extra message keys of chat datasets, kept as logged."""


class ConversationFormatError(ValueError):
    """A record that does not follow the format; the message names the file, line and field."""


@dataclass(frozen=True)
class Message:
    """One turn: ``role`` in :data:`ROLES`, ``content`` its text."""

    role: str
    content: str
    extra: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict:
        return {"role": self.role, "content": self.content, **dict(self.extra)}


@dataclass(frozen=True)
class Conversation:
    """A logged dialogue: its ``id``, the user's ``goal`` (any JSON value), its ``messages`` and the
    logged ``system`` prompt, if any."""

    id: str
    goal: Any
    messages: tuple[Message, ...]
    system: str | None = None

    def as_dict(self) -> dict:
        head = [{"role": "system", "content": self.system}] if self.system is not None else []
        return {"id": self.id, "goal": self.goal, "messages": head + [m.as_dict() for m in self.messages]}

    def turns(self, role: str) -> list[int]:
        """Indices of the messages with ``role``."""
        return [i for i, m in enumerate(self.messages) if m.role == role]


def parse_record(rec: Any, where: str) -> Conversation:
    """A :class:`Conversation` from one decoded record; ``where`` (``file:line``) prefixes every error."""
    if not isinstance(rec, dict):
        raise ConversationFormatError(f"{where}: a record must be a JSON object; got {type(rec).__name__}")
    missing = [k for k in ("id", "goal", "messages") if k not in rec]
    if missing:
        raise ConversationFormatError(f"{where}: missing field(s) {missing}; a record needs 'id', 'goal' and 'messages'")
    if not isinstance(rec["id"], str) or not rec["id"]:
        raise ConversationFormatError(f"{where}: field 'id' must be a non-empty string; got {rec['id']!r}")
    msgs = rec["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise ConversationFormatError(f"{where}: field 'messages' must be a non-empty list; got {msgs!r}")
    out, system = [], None
    for j, m in enumerate(msgs):
        field = f"messages[{j}]"
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ConversationFormatError(f"{where}: field {field} must be {{'role', 'content'}}; got {m!r}")
        unknown = sorted(set(m) - {"role", "content", *EXTRA_KEYS})
        if unknown:
            raise ConversationFormatError(f"{where}: field {field} has unknown key(s) {unknown}; allowed: role, content, {', '.join(EXTRA_KEYS)}")
        if m["role"] == "system":
            if j != 0:
                raise ConversationFormatError(f"{where}: field {field} is a system message; only the first message may be one")
            if not isinstance(m["content"], str):
                raise ConversationFormatError(f"{where}: field {field}.content must be a string; got {type(m['content']).__name__}")
            system = m["content"]
            continue
        if m["role"] not in ROLES:
            raise ConversationFormatError(f"{where}: field {field}.role is {m['role']!r}; expected one of {ROLES} (or a leading 'system')")
        content = m["content"]
        if content is None and m.get("tool_calls"):
            content = ""
        if not isinstance(content, str):
            raise ConversationFormatError(f"{where}: field {field}.content must be a string; got {type(content).__name__}")
        out.append(Message(m["role"], content, tuple((k, m[k]) for k in EXTRA_KEYS if k in m)))
    if not out:
        raise ConversationFormatError(f"{where}: field 'messages' holds only a system message")
    try:
        json.dumps(rec["goal"])
    except (TypeError, ValueError) as exc:
        raise ConversationFormatError(f"{where}: field 'goal' is not JSON-serialisable ({exc})") from exc
    return Conversation(rec["id"], rec["goal"], tuple(out), system)


def irregularities(convs: list[Conversation]) -> dict[str, list[str]]:
    """The ids of conversations that parse but that training or a judge may trip on, by kind.

    * ``consecutive_same_role`` — two user (or two assistant) messages in a row: kept as logged
      (people do send two messages), but a simulator is trained to reply once per agent turn;
    * ``empty_content`` — a message with empty or blank text;
    * ``no_user_turn`` / ``no_agent_turn`` — nothing for a user simulator (or an agent) to learn from;
    * ``null_goal`` — ``goal`` is ``null``: fine for realism measures, but a task judge or a
      simulator persona that needs the goal raises on it.
    """
    out: dict[str, list[str]] = {k: [] for k in ("consecutive_same_role", "empty_content", "no_user_turn", "no_agent_turn",
                                                "null_goal")}
    for c in convs:
        roles = [m.role for m in c.messages if m.role != "tool"]
        if any(a == b for a, b in zip(roles, roles[1:])):
            out["consecutive_same_role"].append(c.id)
        if any(not m.content.strip() for m in c.messages):
            out["empty_content"].append(c.id)
        if "user" not in roles:
            out["no_user_turn"].append(c.id)
        if "assistant" not in roles and not any(m.role == "tool" for m in c.messages):
            out["no_agent_turn"].append(c.id)
        if c.goal is None:
            out["null_goal"].append(c.id)
    return out


def _warn_irregular(convs: list[Conversation], source: str) -> None:
    """One ``UserWarning`` counting :func:`irregularities` (with up to three ids of each kind)."""
    found = {k: ids for k, ids in irregularities(convs).items() if ids}
    if found:
        parts = "; ".join(f"{k}: {len(ids)} ({', '.join(map(repr, ids[:3]))}{', ...' if len(ids) > 3 else ''})"
                          for k, ids in found.items())
        warnings.warn(f"{source}: {len(convs)} conversations read; irregular ones by kind: {parts}", UserWarning, stacklevel=3)


def _check_unique(convs: list[Conversation], source: str) -> None:
    seen: dict[str, int] = {}
    for i, c in enumerate(convs):
        if c.id in seen:
            raise ConversationFormatError(f"{source}: id {c.id!r} appears twice (records {seen[c.id] + 1} and {i + 1})")
        seen[c.id] = i


def read_conversations(path: str | Path) -> list[Conversation]:
    """Every conversation of a JSONL file, or an error naming file, line and field (nothing half-loaded)."""
    path = Path(path)
    if not path.is_file():
        raise ConversationFormatError(f"{path}: no such file")
    out = [parse_record(rec, where) for where, rec in jsonl_records(path, ConversationFormatError)]
    if not out:
        raise ConversationFormatError(f"{path}: no records")
    _check_unique(out, str(path))
    _warn_irregular(out, str(path))
    return out


def write_conversations(path: str | Path, convs: Iterable[Conversation]) -> Path:
    """Write conversations as JSONL, atomically."""
    lines = [json.dumps(c.as_dict(), ensure_ascii=False) for c in convs]
    return atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def to_dataset(convs: Iterable[Conversation]):
    """A ``datasets.Dataset`` with columns ``id``, ``goal`` (JSON text: goals of any shape fit one
    column) and ``messages``."""
    rows = [c.as_dict() for c in convs]
    return Dataset.from_list([{**r, "goal": json.dumps(r["goal"])} for r in rows])


def from_dataset(ds, name: str = "dataset") -> list[Conversation]:
    """Conversations from a ``datasets.Dataset`` (``goal`` as JSON text or a value), validated as a file is."""
    out = []
    for i, row in enumerate(ds):
        rec = dict(row)
        if isinstance(rec.get("goal"), str):
            try:
                rec["goal"] = json.loads(rec["goal"])
            except json.JSONDecodeError:
                pass  # a plain string goal
        out.append(parse_record(rec, f"{name}[{i}]"))
    _check_unique(out, name)
    _warn_irregular(out, name)
    return out


def as_conversations(data: Any, name: str = "conversations") -> list[Conversation]:
    """Conversations from what a user has: a list of :class:`Conversation`, a ``datasets.Dataset``
    (e.g. ``load_dataset("json", data_files=...)["train"]``), a list of record dicts, or a JSONL
    path; records are validated as a file's are.

    Raises:
        ConversationFormatError: a bad record (naming its index and field), or ``data`` of none of these kinds.
    """
    if isinstance(data, (str, Path)):
        return read_conversations(data)
    if hasattr(data, "column_names") and hasattr(data, "__getitem__"):
        return from_dataset(data, name)
    if isinstance(data, (list, tuple)) and all(isinstance(c, Conversation) for c in data):
        return list(data)
    if isinstance(data, (list, tuple)) and all(isinstance(c, dict) for c in data):
        out = [parse_record(rec, f"{name}[{i}]") for i, rec in enumerate(data)]
        _check_unique(out, name)
        return out
    raise ConversationFormatError(f"{name}: expected Conversations, a datasets.Dataset, record dicts or a JSONL path; "
                                  f"got {type(data).__name__}")


def tool_call_text(content: str) -> str:
    """A logged tool message as the agent writes the call: ``{"name": {...}}`` becomes
    ``name {...}`` (other content is kept as it is)."""
    try:
        call = json.loads(content)
    except json.JSONDecodeError:
        return content
    if isinstance(call, dict) and len(call) == 1:
        (name, req), = call.items()
        return f"{name} {json.dumps(req, sort_keys=True)}"
    return content


def fold_tool_calls(conv: Conversation) -> Conversation:
    """The conversation as an agent that writes its own calls sees it: every run of tool messages
    joins the agent message that follows it, one call per line before the agent's text (a run with
    no agent message after it becomes an agent message of its own)."""
    out: list[Message] = []
    pending: list[str] = []
    for m in conv.messages:
        if m.role == "tool":
            pending.append(tool_call_text(m.content))
        elif m.role == "assistant":
            out.append(Message("assistant", "\n".join(pending + [m.content])))
            pending = []
        else:
            if pending:
                out.append(Message("assistant", "\n".join(pending)))
                pending = []
            out.append(m)
    if pending:
        out.append(Message("assistant", "\n".join(pending)))
    return Conversation(conv.id, conv.goal, tuple(out), conv.system)


# ------------------------------------------------------------------------------------- converters
def from_taskmaster4(dialogues) -> list[Conversation]:
    """Taskmaster-4 dialogues (:func:`shiftbounds.conversations.taskmaster.load_tm4`) as conversations: the
    goal is the order (``{"order": [{"item", "quantity", "options"}], "text": "1 latte (iced)"}``:
    the structure the judge reads and the description a simulator's persona shows), agent turns
    become ``assistant`` messages and each API call a ``tool`` message after its turn."""
    out = []
    for d in dialogues:
        msgs = []
        calls = d.api_calls or ((),) * len(d.turns)
        for (role, text), cs in zip(d.turns, calls):
            msgs.append(Message("user" if role == "user" else "assistant", text))
            msgs += [Message("tool", json.dumps({name: req}, sort_keys=True)) for name, req in cs]
        goal = [{"item": g.item, "quantity": g.quantity, "options": list(g.options)} for g in d.goal]
        out.append(Conversation(d.dialogue_id, {"order": goal, "text": goal_text(d.goal)}, tuple(msgs)))
    return out


def from_taskmaster3(examples) -> list[Conversation]:
    """Taskmaster-3 reward contexts (:func:`shiftbounds.conversations.taskmaster.load_reward_labels` with
    ``"taskmaster3"``) as conversations. Taskmaster-3 ships no structured goal, so the goal is
    ``null``; the messages are the context's turns (``<agent>``, ``<user>``, ``<api>``)."""
    roles = {"<agent>": "assistant", "<user>": "user", "<api>": "tool"}
    out = []
    for i, ex in enumerate(examples):
        parts = [p for p in re.split(r"(?=<agent>|<user>|<api>)", ex.context) if p]
        msgs = tuple(Message(roles[p[: p.index(">") + 1]], p[p.index(">") + 1:]) for p in parts)
        if msgs:
            out.append(Conversation(f"{ex.dialogue_id}-{i}", None, msgs))
    return out


def from_hidden_goal(task, dialogues) -> list[Conversation]:
    """Logged dialogues of a synthetic hidden-goal task (:mod:`shiftbounds.dialogue.logs`) rendered as
    text: the goal is the goal's name, the agent's acts ``assistant`` messages (``"ask:>=2"``,
    ``"propose:3"``) and the user's acts ``user`` messages (``"yes"``, ``"quit"`` ...)."""
    names_a, names_u = task.agent_acts, user_acts(task)
    out = []
    for i, d in enumerate(dialogues):
        msgs = []
        for a, k in zip(d.actions, d.acts):
            msgs += [Message("assistant", names_a[a]), Message("user", names_u[k])]
        out.append(Conversation(f"{task.name}-{i:06d}", task.goals[d.goal], tuple(msgs)))
    return out
