"""Real human dialogues: Taskmaster-4 (coffee orders) and Taskmaster-3 (movie tickets).

Data (CC BY 4.0, Google; see the README for where to download it and the attribution):

* Taskmaster-4 ``data/data_*.json`` — dialogues with ``utterances`` (``speaker`` user/assistant,
  ``text``, ``annotations`` holding API calls). The user's goal is read from the
  ``add_order_item`` requests: the ordered items with quantity and attribute options.
* ``reward/reward_*.json`` of either corpus — ``context`` (turns with ``role`` agent/user and
  ``text`` or ``api``), the agent's next turn ``generation``, a human ``reward`` 1.0 / 0.0.

Loaders validate at the boundary: a missing folder or a record without the expected fields raises
``ValueError`` naming the file and record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ROLE_TOKENS = ("<agent>", "<user>", "<api>", "<goal>")
CUSTOMER_PERSONA = "You are a customer at a coffee shop, talking to the barista. You want to order: {goal}. Say what you want to order."
"""The persona wording chosen for a prompted pretrained user (SmolLM2-135M-Instruct) on the development split
(``python -m experiments.pretrained_users``: the highest goal disclosure of four wordings)."""


def default_data_dir() -> Path:
    """``../shared/data`` next to the repository when present (the development layout)."""
    return DEFAULT_DATA


def _json_files(folder: Path, pattern: str) -> list[Path]:
    files = sorted(folder.glob(pattern))
    if not files:
        raise ValueError(f"no files matching {pattern!r} in {folder}; download Taskmaster (see the README) "
                         "and pass --data-dir")
    return files


@dataclass(frozen=True)
class OrderItem:
    """One ordered drink: normalised item name, quantity and attribute options (lower case, kept
    sorted, so two drinks with the same options in another order are equal)."""

    item: str
    quantity: int = 1
    options: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(sorted(self.options)))


@dataclass(frozen=True)
class TM4Dialogue:
    """A Taskmaster-4 dialogue.

    Attributes:
        dialogue_id: the corpus id.
        goal: the order, from the ``add_order_item`` requests.
        turns: ``(role, text)`` with role ``"user"`` or ``"agent"``.
        api_calls: per turn, the API calls made after it as ``(name, request dict)``.
    """

    dialogue_id: str
    goal: tuple[OrderItem, ...]
    turns: tuple[tuple[str, str], ...]
    api_calls: tuple[tuple[tuple[str, dict], ...], ...] = field(default=())


def normalise_item(menu_item_id: str) -> str:
    """``"mocha-3844"`` -> ``"mocha"``; ``"Chai Latte"`` -> ``"chai latte"``."""
    return re.sub(r"-\d+$", "", menu_item_id.strip().lower()).replace("-", " ")


def order_item(request: dict) -> OrderItem:
    """An :class:`OrderItem` from an ``add_order_item`` request."""
    try:
        q = int(str(request.get("quantity", 1)).strip() or 1)
    except ValueError:
        q = 1
    opts = tuple(sorted(str(a.get("option", "")).strip().lower() for a in request.get("attributes", []) or []
                        if isinstance(a, dict) and a.get("option")))
    return OrderItem(normalise_item(str(request.get("menu_item_id", ""))), q, opts)


def _api_calls(annotations) -> list[tuple[str, dict]]:
    calls, name = [], None
    for a in annotations or []:
        if a.get("name") == "api_call":
            name = a.get("value")
        elif a.get("name") == "request" and name:
            try:
                req = json.loads(a.get("value") or "{}")
            except json.JSONDecodeError:
                req = {}
            calls.append((name, req if isinstance(req, dict) else {}))
            name = None
    return calls


def load_tm4(data_dir: str | Path | None = None, limit: int | None = None) -> list[TM4Dialogue]:
    """Taskmaster-4 dialogues that place at least one order."""
    folder = Path(data_dir or default_data_dir()) / "taskmaster4" / "data"
    out = []
    for path in _json_files(folder, "data_*.json"):
        for rec in json.loads(path.read_text()):
            if "utterances" not in rec:
                raise ValueError(f"{path}: record {rec.get('conversation_id', '?')} has no 'utterances'")
            turns, calls = [], []
            for u in rec["utterances"]:
                role = "user" if u.get("speaker") == "user" else "agent"
                turns.append((role, str(u.get("text", ""))))
                calls.append(tuple(_api_calls(u.get("annotations"))))
            goal = tuple(order_item(req) for cs in calls for name, req in cs if name == "add_order_item")
            if goal:
                out.append(TM4Dialogue(rec.get("conversation_id", ""), goal, tuple(turns), tuple(calls)))
            if limit and len(out) >= limit:
                return out
    return out


def order_success(goal: tuple[OrderItem, ...], ordered: list[OrderItem]) -> float:
    """The goal-success judge: 1 when the agent's ``add_order_item`` calls order exactly the goal's
    items (as a multiset of item, quantity and options), else 0."""
    return float(sorted(goal, key=repr) == sorted(ordered, key=repr))


def order_credit(goal: tuple[OrderItem, ...], ordered: list[OrderItem]) -> float:
    """Partial credit for an order, in [0, 1] and 1 exactly when :func:`order_success` is: each goal
    drink is paired with at most one ordered drink of the same item (the best pairs first), a pair
    scoring 1/2 for the item, 1/4 for the quantity and 1/4 times the options' Jaccard overlap
    (both empty: 1); the sum is divided by the larger of the two counts, so missing and extra drinks
    both cost."""
    if not goal and not ordered:
        return 1.0

    def score(g: OrderItem, o: OrderItem) -> float:
        union = set(g.options) | set(o.options)
        overlap = len(set(g.options) & set(o.options)) / len(union) if union else 1.0
        return 0.5 + 0.25 * (g.quantity == o.quantity) + 0.25 * overlap if g.item == o.item else 0.0

    pairs = sorted(((score(g, o), i, j) for i, g in enumerate(goal) for j, o in enumerate(ordered)), key=lambda p: (-p[0], p[1], p[2]))
    used_g, used_o, total = set(), set(), 0.0
    for value, i, j in pairs:
        if value > 0 and i not in used_g and j not in used_o:
            used_g.add(i)
            used_o.add(j)
            total += value
    return total / max(len(goal), len(ordered))


ORDER_CALL = re.compile(r"add_order_item\s*(?=\{)")
_DECODER = json.JSONDecoder()


def parse_orders(text: str) -> list[OrderItem]:
    """The ``add_order_item {json}`` calls written in an agent's text (nested JSON allowed;
    malformed calls are skipped)."""
    out = []
    for m in ORDER_CALL.finditer(text):
        try:
            req, _ = _DECODER.raw_decode(text, m.end())
        except json.JSONDecodeError:
            continue
        if isinstance(req, dict):
            out.append(order_item(req))
    return out


def goal_text(goal: tuple[OrderItem, ...]) -> str:
    """The goal as the user model sees it."""
    return "; ".join(f"{g.quantity} {g.item}" + (f" ({', '.join(g.options)})" if g.options else "") for g in goal)


def split_by_dialogue(items: list, fractions: tuple[float, float, float] = (0.6, 0.2, 0.2), *,
                      rng: np.random.Generator) -> tuple[list, list, list]:
    """Train / calibration / held-out split by dialogue."""
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 1e-9 or min(fractions) < 0:
        raise ValueError(f"fractions must be three non-negative numbers summing to 1; got {fractions}")
    perm = rng.permutation(len(items))
    a = int(round(fractions[0] * len(items)))
    b = a + int(round(fractions[1] * len(items)))
    return [items[i] for i in perm[:a]], [items[i] for i in perm[a:b]], [items[i] for i in perm[b:]]


@dataclass(frozen=True)
class RewardExample:
    """A human reward label: rendered context, the agent's next turn, and the label (1.0 / 0.0)."""

    dialogue_id: str
    context: str
    generation: str
    reward: float
    n_turns: int


