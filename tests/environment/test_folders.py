"""smoke.environment.folders: the mark that makes a folder the gate's own, and what a run lets go of at its end."""

from __future__ import annotations

import signal

import pytest


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


def test_a_free_folder_is_only_probed_before_the_run(tmp_path):
    """check_free (a run's first step) makes nothing and holds nothing: the run's own claim takes the folder after it;
    a folder claimed by another holder is refused, naming it (a second open of the mark conflicts as another run's)."""
    from smoke.environment import folders as owned

    folder = tmp_path / "env"
    owned.check_free(folder, "environment folder", "--env-dir")
    assert not folder.exists()
    held = owned.claim(folder, "environment folder", "--env-dir")
    with pytest.raises(owned.FolderRefused, match=r"is in use by another gate run \(pid \d+\): wait for it to end"):
        owned.check_free(folder, "environment folder", "--env-dir")
    held.release()
    owned.check_free(folder, "environment folder", "--env-dir")
    owned.claim(folder, "environment folder", "--env-dir").release()  # the probe let go of the lock


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


# --- a lock file in a folder the gate writes into but does not own (compare's --report-dir) ---------------------------


def _holder(lock, ready):
    """Another process holding the lock until it is killed."""
    import subprocess
    import sys

    from tests.helpers import REPO

    code = (f"from pathlib import Path; import time; from smoke.environment import folders\n"
            f"with folders.lock_file(Path({str(lock)!r}), 'report folder', '--report-dir'):\n"
            f"    Path({str(ready)!r}).write_text('held'); time.sleep(60)\n")
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO)


def _wait_for(path, process):
    import time

    deadline = time.monotonic() + 30
    while not path.exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)


def test_a_lock_file_held_by_another_process_refuses_a_second_run_at_once_and_dies_with_its_holder(tmp_path):
    from smoke.environment import folders as owned

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "compare-cpu_x86_64.json").write_text("the first run's")
    lock = reports / ".compare-cpu_x86_64.lock"
    holder = _holder(lock, tmp_path / "ready")
    try:
        _wait_for(tmp_path / "ready", holder)
        with pytest.raises(owned.FolderRefused) as refused, owned.lock_file(lock, "report folder", "--report-dir"):
            pass
        assert str(refused.value) == (f"report folder {str(reports)!r} is in use by another gate run (pid {holder.pid}) that "
                                      f"writes the same reports: wait for it to end, or pass another folder to --report-dir")
        assert lock.read_text() == f"pid {holder.pid}\n" and (reports / "compare-cpu_x86_64.json").read_text() == "the first run's"
    finally:
        holder.kill()  # no clean-up of its own: its file stays, its lock goes with it
        holder.wait()
    assert lock.read_text() == f"pid {holder.pid}\n"
    with owned.lock_file(lock, "report folder", "--report-dir"):
        assert lock.read_text().startswith("pid ") and lock.read_text() != f"pid {holder.pid}\n"
    assert sorted(p.name for p in reports.iterdir()) == ["compare-cpu_x86_64.json"]  # its lock file removed; the rest kept


def test_a_lock_file_makes_its_folder_and_removes_it_only_when_left_empty(tmp_path):
    from smoke.environment import folders as owned

    with owned.lock_file(tmp_path / "new" / ".x.lock", "report folder", "--report-dir"):
        assert (tmp_path / "new" / ".x.lock").is_file()
    assert not (tmp_path / "new").exists()
    with owned.lock_file(tmp_path / "used" / ".x.lock", "report folder", "--report-dir"):
        (tmp_path / "used" / "report.json").write_text("{}")
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == ["report.json"]


@pytest.mark.parametrize("kind", ["a user's file", "a link", "a folder"])
def test_what_the_gate_did_not_write_at_a_lock_files_name_is_refused_and_left_alone(tmp_path, kind):
    from smoke.environment import folders as owned

    lock, theirs = tmp_path / ".compare-cpu_x86_64.lock", tmp_path / "theirs.txt"
    theirs.write_text("my notes\n")
    if kind == "a user's file":
        lock.write_text("my notes\n")
    elif kind == "a link":
        lock.symlink_to(theirs)
    else:
        lock.mkdir()
    with pytest.raises(owned.FolderRefused) as refused, owned.lock_file(lock, "report folder", "--report-dir"):
        pass
    assert str(refused.value).startswith(f"report folder {str(tmp_path)!r} ") and str(refused.value).endswith("--report-dir")
    assert theirs.read_text() == "my notes\n"
    assert lock.is_symlink() if kind == "a link" else lock.is_dir() if kind == "a folder" else lock.read_text() == "my notes\n"
