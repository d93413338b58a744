"""The environment's files noted before the wheel's code runs, and held against what is there later (issue 58): each
way code can change what eager's answer is computed from is named, and nothing the wheel owns or adds counts."""

from __future__ import annotations

import os

from smoke.environment.unchanged import note, site_folders


def _site(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    (site / "torch" / "__pycache__").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("x = 1\n")
    (site / "torch" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"compiled")
    (site / "executorch" / "__pycache__").mkdir(parents=True)
    (site / "executorch" / "__init__.py").write_text("")
    (site / "executorch" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"compiled")
    return site


def _noted(tmp_path, **kwargs):
    site = _site(tmp_path)
    folders = site_folders(tmp_path / "env")
    assert folders == [os.path.realpath(site)]
    return site, note(folders, frozenset({"executorch/__init__.py"}), **kwargs)


def test_nothing_changed_is_said_as_nothing(tmp_path):
    _, noted = _noted(tmp_path)
    assert noted.differs() == ""


def test_a_file_rewritten_in_place_with_its_times_put_back_is_named(tmp_path):
    site, noted = _noted(tmp_path)
    target = site / "torch" / "__init__.py"
    before = target.stat()
    target.write_text("x = 2\n")  # the same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # what a forger does: the change time stays new
    assert noted.differs() == (f"1 of the environment's files not the wheel's were changed or removed after it was built "
                               f"(0 removed): {target} (changed)")


def test_a_removed_file_and_a_replaced_compiled_file_are_named(tmp_path):
    site, noted = _noted(tmp_path)
    (site / "torch" / "__init__.py").unlink()
    compiled = site / "torch" / "__pycache__" / "__init__.cpython-311.pyc"
    compiled.with_suffix(".new").write_bytes(b"compiled")
    compiled.with_suffix(".new").replace(compiled)  # the same bytes, another file
    said = noted.differs()
    assert said.startswith("2 of the environment's files not the wheel's were changed or removed after it was built "
                           "(1 removed): "), said
    assert f"{compiled} (changed)" in said and f"{site / 'torch' / '__init__.py'} (removed)" in said


def test_the_wheels_own_files_and_files_added_to_site_packages_do_not_count(tmp_path):
    site, noted = _noted(tmp_path)
    (site / "executorch" / "__init__.py").write_text("changed = True\n")
    (site / "executorch" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"recompiled")
    (site / "torch" / "new_module.py").write_text("")
    assert noted.differs() == ""


def test_a_file_added_to_the_gates_own_copy_counts(tmp_path):
    code = tmp_path / "code"
    (code / "smoke").mkdir(parents=True)
    (code / "smoke" / "tensors.py").write_text("")
    site, noted = _noted(tmp_path, whole=[str(code)])
    planted = code / "smoke" / "__pycache__" / "tensors.cpython-311.pyc"
    planted.parent.mkdir()
    planted.write_bytes(b"planted")
    assert noted.differs() == f"1 files were added to the gate's own code it ran from: {os.path.realpath(planted)}"


def test_a_folder_the_process_read_that_was_not_noted_is_named(tmp_path):
    site, noted = _noted(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert noted.differs([str(site), str(site / "torch")]) == ""
    assert noted.differs([str(elsewhere)]) == (f"it imported from folders the gate had not noted ({elsewhere}), named by a "
                                               f".pth file written after the environment was built")
