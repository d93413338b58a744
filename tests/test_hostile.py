"""The gate under a hostile user: folders that are not its own, damaged and oversized wheels,
concurrent runs and interrupts. Inputs are made at test time; each case asserts the exit code,
the one line the user sees, and that nothing was deleted or left behind. The lock and interrupt
cases run real processes."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from tests.helpers import CPU, H200, REPO, declare_torch, rewrite_wheel


def gate(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def one_error_line(proc, text):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ERROR ") and "Traceback" not in proc.stderr, proc.stderr
    assert text in proc.stderr, proc.stderr


def users_folder(tmp_path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("three years of work")
    return folder


# --- folders the gate did not make ----------------------------------------------------------

@pytest.mark.parametrize("option", ["--env-dir", "--workdir"])
def test_a_users_folder_is_never_emptied(wheel_x86_64, tmp_path, option):
    folder = users_folder(tmp_path)
    other = "--workdir" if option == "--env-dir" else "--env-dir"
    proc = gate("cpu_x86_64", wheel_x86_64, option, folder, other, tmp_path / "other")
    one_error_line(proc, f"is not empty and the gate did not make it (no .executorch-wheel-gate in it), "
                         f"so it will not touch it: pass a new or empty folder to {option}")
    assert [p.name for p in folder.iterdir()] == ["thesis.tex"]
    assert (folder / "thesis.tex").read_text() == "three years of work"
    assert not (tmp_path / "other").exists()


def test_a_folder_that_cannot_be_made_is_one_line(wheel_x86_64, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = gate("cpu_x86_64", wheel_x86_64, "--env-dir", blocker / "env")
    one_error_line(proc, "cannot be made or written")
    assert "pass a writable folder to --env-dir" in proc.stderr


def test_a_marked_folder_is_the_gates_own(tmp_path):
    """The mark is what makes a non-empty folder the gate's: claim, fill, claim again, empty."""
    from smoke.environment import folders as owned

    first = owned.claim(tmp_path / "env", "environment folder", "--env-dir")
    (first.path / "bin").mkdir()
    first.release()
    again = owned.claim(tmp_path / "env", "environment folder", "--env-dir")
    again.empty()
    assert [p.name for p in again.path.iterdir()] == [owned.MARK]
    again.release()


def test_a_held_folder_is_kept_unless_discarded_or_made_and_left_unused(tmp_path):
    """owned.held: what the run lets go of at its end, however it ends."""
    from smoke.environment import folders as owned
    from smoke.errors import Interrupted

    with owned.held(owned.claim(tmp_path / "made", "work folder", "--workdir")):
        pass  # made by this run, nothing written: removed
    assert not (tmp_path / "made").exists()
    with owned.held(owned.claim(tmp_path / "used", "work folder", "--workdir")) as folder:
        (folder.path / "record.jsonl").write_text("")  # used: kept
    assert (tmp_path / "used" / "record.jsonl").exists()
    (tmp_path / "temporary").mkdir()  # as tempfile.mkdtemp leaves it: not made by the claim
    with owned.held(owned.claim(tmp_path / "temporary", "work folder", "--workdir")) as folder:
        (folder.path / "record.jsonl").write_text("")
        folder.discard = True  # a passed run's temporary artifacts
    assert not (tmp_path / "temporary").exists()
    said = []
    with pytest.raises(Interrupted), owned.held(owned.claim(tmp_path / "cut", "work folder", "--workdir"),
                                                interrupted=lambda f: said.append(f.path)) as folder:
        (folder.path / "record.jsonl").write_text("")
        raise Interrupted(signal.SIGTERM)
    assert said == [tmp_path / "cut"] and (tmp_path / "cut" / "record.jsonl").exists()
    again = owned.claim(tmp_path / "cut", "work folder", "--workdir")  # the lock was released
    again.release()


# --- one run at a time per folder: a real second process ---------------------------------------

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from smoke.environment import folders as owned
    held = owned.claim(Path(sys.argv[1]), "environment folder", "--env-dir")
    print("held", flush=True)
    time.sleep(60)
