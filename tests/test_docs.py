"""The documentation's own links: every relative link in README.md and docs/ leads to a file of the checkout (the
reference in docs/, the dated records in docs/records/)."""

from __future__ import annotations

import re

from tests.helpers import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_in_the_docs_leads_to_a_file_of_the_checkout():
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:|^#", target):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def test_the_reference_is_apart_from_the_records():
    """docs/ holds what is true now; dated runs, benchmarks' history and old inspections are docs/records/."""
    dated = [p.name for p in (REPO / "docs").iterdir() if re.search(r"\d{4}-\d{2}-\d{2}", p.name)]
    assert dated == [] and not (REPO / "docs" / "runs").exists()
