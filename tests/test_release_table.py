""".ci/release-table writes docs/releases.md anew from its runs, and keeps the sections it does not write."""

from __future__ import annotations

import importlib.machinery
import importlib.util

from tests.helpers import REPO


def _script():
    loader = importlib.machinery.SourceFileLoader("release_table", str(REPO / ".ci" / "release-table"))
    spec = importlib.util.spec_from_loader("release_table", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_sections_written_by_hand_are_kept_after_the_ones_it_writes(tmp_path):
    table = _script()
    output = tmp_path / "releases.md"
    results = [{"wheel": None, "release": "1.0.0", "machine": "x86_64"}]
    table.write(results, output)
    first = output.read_text()
    output.write_text(first + "\n## A CUDA build of main\n\nwritten by hand\n\n## macOS wheels\n\nalso by hand\n")
    table.write(results, output)
    again = output.read_text()
    assert again.startswith(first.rstrip("\n"))  # what it writes, as before
    assert again.count("## Why each FAIL is a real defect") == 1  # its own sections once, not kept twice
    assert again.rstrip("\n").endswith("## A CUDA build of main\n\nwritten by hand\n\n## macOS wheels\n\nalso by hand")


def test_the_sections_of_docs_releases_md_survive_a_rewrite(tmp_path):
    table = _script()
    output = tmp_path / "releases.md"
    output.write_text((REPO / "docs" / "releases.md").read_text())
    table.write([{"wheel": None, "release": "1.0.0", "machine": "x86_64"}], output)
    text = output.read_text()
    for heading in ("## macOS and Windows wheels (issue 27)", "## Every part exercised (issue 28)",
                    "## A CUDA build of main (the 1.5 layout): what the gate accepts on purpose, and what it fails (issue 32)"):
        assert text.count(heading) == 1, heading
