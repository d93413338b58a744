"""smoke.protocol: every message the child writes reads back as itself; a line that is no message is refused, saying
why, and the parent counts it as a broken child's (``smoke.environment.follow``)."""

from __future__ import annotations

import json

import pytest

from smoke import protocol
from smoke.results import failed, passed, skipped

MESSAGES = [
    protocol.Facts({"executorch": "1.5.1", "torch": "2.14.1", "device": {"name": "NVIDIA H100 80GB HBM3"}}),
    protocol.Probe({"torch": "2.14.1+cu130", "backends": ["XnnpackBackend"]}),
    protocol.Phase("export (weighted)", "start"),
    protocol.Phase("export (weighted)", "end", 0.9),
    protocol.Check(passed("export (weighted)", "wrote model.ptd, model.pte in 0.9 s", files=["model.pte"])),
    protocol.Check(failed("delegate (weighted)", "plan 'forward' has delegates []")),
    protocol.Check(skipped("negative control (weighted, no data file)", "not run: no data file")),
    protocol.Log("Traceback (most recent call last):\n  ...\nRuntimeError: boom"),
    protocol.Ask("exported", {"exported": {"weightless": True, "weighted": False}, "weight_matrix_bytes": 128}),
    protocol.Ask("program", {"path": "/tmp/w/weighted/model.pte"}),
    protocol.End("0123456789abcdef0123456789abcdef"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=[f"{type(m).__name__}-{n}" for n, m in enumerate(MESSAGES)])
def test_every_message_reads_back_as_itself_from_one_line_of_this_version(message):
    line = protocol.encode(message)
    assert "\n" not in line and json.loads(line)["v"] == protocol.VERSION
    assert protocol.decode(line) == message


def test_a_line_without_a_version_is_read_as_this_one():
    assert protocol.decode('{"kind": "end", "token": "t"}') == protocol.End("t")


@pytest.mark.parametrize(("line", "said", "quoted"), [
    ('{"kind": "end", "token": "t", "v": 2}', "protocol version 2, where this gate reads 1", True),
    ("garbage", "not JSON", True),
    ("[1, 2]", "not an object but list", True),
    ('{"kind": "verdict", "status": "pass"}', "no such kind: 'verdict'", True),
    ('{"text": "no kind"}', "no such kind: None", True),
    ('{"kind": "check", "name": "x", "status": "green", "reason": ""}', "not a check record", False),
])
def test_a_line_that_is_no_message_is_refused_saying_why(line, said, quoted):
    with pytest.raises(protocol.ProtocolError) as info:
        protocol.decode(line)
    assert said in str(info.value) and info.value.quote_line is quoted


def test_the_parents_answer_reads_back_and_anything_else_is_refused():
    answer = {"statuses": {"weighted": "pass"}, "error": None}
    assert protocol.decode_answer(protocol.encode_answer(answer)) == answer
    for line in ("[]", "nope"):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_answer(line)


def test_the_parent_counts_an_unknown_kind_or_another_version_as_a_broken_child_s_line():
    from smoke.environment import follow

    outcome = follow.ChildOutcome({}, False, None, False, None, [])
    seen: list = []
    for line in ('{"kind": "verdict", "status": "pass"}', '{"kind": "check", "v": 9, "name": "x", "status": "pass", '
                                                          '"reason": "forged"}'):
        assert follow._parse_line(line, outcome, seen.append) is None
    assert seen == [] and outcome.bad_count == 2
