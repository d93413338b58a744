"""``wheel tags``: the file name's tags are its WHEEL file's.

pip chooses a wheel by the tags in its file name; the builder writes the tags it built for into
``.dist-info/WHEEL``. A file renamed after the build (``cp311`` to ``cp311.cp312``) installs where its files were
never built to run: a FAIL naming both. Impossible tags or an unreadable WHEEL file are refused earlier
(``smoke.readers.wheel.read_wheel``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.tags import InvalidTag, Tag, parse_tag

from smoke.checks.kinds import FileCheck
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.rows import Row


def _written(tags) -> str:
    return ", ".join(sorted(str(t) for t in tags))


def check_wheel_tags(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = WHEEL_TAGS.name
    if not wheel.wheel_tags:
        return failed(name, f"its WHEEL file names no Tag (the file name says {_written(wheel.tags)}): build it again")
    said: set[Tag] = set()
    for line in wheel.wheel_tags:
        try:
            said |= parse_tag(line)
        except InvalidTag:
            return failed(name, f"its WHEEL file has Tag {line!r}, which is not a tag (python-abi-platform): build it again")
    problems = []
    if said != set(wheel.tags):
        problems.append(f"the file name says {_written(wheel.tags)}, its WHEEL file {_written(said)}: pip installs it by "
                        f"its name, where it was not built to run; rename it to its WHEEL's tags, or build it again")
    if wheel.build != wheel.wheel_build:
        problems.append(f"the file name's build tag is {wheel.build or 'none'!r}, its WHEEL file's Build {wheel.wheel_build or 'none'!r}")
    if problems:
        return failed(name, "; ".join(problems), name_tags=sorted(map(str, wheel.tags)), wheel_tags=sorted(map(str, said)))
    return passed(name, f"the file name's tags are its WHEEL file's ({_written(said)})")


WHEEL_TAGS = Check("wheel tags", FILE, 1, check_wheel_tags)
CHECKS: tuple[FileCheck, ...] = (WHEEL_TAGS,)
