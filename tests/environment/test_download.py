"""smoke.environment.download: with no wheel given, the row downloads one: the current release, a version named
by --wheel-version, or the newest with --pre."""

from __future__ import annotations

from pathlib import Path

import pytest

from smoke.environment import download
from smoke.readers.wheel import probe_interpreter
from smoke.rows import ROWS


def _words(version=None, pre=False, row="cpu_x86_64"):
    return download.download_command(ROWS[row], probe_interpreter(None), Path("/d"), None, version, pre)


def test_the_command_asks_for_the_rows_platform_and_the_version_named():
    cmd = _words()
    assert cmd[-1] == "executorch" and "--pre" not in cmd
    assert [cmd[i + 1] for i, w in enumerate(cmd) if w == "--platform"] == [
        "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64"]
    assert _words("1.4.1")[-1] == "executorch==1.4.1"
    assert _words(pre=True)[-2:] == ["--pre", "executorch"]
    mac = _words(row="cpu_macos_arm64")
    assert [mac[i + 1] for i, w in enumerate(mac) if w == "--platform"] == ["macosx_15_0_arm64", "macosx_15_0_universal2"]


@pytest.mark.slow
@pytest.mark.network
def test_a_version_named_is_the_one_downloaded(capsys):
    path = download.default_wheel(ROWS["cpu_x86_64"], probe_interpreter(None), None, print, "1.4.1")
    assert path.name == "executorch-1.4.1-cp311-cp311-manylinux_2_28_x86_64.whl" and path.is_file()
    assert "no wheel given: downloading executorch 1.4.1 for cp311 x86_64 from the configured package index" in capsys.readouterr().out
    other = download.default_wheel(ROWS["cpu_x86_64"], probe_interpreter(None), None, print)
    assert other.name != path.name  # the current release is another: the version named was honoured
