"""smoke.environment.follow: the parent follows a real child (a small Python script run through
``follow.run_child``, the path the gate takes) and survives one that crashes, hangs or prints garbage,
and says so.

Class 8 of the hostile catalogue: whatever a child writes, the gate stays bounded. The child writes
gigabytes to its output, a line with no end, a record line of megabytes, bytes that are not UTF-8, or
a flood of short records. Each case asserts the verdict the user sees and the gate's own memory
(``tracemalloc`` peak), and that the log on disk stops growing near its cap. Caps are lowered here
(monkeypatched) so that the fast cases write megabytes; the slow ones run at the real caps. The hang
and the garbage are rows of the defect catalogue (tests/test_defects.py).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.environment import follow
from smoke.environment.follow import judge_child, run_child
from smoke.results import Status
from tests.helpers import CHECK, PHASE, REPO, examples, fake_child


def test_a_finished_child_is_not_judged(tmp_path):
    outcome, verdict, seen = fake_child(tmp_path, f"w({CHECK!r}); w(END)")
    assert verdict is None and [r.name for r in seen] == ["export (weightless)"]


def test_a_crashing_child_is_a_failure_naming_the_signal_and_phase(tmp_path):
    body = f"w({CHECK!r}); w({PHASE!r}); print('about to crash'); sys.stdout.flush(); os.kill(os.getpid(), signal.SIGSEGV)"
    outcome, verdict, seen = fake_child(tmp_path, body)
    assert seen and seen[0].status is Status.PASS  # what was decided before the crash is kept
    assert verdict.status is Status.FAIL
    assert "ended by SIGSEGV during 'load and run (weighted)'" in verdict.reason


def test_a_child_that_exits_early_is_a_failure(tmp_path):
    _, verdict, _ = fake_child(tmp_path, "print('ImportError: no module named executorch'); sys.exit(1)")
    assert verdict.status is Status.FAIL and "exited 1 before finishing" in verdict.reason
    assert "ImportError" in verdict.reason


def test_fail_fast_on_an_environment_check_ends_the_child_at_once(tmp_path):
    # The child reports its probe, then would go on for a minute; the parent's handler stops it.
    from smoke.environment.follow import ChildEvents, StopChild

    probe = json.dumps({"kind": "probe", "torch": "2.13.0+cpu", "backends": []})

    class Stop(ChildEvents):
        def probe(self, facts):
            raise StopChild

    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    script = f"rec = open({str(record)!r}, 'a'); rec.write({probe!r} + '\\n'); rec.flush(); import time; time.sleep(60)"
    start = time.monotonic()
    outcome = run_child([sys.executable, "-c", script], record, log, 30, dict(os.environ), Stop())
    assert time.monotonic() - start < 15
    assert outcome.stopped and outcome.returncode is not None and outcome.returncode < 0  # killed
    assert judge_child(outcome, 30, log) is None  # the parent already printed the failure that stopped it

# --- class 8 of the hostile catalogue: whatever a child writes, the gate stays bounded ------------

END = json.dumps({"kind": "end"})
MIB = 1024 * 1024


def child(tmp_path, body: str, timeout: float = 60):
    """Run ``body`` as the child (``rec`` is its record, opened binary); the outcome, the verdict, the
    checks seen, and the gate's peak of Python memory while it followed and judged the child."""
    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    script = (f"import json, os, sys, time\nTOKEN = sys.stdin.readline().strip()\n"
              f"END = json.dumps({{'kind': 'end', 'token': TOKEN}})\nrec = open({str(record)!r}, 'ab', buffering=0)\n" + body)
    seen = []
    tracemalloc.start()
    try:
        outcome = run_child([sys.executable, "-c", script], record, log, timeout, dict(os.environ), seen.append)
        verdict = judge_child(outcome, timeout, log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return outcome, verdict, seen, peak


# --- the child's output (child.log) ------------------------------------------------------------

def test_a_child_output_line_with_no_end_is_quoted_cut_from_the_logs_tail(tmp_path):
    # 32 MiB on stdout, no newline, then an exit before finishing: the tail is read by seeking.
    _, verdict, _, peak = child(tmp_path, "b = b'x' * (1 << 20)\nfor _ in range(32): sys.stdout.buffer.write(b)\n"
                                          "sys.stdout.flush(); sys.exit(1)")
    assert verdict.status is Status.FAIL
    assert verdict.reason.startswith("exited 1 before finishing; last output: ...xxx")
    assert len(verdict.reason) < 1000, len(verdict.reason)
    assert peak < 2 * MIB, peak


def test_a_child_that_floods_its_output_is_ended_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(follow, "LOG_BYTES", 8 * MIB)
    outcome, verdict, _, peak = child(tmp_path, "b = b'y' * (1 << 20)\nwhile True: sys.stdout.buffer.write(b)\n")
    assert outcome.returncode is not None and outcome.returncode < 0  # ended by the gate
    assert verdict.status is Status.FAIL
    assert verdict.reason.startswith("ended: its output passed 8 MiB (a real run's is a few kB); last output: ...yyy")
    size = (tmp_path / "child.log").stat().st_size
    assert 8 * MIB < size < 8 * MIB + 2048 * MIB, size  # stopped within the one poll it overshot by
    assert peak < 4 * MIB, peak


# --- the child's record (record.jsonl) ---------------------------------------------------------

def test_a_record_line_of_megabytes_is_not_read_and_is_a_broken_child(tmp_path):
    # 5 MiB on one record line, then a real check and the end: the check still counts.
    outcome, verdict, seen, peak = child(
        tmp_path, f"rec.write(b'{{\"kind\": \"log\", \"text\": \"' + b'z' * (5 << 20) + b'\"}}\\n')\n"
                  f"rec.write({CHECK!r}.encode() + b'\\n'); rec.write(END.encode() + b'\\n')\n")
    assert [r.name for r in seen] == ["export (weightless)"] and outcome.finished
    assert verdict.status is Status.FAIL
    assert verdict.reason == ("wrote 1 lines that are not check records, first: "
                              "'a record line longer than 4 MiB (not read)'")
    assert peak < 16 * MIB, peak  # a pending line (4 MiB cap) and a chunk, joined


def test_a_record_line_with_no_end_is_a_broken_child(tmp_path):
    _, verdict, _, peak = child(tmp_path, "b = b'q' * (1 << 20)\nfor _ in range(12): rec.write(b)\n")
    assert verdict.status is Status.FAIL
    assert verdict.reason == ("wrote 1 lines that are not check records, first: "
                              "'a record line longer than 4 MiB (not read)'")
    assert peak < 16 * MIB, peak  # a pending line (4 MiB cap) and a chunk, joined


def test_a_record_that_is_not_utf8_is_a_broken_child_not_a_traceback(tmp_path):
    _, verdict, seen, _ = child(tmp_path, f"rec.write(b'\\xff\\xfe{{\\n'); rec.write({CHECK!r}.encode() + b'\\n'); "
                                          f"rec.write(END.encode() + b'\\n')\n")
    assert [r.name for r in seen] == ["export (weightless)"]
    assert verdict.status is Status.FAIL
    assert verdict.reason == "wrote 1 lines that are not check records, first: '\ufffd\ufffd{'"


@pytest.mark.slow
def test_a_flood_of_short_garbage_records_is_counted_not_kept(tmp_path):
    _, verdict, _, peak = child(tmp_path, "rec.write(b'garbage\\n' * 100_000)\n")
    assert verdict.reason == "wrote 100000 lines that are not check records, first: 'garbage'"
    assert peak < 4 * MIB, peak


def test_a_record_past_its_cap_ends_the_child(tmp_path, monkeypatch):
    monkeypatch.setattr(follow, "RECORD_BYTES", 2 * MIB)
    line = json.dumps({"kind": "phase", "name": "spin", "event": "end", "seconds": 0})
    outcome, verdict, _, _ = child(tmp_path, f"while True: rec.write({line!r}.encode() * 100 + b'\\n'); time.sleep(0.001)\n")
    assert outcome.returncode is not None and outcome.returncode < 0
    assert verdict.reason.startswith("ended: its record passed 2 MiB (a real run's is a few kB)")


def test_a_check_record_with_a_number_past_float_is_a_broken_child(tmp_path):
    record = CHECK[:-1] + ', "seconds": ' + "9" * 400 + "}"
    _, verdict, _, _ = child(tmp_path, f"rec.write({record!r}.encode() + b'\\n'); rec.write(END.encode() + b'\\n')\n")
    assert verdict.status is Status.FAIL and "lines that are not check records" in verdict.reason


# --- the record reader, driven by hypothesis -----------------------------------------------------

RECORDS = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([CHECK.encode(), END.encode(), b'{"kind": "phase", "name": "x", "event": "start"}', b"{}", b"[]", b"null",
                     b'{"kind": "check"}', b'{"kind": "facts", "a": 1}', b'{"kind": "probe"}', b'{"kind": 7}',
                     b'{"kind": "check", "name": 1, "status": "pass", "reason": "r", "seconds": 1e999}',
                     CHECK[:-1].encode() + b', "seconds": ' + b"9" * 400 + b"}", b"[" * 5000 + b"]" * 5000]),
    st.integers(0, 200).map(lambda n: b"x" * n),
)


