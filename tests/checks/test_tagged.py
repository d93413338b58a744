"""smoke.checks.tagged: `wheel tags`, on a hostile user's wheel names and WHEEL files (issue 23, class 1), each
a mutant of PyPI's 1.5.1 wheel, through ``python -m smoke inspect W`` as a user runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.helpers import dist_info_text as member
from tests.helpers import renamed_copy as renamed
from tests.helpers import with_dist_info as replaced


def smoke(*args):
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=300)


# Installable tags its WHEEL file does not name: the wheel is defective, a FAIL of `wheel tags` (on inspect, any interpreter).
RETAGGED = [
    ("executorch-1.5.1-cp311.cp312-cp311.cp312-manylinux_2_28_x86_64.whl", "the file name says cp311-cp311-manylinux_2_28_x86_64, "
     "cp311-cp312-manylinux_2_28_x86_64, cp312-cp311-manylinux_2_28_x86_64, cp312-cp312-manylinux_2_28_x86_64, its WHEEL file "
     "cp311-cp311-manylinux_2_28_x86_64: pip installs it by its name"),
    ("executorch-1.5.1-cp311-abi3-manylinux_2_28_x86_64.whl", "the file name says cp311-abi3-manylinux_2_28_x86_64, its WHEEL file cp311-cp311"),
    ("executorch-1.5.1-py3-none-any.whl", "the file name says py3-none-any, its WHEEL file cp311-cp311-manylinux_2_28_x86_64"),
    ("executorch-1.5.1-cp311-cp311-musllinux_1_2_x86_64.whl", "the file name says cp311-cp311-musllinux_1_2_x86_64"),
    ("executorch-1.5.1-pp310-pypy310_pp73-manylinux_2_28_x86_64.whl", "the file name says pp310-pypy310_pp73-manylinux_2_28_x86_64"),
    ("executorch-1.5.1-7-cp311-cp311-manylinux_2_28_x86_64.whl", "the file name's build tag is '7', its WHEEL file's Build 'none'"),
]


@pytest.mark.parametrize(("name", "text"), RETAGGED, ids=[n for n, _ in RETAGGED])
def test_a_name_its_wheel_file_does_not_say_fails_wheel_tags(slim_x86_64, tmp_path, name, text):
    wheel = renamed(slim_x86_64, tmp_path, name)
    proc = smoke("inspect", wheel, "--row", "cpu_x86_64")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("FAIL wheel tags: "))
    assert text in line


@pytest.mark.slow
def test_a_wheel_file_that_names_no_tag_or_another_fails_wheel_tags(slim_x86_64, tmp_path):
    text = member(slim_x86_64, "WHEEL")
    none = replaced(slim_x86_64, tmp_path / "none", "WHEEL", text.replace("Tag: cp311-cp311-manylinux_2_28_x86_64\n", ""))
    other = replaced(slim_x86_64, tmp_path / "other", "WHEEL", text.replace("Tag: cp311", "Tag: cp312"))
    assert "FAIL wheel tags: its WHEEL file names no Tag" in smoke("inspect", none, "--row", "cpu_x86_64").stdout
    assert "its WHEEL file cp312-cp311-manylinux_2_28_x86_64" in smoke("inspect", other, "--row", "cpu_x86_64").stdout


def test_the_public_wheel_passes_wheel_tags(slim_x86_64):
    proc = smoke("inspect", slim_x86_64, "--row", "cpu_x86_64")
    assert "PASS wheel tags: the file name's tags are its WHEEL file's (cp311-cp311-manylinux_2_28_x86_64)" in proc.stdout
