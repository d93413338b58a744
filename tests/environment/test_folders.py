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