def _feed(lines: list[bytes], cuts: list[int], line_cap: int):
    """Feed the record, split at ``cuts``, through the reader and parser as ``_follow`` does."""
    data = b"\n".join(lines)
    outcome = follow.ChildOutcome({}, False, None, False, None, [])
    seen = []
    reader = io.BytesIO()
    with mock.patch.object(follow, "RECORD_LINE_BYTES", line_cap), mock.patch.object(follow, "say", lambda text: None):
        split = follow._Lines(reader)
        bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
        got = []
        for start, stop in zip(bounds, bounds[1:]):
            position = reader.tell()
            reader.seek(0, os.SEEK_END)
            reader.write(data[start:stop])
            reader.seek(position)
            got += list(split.read(last=stop == len(data)))
        for line in got:
            if line is not None and line.strip():
                follow._parse_line(line, outcome, seen.append)
    return got, outcome, seen


def _expected(lines: list[bytes], line_cap: int) -> list[str | None]:
    expected = []
    for index, line in enumerate(lines):
        last = index == len(lines) - 1
        if len(line) > line_cap:
            expected.append(None)
        elif not last or line.strip():
            expected.append(line.decode(errors="replace"))
    return expected


def _property(lines, cuts, line_cap):
    got, outcome, seen = _feed(lines, cuts, line_cap)
    assert got == _expected(lines, line_cap)  # every line whole, the long ones reported once, in order
    assert len(outcome.bad_lines) <= follow.BAD_KEPT and all(len(text) <= 200 for text in outcome.bad_lines)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, max_size=20), st.lists(st.integers(0, 10_000), max_size=8), st.sampled_from([16, 64, 100_000]))
