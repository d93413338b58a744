"""smoke.checks.toplevel: top_level.txt names only what the wheel installs (issue 48, executorch#22267)."""

from __future__ import annotations

import pytest

from smoke.checks.toplevel import check_top_level_names
from smoke.readers.wheel import read_wheel
from smoke.readers.wheelcopy import rewrite_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import line, release_wheel, smoke

ROW = ROWS["cpu_x86_64"]


@pytest.mark.network
def test_pypi_1_4_1_lists_nine_build_recipe_strings_and_warns_naming_them():
    """PyPI's real 1.4.1 (executorch#22267): nine '@EXECUTORCH_BuiltFile_...' lines beside executorch. inspect drew no
    finding from it before."""
    proc = smoke("inspect", release_wheel("1.4.1"), "--row", "cpu_x86_64")
    assert line(proc, "WARN top-level names: ").startswith(
        "WARN top-level names: executorch-1.4.1.dist-info/top_level.txt lists 9 of its 10 names that the wheel installs "
        "nothing under: '@EXECUTORCH_BuiltFile_%CMAKE_CACHE_DIR%/backends/cuda/%BUILD_TYPE%/libaoti_cuda_shims', ")
    assert line(proc, "WARN top-level names: ").endswith(
        "(and 7 more); tools that read it to find a name's distribution are misled (executorch#22267): list only the "
        "package's own top-level names")


def test_1_5_1_lists_executorch_alone_and_passes(slim_x86_64):
    result = check_top_level_names(read_wheel(slim_x86_64), ROW, None)
    assert result.line() == "PASS top-level names: executorch-1.5.1.dist-info/top_level.txt lists executorch, each installed"


@pytest.mark.parametrize(("text", "status", "said"), [
    ("executorch\nnot_shipped\n", Status.WARN, "lists 1 of its 2 names that the wheel installs nothing under: 'not_shipped'"),
    ("executorch\n\n", Status.PASS, "lists executorch, each installed"),
])
def test_a_listed_name_the_wheel_does_not_install_warns(slim_x86_64, tmp_path, text, status, said):
    info = "executorch-1.5.1.dist-info/top_level.txt"
    mutant = rewrite_wheel(slim_x86_64, tmp_path, add={info: text.encode()})
    result = check_top_level_names(read_wheel(mutant), ROW, None)
    assert result.status is status and said in result.reason, result.line()


def test_a_wheel_without_top_level_txt_passes_saying_so(slim_x86_64, tmp_path):
    mutant = rewrite_wheel(slim_x86_64, tmp_path, drop=("executorch-1.5.1.dist-info/top_level.txt",))
    result = check_top_level_names(read_wheel(mutant), ROW, None)
    assert result.line() == "PASS top-level names: the wheel has no top_level.txt, which nothing requires (setuptools writes one)"


# --- console scripts (issue 58) ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def with_bin(wheel_x86_64, tmp_path_factory):
    """PyPI's 1.5.1 with its metadata and the module its flatc command names alone (RECORD rewritten to match): what
    ``console scripts`` reads, in a small wheel each mutant is quick to write."""
    return rewrite_wheel(wheel_x86_64, tmp_path_factory.mktemp("with-bin"),
                         keep=lambda name: ".dist-info/" in name or name == "executorch/data/bin/__init__.py")


@pytest.mark.slow
def test_1_5_1s_flatc_command_names_a_module_it_ships_and_passes(wheel_x86_64):
    from smoke.checks.toplevel import check_console_scripts

    result = check_console_scripts(read_wheel(wheel_x86_64), ROW, None)
    assert result.line() == "PASS console scripts: 1 command declared, each naming a module the wheel ships: flatc"


@pytest.mark.parametrize(("text", "said"), [
    ("[console_scripts]\nflatc = executorch.data.binx:flatc\n",
     "1 of the 1 commands executorch-1.5.1.dist-info/entry_points.txt declares cannot run: flatc = "
     "executorch.data.binx:flatc: the wheel ships no module 'executorch.data.binx' (executorch/data/binx.py or "
     "executorch/data/binx/__init__.py): every run of each ends in ModuleNotFoundError"),
    ("[console_scripts]\nflatc = executorch.data.bin:flatc\n[gui_scripts]\nviewer = executorch_viewer.main:run [gui]\n",
     "1 of the 2 commands executorch-1.5.1.dist-info/entry_points.txt declares cannot run: viewer = "
     "executorch_viewer.main:run: the wheel ships no module 'executorch_viewer.main'"),
])
def test_a_command_whose_module_the_wheel_does_not_ship_fails_naming_it(with_bin, tmp_path, text, said):
    """Issue 58: a console script whose module is not in the wheel PASSed inspect and the row; every run of the
    command a user types ends in ModuleNotFoundError."""
    from smoke.checks.toplevel import check_console_scripts

    mutant = rewrite_wheel(with_bin, tmp_path, add={"executorch-1.5.1.dist-info/entry_points.txt": text.encode()})
    result = check_console_scripts(read_wheel(mutant), ROW, None)
    assert result.status is Status.FAIL and result.reason.startswith(said), result.line()


def test_entry_points_that_declare_no_script_or_are_not_ini_pass_saying_so(with_bin, tmp_path):
    from smoke.checks.toplevel import check_console_scripts, declared_scripts

    assert declared_scripts("[executorch.plugins]\nx = a.b:c\n") == []
    assert declared_scripts("no section header\n= =\n") == []
    assert declared_scripts("[console_scripts]\nFlatC = a.b:c [extra]\n") == [("FlatC", "a.b", "c")]
    assert check_console_scripts(read_wheel(with_bin), ROW, None).status is Status.PASS
    mutant = rewrite_wheel(with_bin, tmp_path, drop=("executorch-1.5.1.dist-info/entry_points.txt",))
    assert check_console_scripts(read_wheel(mutant), ROW, None).line() == (
        "PASS console scripts: the wheel declares no entry points (no entry_points.txt)")