def _render_turn(t: dict) -> str:
    role = t.get("role", "agent")
    if "api" in t:
        return f"<api>{json.dumps(t['api'], sort_keys=True)}"
    marker = {"agent": "<agent>", "user": "<user>"}.get(role, "<api>")
    return f"{marker}{t.get('text', '')}"


def load_reward_labels(corpus: str, data_dir: str | Path | None = None, limit: int | None = None) -> list[RewardExample]:
    """Human reward labels of ``"taskmaster4"`` or ``"taskmaster3"``."""
    if corpus not in ("taskmaster4", "taskmaster3"):
        raise ValueError(f"corpus must be 'taskmaster4' or 'taskmaster3'; got {corpus!r}")
    folder = Path(data_dir or default_data_dir()) / corpus / "reward"
    out = []
    for path in _json_files(folder, "reward_*.json"):
        for i, rec in enumerate(json.loads(path.read_text())):
            try:
                ctx = rec["context"]
                ctx = json.loads(ctx) if isinstance(ctx, str) else ctx
                gen = rec["generation"]
                gen = json.loads(gen) if isinstance(gen, str) and gen.startswith("{") else gen
                reward = float(rec["reward"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}: record {i} lacks context/generation/reward ({exc})") from exc
            out.append(RewardExample(rec.get("conversation_id", f"{path.stem}-{i}"), "".join(_render_turn(t) for t in ctx),
                                     _render_turn(gen) if isinstance(gen, dict) else f"<agent>{gen}", reward, len(ctx)))
            if limit and len(out) >= limit:
                return out
    return out