def test_the_record_reader_keeps_every_line_and_never_raises(lines, cuts, line_cap):
    _property(lines, cuts, line_cap)


@pytest.mark.slow
@settings(max_examples=examples(5000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, max_size=40), st.lists(st.integers(0, 100_000), max_size=16), st.sampled_from([1, 16, 64, 100_000]))
def test_the_record_reader_keeps_every_line_and_never_raises_thousands(lines, cuts, line_cap):
    tracemalloc.start()
    try:
        _property(lines, cuts, line_cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB, peak


# --- at the real caps (slow) --------------------------------------------------------------------

@pytest.mark.slow
def test_a_child_writing_a_gigabyte_with_no_newline_is_ended_at_the_real_cap(tmp_path):
    outcome, verdict, _, peak = child(tmp_path, "b = b'x' * (1 << 20)\nfor _ in range(1024): sys.stdout.buffer.write(b)\n"
                                                "sys.exit(1)", timeout=120)
    assert verdict.reason.startswith("ended: its output passed 256 MiB (a real run's is a few kB); last output: ...xxx")
    assert len(verdict.reason) < 1000
    assert (tmp_path / "child.log").stat().st_size < 1024 * MIB
    assert peak < 4 * MIB, peak


@pytest.mark.slow
def test_a_record_line_of_a_gigabyte_is_ended_at_the_real_cap(tmp_path):
    _, verdict, _, peak = child(tmp_path, "b = b'x' * (1 << 20)\nfor _ in range(1024): rec.write(b)\nsys.exit(1)", timeout=120)
    assert verdict.reason.startswith("ended: its record passed 16 MiB (a real run's is a few kB)")
    assert peak < 16 * MIB, peak  # a pending line (4 MiB cap) and a chunk, joined


# --- the child's end carries the run's token (issue 37) ----------------------------------------------

# A .pth file as a wheel could ship it: at start-up it writes passing records and the end to the record file (the
# child's last argument), then ends the process, before the child has run.
FORGED = "".join(json.dumps({"kind": "check", "name": name, "status": "pass", "reason": "forged"}) + "\n"
                 for name in ("export (weighted)", "run with data file (weighted)")) + json.dumps({"kind": "end"}) + "\n"
FORGER = f"import os, sys; rec = open(sys.argv[-1], 'a'); rec.write({FORGED!r}); rec.close(); os._exit(0)\n"


def test_an_end_written_at_start_up_by_a_pth_file_is_not_the_childs(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    site = next((tmp_path / "venv").glob("lib/python3*/site-packages"))
    (site / "forger.pth").write_text(FORGER)
    python = tmp_path / "venv" / "bin" / "python"
    row = tmp_path / "row.json"
    row.write_text("{}")
    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    seen = []
    outcome = run_child([str(python), "-S", "-m", "smoke.child", str(row), str(tmp_path), str(record)], record, log, 60,
                        dict(os.environ), seen.append)
    assert [r.reason for r in seen] == ["forged", "forged"], outcome.bad_lines  # read: but the child never finished
    assert not outcome.finished and outcome.returncode == 0
    verdict = judge_child(outcome, 60, log)
    assert verdict.status is Status.FAIL
    assert verdict.reason == ("wrote 1 lines that are not check records, first: "
                              "'an end record without this run\\'s token: {\"kind\": \"end\"}'")


def test_the_token_is_read_before_site_packages_runs_anything(tmp_path):
    # The .pth runs as the child's site-packages is searched, after the child read the token from its stdin: it
    # finds nothing there to forge the end with.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    site = next((tmp_path / "venv").glob("lib/python3*/site-packages"))
    (site / "reader.pth").write_text("import os, sys, select; r, _, _ = select.select([sys.stdin], [], [], 0); "
                                     "print('stdin ready' if r else 'stdin empty', flush=True); os._exit(0)\n")
    python = tmp_path / "venv" / "bin" / "python"
    assert _started_with_the_token(python, "-S") == "stdin empty"
    assert _started_with_the_token(python) == "stdin ready"  # the control: a plain python runs the .pth first


def _started_with_the_token(python: Path, *flags: str) -> str:
    """What the .pth saw of ``python [flags] -m smoke.child`` given the token, its stdin then left open."""
    child = subprocess.Popen([str(python), *flags, "-m", "smoke.child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        child.stdin.write("the-token\n")
        child.stdin.flush()
        return child.stdout.readline().strip()
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_a_long_phase_says_it_is_still_running(tmp_path, monkeypatch, capsys):
    # A first export through AOTInductor or the import of torch with its CUDA libraries runs for tens of seconds with
    # nothing to print: the parent says the phase is alive, every PROGRESS_S (lowered here), and once it ends, stops.
    monkeypatch.setattr(follow, "PROGRESS_S", 0.3)
    done = json.dumps({"kind": "phase", "name": "load and run (weighted)", "event": "end", "seconds": 1.0})
    outcome, verdict, _ = fake_child(tmp_path, f"w({PHASE!r}); time.sleep(1.0); w({done!r}); time.sleep(0.7); w(END)")
    assert verdict is None
    said = capsys.readouterr().out.splitlines()
    running = [line for line in said if "still running" in line]
    assert 2 <= len(running) <= 4, said  # 0.3, 0.6, 0.9 s into the 1 s phase; none after its end
    assert all(line.startswith("  ... load and run (weighted): still running (") for line in running)
    assert said.index(running[-1]) < said.index("  ... load and run (weighted): 1.0 s")
