"""uv fills the environment from pip's own sources: what pip's configuration says is what uv is given."""

from __future__ import annotations

import subprocess
import sys

import pytest

from smoke.environment import installer
from smoke.errors import EnvironmentBuildError


def _pairs(flags: list[str]) -> list[list[str]]:
    return [flags[i:i + 2] for i in range(len(flags) - 1)]


def _pip_config(tmp_path, text: str, **env: str) -> installer.Sources:
    """pip's own reading of a config file and PIP_* variables, through `pip config list`, parsed. The machine's own
    site-wide file (/etc/xdg/pip/pip.conf) is not read: its [install] section outranks the test's [global] one in pip,
    as a CI machine's `[install] constraint = ...` did."""
    conf = tmp_path / "pip.conf"
    conf.write_text(text)
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_CONFIG_FILE": str(conf),
             "XDG_CONFIG_DIRS": str(tmp_path / "no-site-config"), **env}
    return installer.pip_sources(sys.executable, clean)


def test_pip_configuration_becomes_uv_flags(tmp_path):
    sources = _pip_config(tmp_path, "[global]\nextra-index-url = file:///a/simple file:///b/simple\n"
                                    "find-links =\n    /wheels one\n    /wheels2\nconstraint = /c.txt\n"
                                    "[install]\nindex-url = https://mirror.example/simple\n")
    assert sources.index_url == "https://mirror.example/simple"
    assert sources.extra_index_urls == ("file:///a/simple", "file:///b/simple")
    assert sources.constraints == ("/c.txt",)
    assert sources.uv_flags()[:2] == ["--index-url", "https://mirror.example/simple"]
    assert ["--constraint", "/c.txt"] in _pairs(sources.uv_flags())
    assert "extra index file:///a/simple" in sources.describe()


def test_a_pip_variable_replaces_the_file_setting_as_pip_does(tmp_path):
    sources = _pip_config(tmp_path, "[global]\nfind-links = /from-file\n", PIP_FIND_LINKS="/from-env")
    assert sources.find_links == ("/from-env",)  # the variable wins over every file, as in pip


def test_no_index_drops_every_index(tmp_path):
    sources = _pip_config(tmp_path, "[global]\nno-index = true\nextra-index-url = file:///a/simple\nfind-links = /w\n")
    flags = sources.uv_flags()
    assert "--no-index" in flags and "--extra-index-url" not in flags and ["--find-links", "/w"] in _pairs(flags)


def test_a_setting_uv_is_not_given_is_named(tmp_path):
    sources = _pip_config(tmp_path, "[global]\nprefer-binary = true\n")
    assert "pip settings uv is not given: prefer-binary" in sources.describe()


def test_uv_asked_for_and_missing_is_one_error_naming_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("UV", str(tmp_path / "no-uv-here"))
    with pytest.raises(EnvironmentBuildError, match=r"--venv-backend uv: no uv found .*pip install uv"):
        installer.choose_backend("uv")
    assert installer.choose_backend("auto") == ("virtualenv", None)
    assert installer.choose_backend("virtualenv") == ("virtualenv", None)


def test_uv_is_found_the_way_nox_finds_it(monkeypatch):
    uv = pytest.importorskip("uv")
    monkeypatch.delenv("UV", raising=False)
    assert installer.find_uv() == uv.find_uv_bin()
    assert installer.choose_backend("auto") == ("uv", uv.find_uv_bin())
    out = subprocess.run([installer.find_uv(), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("uv ")


def test_the_uv_install_command_carries_the_sources_and_pips_index_strategy(tmp_path):
    sources = installer.Sources(extra_index_urls=("file:///a/simple",), find_links=("/w",), constraints=("/c.txt",))
    cmd = installer.Installer("uv", tmp_path / "bin/python", "/x/uv", sources).base(wheelhouse=None, torch_index="https://t/cpu")
    assert cmd[:3] == ["/x/uv", "pip", "install"]
    assert cmd[cmd.index("--python") + 1] == str(tmp_path / "bin/python")
    assert cmd[cmd.index("--index-strategy") + 1] == "unsafe-best-match"
    for pair in (["--extra-index-url", "file:///a/simple"], ["--find-links", "/w"], ["--constraint", "/c.txt"],
                 ["--extra-index-url", "https://t/cpu"]):
        assert pair in _pairs(cmd)


@pytest.mark.parametrize(("value", "no_index"), [("1", True), ("yes", True), ("true", True), ("y", True), ("t", True),
                                                 ("0", False), ("off", False), ("n", False)])
def test_pip_no_index_in_the_environment_reaches_uv(tmp_path, value, no_index):
    # PIP_NO_INDEX, as a shared runner sets it to keep pip off the network: uv is given --no-index and no index.
    sources = _pip_config(tmp_path, "[global]\nextra-index-url = file:///a/simple\nfind-links = /w\n", PIP_NO_INDEX=value)
    flags = sources.uv_flags()
    assert ("--no-index" in flags) is no_index and ("--extra-index-url" in flags) is not no_index, flags
    assert sources.describe().startswith("no index" if no_index else "index PyPI (pip default)")