""")


def test_a_second_run_on_a_held_folder_is_refused_at_once_and_the_lock_dies_with_its_holder(wheel_x86_64, tmp_path):
    env_dir = tmp_path / "env"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(env_dir)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        proc = gate("cpu_x86_64", wheel_x86_64, "--env-dir", env_dir)
        one_error_line(proc, f"environment folder {str(env_dir)!r} is in use by another gate run (pid {holder.pid})")
        assert time.monotonic() - start < 30  # the file checks, then the refusal: nothing waited or built
        assert [p.name for p in env_dir.iterdir()] == [".executorch-wheel-gate"]
    finally:
        holder.kill()
        holder.wait()
    from smoke.environment import folders as owned

    owned.claim(env_dir, "environment folder", "--env-dir").release()  # killed holder: no stale lock


# --- interrupts: every process the gate started ends --------------------------------------------

DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from smoke import cli
    from smoke.environment import follow
    work = Path(sys.argv[1])
    # A child that starts a process of its own (as the negative control and the export helper are), then waits.
    child = [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen(['sleep', '300']); "
             "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(300)", str(work / "grandchild.pid")]
    code = cli._at_the_edge(lambda: follow.run_child(child, work / "record.jsonl", work / "child.log", 600, None, lambda r: None) and 0)
    sys.exit(code)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_ends_the_child_and_what_it_started(tmp_path, signum, code):
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], cwd=REPO, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group, like a terminal's foreground job
    pid_file = tmp_path / "grandchild.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(pid_file.read_text())
    assert _alive(grandchild)
    os.killpg(proc.pid, signum) if signum == signal.SIGINT else os.kill(proc.pid, signum)  # Ctrl-C reaches the group
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert err.strip() == (f"INTERRUPTED by {signal.Signals(signum).name}: the run was stopped, every process it "
                           "started was ended; no verdict")
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


# --- damaged, oversized and linked wheels --------------------------------------------------------

def _bad_crc(tmp, wheel):
    """One byte of a stored member changed after the fact: its CRC no longer matches."""
    target = tmp / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item), compress_type=zipfile.ZIP_STORED)
    with zipfile.ZipFile(target) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(".so"))
        name_len = len(info.filename.encode())
    data = bytearray(target.read_bytes())
    extra_len = struct.unpack_from("<H", data, info.header_offset + 28)[0]
    data[info.header_offset + 30 + name_len + extra_len + 100] ^= 0xFF
    target.write_bytes(bytes(data))
    return target


def _version_not_a_version(tmp, wheel):
    return rewrite_wheel(wheel, tmp, metadata=lambda text: text.replace("Version: 1.5.1", "Version: one-point-five", 1))


def _huge_member(tmp, wheel):
    """300 MiB of zeros, deflated to a few hundred kB."""
    target = rewrite_wheel(wheel, tmp)
    with zipfile.ZipFile(target, "a", zipfile.ZIP_DEFLATED) as archive, archive.open("executorch/zeros.bin", "w", force_zip64=True) as out:
        block = bytes(1 << 20)
        for _ in range(300):
            out.write(block)
    return target


def _link_chain(tmp, wheel):
    target = rewrite_wheel(wheel, tmp)
    with zipfile.ZipFile(target, "a") as archive:
        for name, to in (("executorch/a", ".."), ("executorch/b", "a/.."), ("executorch/c", "b/etc/passwd")):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, to)
    return target


WHEELS = [
    (_bad_crc, "is damaged:"),
    (_version_not_a_version, "has METADATA Version 'one-point-five', which is not a version"),
    (_huge_member, "entry 'executorch/zeros.bin' declares 314572800 B unpacked, over the gate's 268435456 B limit"),
    (_link_chain, "entry 'executorch/a' is a link to '..'; a wheel holds no links"),
]


@pytest.mark.parametrize(("make", "text"), WHEELS, ids=[m.__name__ for m, _ in WHEELS])
def test_a_hostile_wheel_is_one_line_quickly(slim_x86_64, tmp_path, make, text):
    wheel = make(tmp_path, slim_x86_64)
    start = time.monotonic()
    proc = gate("cpu_x86_64", wheel, "--env-dir", tmp_path / "env")
    one_error_line(proc, text)
    assert time.monotonic() - start < 20
    assert not (tmp_path / "env").exists()


def test_a_record_size_that_is_not_a_number_fails_the_record_check(slim_x86_64, tmp_path):
    with zipfile.ZipFile(slim_x86_64) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        record = archive.read(record_name).decode()
    first = record.splitlines()[0]
    broken = record.replace(first, first.rsplit(",", 1)[0] + ",twelve", 1)
    declared = declare_torch(slim_x86_64, tmp_path / "declared")  # so that only RECORD is wrong
    fixed = rewrite_wheel(declared, tmp_path / "out", update_record=False, add={record_name: broken.encode()})
    proc = gate("cpu_x86_64", fixed, "--fail-fast", "--env-dir", tmp_path / "env")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the wheel is defective: a FAIL, not a crash
    assert f"FAIL wheel RECORD: {first.split(',')[0]} has size 'twelve' in RECORD, which is not a number of bytes" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr and not (tmp_path / "env").exists()


def test_an_unwritable_step_summary_is_one_line_before_any_work(wheel_x86_64, tmp_path):
    proc = gate("cpu_x86_64", wheel_x86_64, "--env-dir", tmp_path / "env",
                env={"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "such" / "summary.md")})
    one_error_line(proc, "cannot be written (No such file or directory): point it at a writable file, or unset it")
    assert not (tmp_path / "env").exists()


# --- the reader's bounds ----------------------------------------------------------------------

def artifacts(*paths):
    return subprocess.run([sys.executable, "-m", "smoke.artifacts", *map(str, paths)], capture_output=True, text=True, cwd=REPO)


def test_a_data_file_claiming_a_huge_flatbuffer_is_refused(tmp_path):
    data = bytearray((H200 / "weighted" / "aoti_cuda_blob.ptd").read_bytes())
    struct.pack_into("<Q", data, 24, 1 << 60)  # at 8 the FH01 header: magic, u32 length, u64 flatbuffer offset, u64 size
    path = tmp_path / "aoti_cuda_blob.ptd"
    path.write_bytes(bytes(data))
    proc = artifacts(path)
    assert proc.returncode == 2 and proc.stderr.startswith("ERROR ") and proc.stderr.count("\n") == 1
    assert f"header says the flatbuffer is {1 << 60} B at byte 48" in proc.stderr


def test_a_data_file_with_a_broken_identifier_is_told_the_data_files(tmp_path):
    data = bytearray((CPU / "weighted" / "model.ptd").read_bytes())
    data[4:8] = b"XX01"
    path = tmp_path / "model.ptd"
    path.write_bytes(bytes(data))
    proc = artifacts(path)
    assert proc.returncode == 2
    assert "has file identifier b'XX01', expected b'FT01'" in proc.stderr
