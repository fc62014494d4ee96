"""The conversational record format: validation at the boundary, round trips, converters."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shiftbounds.conversations import (
    Conversation,
    ConversationFormatError,
    Message,
    from_dataset,
    from_hidden_goal,
    from_taskmaster3,
    from_taskmaster4,
    irregularities,
    read_conversations,
    to_dataset,
    write_conversations,
)
from tests.marks import needs_data

GOOD = {"id": "a", "goal": {"order": ["latte"]}, "messages": [{"role": "user", "content": "a latte"},
                                                              {"role": "assistant", "content": "hot?"}]}


def _write(tmp_path, lines):
    path = tmp_path / "logs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_system_messages_extra_keys_and_every_input_kind(tmp_path):
    """GIVEN TRL-style records (a leading system message, an assistant turn carried by tool_calls
    with null content, a tool message with name and tool_call_id) WHEN read from JSONL, from a
    datasets.Dataset, from load_dataset("json") output and from dicts THEN all four give the same
    conversations, the system prompt is kept apart from the turns, and the extra keys round-trip."""
    from datasets import Dataset, load_dataset

    from shiftbounds.conversations.records import as_conversations

    call = [{"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]
    recs = [{"id": "t1", "goal": {"city": "Oslo"}, "messages": [
        {"role": "system", "content": "You book hotels."}, {"role": "user", "content": "Oslo, 2 nights"},
        {"role": "assistant", "content": None, "tool_calls": call},
        {"role": "tool", "content": "{\"ok\": true}", "name": "book", "tool_call_id": "c1"},
        {"role": "assistant", "content": "Booked."}]}]
    path = tmp_path / "logs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    convs = read_conversations(path)
    c = convs[0]
    assert c.system == "You book hotels." and [m.role for m in c.messages] == ["user", "assistant", "tool", "assistant"]
    assert c.messages[1].content == "" and dict(c.messages[1].extra)["tool_calls"] == call
    assert c.as_dict()["messages"][0] == {"role": "system", "content": "You book hotels."}
    assert c.as_dict()["messages"][3] == {"role": "tool", "content": "{\"ok\": true}", "name": "book", "tool_call_id": "c1"}
    assert as_conversations(recs) == as_conversations(str(path)) == convs == as_conversations(convs)
    assert as_conversations([c.as_dict() for c in convs]) == convs
    flat = [{"id": "a", "goal": "g", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]}]
    assert as_conversations(Dataset.from_list(flat)) == as_conversations(flat)
    (tmp_path / "flat.jsonl").write_text(json.dumps(flat[0]) + "\n")
    assert as_conversations(load_dataset("json", data_files=str(tmp_path / "flat.jsonl"))["train"]) == as_conversations(flat)
    with pytest.raises(ConversationFormatError, match="expected Conversations, a datasets.Dataset"):
        as_conversations(42)


def test_round_trip_jsonl_and_dataset(tmp_path):
    convs = [Conversation("a", {"x": 1}, (Message("user", "hi"), Message("assistant", "hello"))),
             Conversation("b", "plain goal", (Message("user", "yo"), Message("tool", "{}")))]
    path = write_conversations(tmp_path / "c.jsonl", convs)
    assert read_conversations(path) == convs
    assert from_dataset(to_dataset(convs)) == convs


@pytest.mark.parametrize("record, match", [
    ("{not json", r"logs.jsonl:2: not valid JSON"),
    (json.dumps([1, 2]), r"logs.jsonl:2: a record must be a JSON object"),
    (json.dumps({"id": "b", "messages": []}), r"logs.jsonl:2: missing field\(s\) \['goal'\]"),
    (json.dumps({**GOOD, "id": ""}), r"logs.jsonl:2: field 'id' must be a non-empty string"),
    (json.dumps({**GOOD, "id": "b", "messages": []}), r"logs.jsonl:2: field 'messages' must be a non-empty list"),
    (json.dumps({**GOOD, "id": "b", "messages": [{"role": "system", "content": "x"}]}),
     r"logs.jsonl:2: field 'messages' holds only a system message"),
    (json.dumps({**GOOD, "id": "b", "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}]}),
     r"logs.jsonl:2: field messages\[1\] is a system message; only the first message may be one"),
    (json.dumps({**GOOD, "id": "b", "messages": [{"role": "user", "content": "x", "mood": "happy"}]}),
     r"logs.jsonl:2: field messages\[0\] has unknown key\(s\) \['mood'\]"),
    (json.dumps({**GOOD, "id": "b", "messages": [{"role": "narrator", "content": "x"}]}),
     r"logs.jsonl:2: field messages\[0\]\.role is 'narrator'; expected one of"),
    (json.dumps({**GOOD, "id": "b", "messages": [{"role": "user", "content": 3}]}), r"messages\[0\]\.content must be a string"),
    (json.dumps({**GOOD, "id": "b", "messages": [{"role": "user"}]}), r"messages\[0\] must be \{'role', 'content'\}"),
    (json.dumps(GOOD), r"id 'a' appears twice \(records 1 and 2\)"),
])
def test_bad_records_name_file_line_and_field(tmp_path, record, match):
    path = _write(tmp_path, [json.dumps(GOOD), record])
    with pytest.raises(ConversationFormatError, match=match):
        read_conversations(path)


def test_a_byte_order_mark_is_accepted_and_bad_bytes_name_their_line(tmp_path):
    """Regression: a UTF-8 BOM was rejected, and non-UTF-8 bytes raised a raw UnicodeDecodeError."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\r\n")
    assert read_conversations(path)[0].id == "a"
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(json.dumps(GOOD).encode() + b"\n" + json.dumps({**GOOD, "id": "b"}).encode()[:-2] + b' caf\xe9"}\n')
    with pytest.raises(ConversationFormatError, match=r"latin1.jsonl:2: not UTF-8 \(byte b'\\xe9' at column"):
        read_conversations(bad)


def test_irregular_conversations_are_kept_and_counted_in_one_warning(tmp_path):
    """Two user turns in a row, empty text, no user turn and a null goal parse, and one warning counts them."""
    recs = [GOOD,
            {**GOOD, "id": "twice", "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "latte"}]},
            {**GOOD, "id": "empty", "messages": [{"role": "user", "content": " "}, {"role": "assistant", "content": "?"}]},
            {**GOOD, "id": "agent-only", "messages": [{"role": "assistant", "content": "hello"}]},
            {**GOOD, "id": "no-goal", "goal": None}]
    path = _write(tmp_path, [json.dumps(r) for r in recs])
    with pytest.warns(UserWarning, match=r"5 conversations read; irregular ones by kind: consecutive_same_role: 1 \('twice'\); "
                                         r"empty_content: 1 \('empty'\); no_user_turn: 1 \('agent-only'\); no_agent_turn: 1 \('twice'\); null_goal: 1"):
        convs = read_conversations(path)
    assert [c.id for c in convs] == ["a", "twice", "empty", "agent-only", "no-goal"]
    assert irregularities(convs)["no_agent_turn"] == ["twice"]


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ConversationFormatError, match="no such file"):
        read_conversations(tmp_path / "nope.jsonl")
    with pytest.raises(ConversationFormatError, match="no records"):
        read_conversations(_write(tmp_path, [""]))


@needs_data
def test_converters():
    from shiftbounds.conversations.taskmaster import load_reward_labels, load_tm4
    from shiftbounds.dialogue.prepare import make_task, prepare_task, sample_logs

    tm4 = from_taskmaster4(load_tm4(limit=5))
    assert len(tm4) == 5 and all(c.goal["order"] and c.turns("user") and c.turns("assistant") for c in tm4)
    assert any(c.turns("tool") for c in tm4)  # the API calls
    tm3 = from_taskmaster3(load_reward_labels("taskmaster3", limit=5))
    assert tm3 and all(c.goal is None and c.turns("user") for c in tm3)
    prep = prepare_task(make_task("guess_number", 3))
    logs = sample_logs(prep, 4, rng=np.random.default_rng(0))
    syn = from_hidden_goal(prep.task, logs)
    assert [len(c.messages) for c in syn] == [2 * len(d.actions) for d in logs]
    assert syn[0].goal == prep.task.goals[logs[0].goal] and syn[0].messages[0].content.startswith(("ask:", "propose:"))
    # every converted conversation passes the boundary's validation
    with pytest.warns(UserWarning, match="null_goal: 5"):  # Taskmaster-3 ships no goal: counted, not refused
        assert from_dataset(to_dataset(tm4 + tm3 + syn)) == tm4 + tm3 + syn
