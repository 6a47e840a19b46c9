"""The figures the typed core keeps: few `Any` in its core, and no module too long to read.

`Any` turns mypy off wherever a value flows, so the layers that hold the runs, their
plans, their handlers and their history (runs/, planning/, handlers/, store/) name
it only where nothing more exact can be said: JSON values are `values.json_values`'s
types, a value only handed on is `object`. The count is the one this shell line
prints, so a reader can check it by hand:

    grep -rn --include=*.py -w Any subagent_host/{runs,planning,handlers,store} \
        | grep -v import | wc -l

A module over 700 lines does more than one job: split it along its seams.
(tests/test_import_cycles.py keeps the third figure: no import cycle.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import subagent_host

PACKAGE: Final = Path(subagent_host.__file__).parent
CORE: Final = ("runs", "planning", "handlers", "store")
MAX_ANY: Final = 30
MAX_MODULE_LINES: Final = 700

# `grep -w Any`: Any not inside a longer word of letters, digits or underscores.
ANY_WORD: Final = re.compile(r"(?<![A-Za-z0-9_])Any(?![A-Za-z0-9_])")


def modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def any_lines(root: Path) -> list[str]:
    """Each line under `root` that names `Any` and is not an import line, as grep shows it."""
    return [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in modules(root)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ANY_WORD.search(line) and "import" not in line
    ]


def test_the_core_names_any_at_most_30_times_outside_import_lines() -> None:
    found = [line for layer in CORE for line in any_lines(PACKAGE / layer)]
    assert len(found) <= MAX_ANY, "\n".join(found)


def test_the_count_is_what_grep_counts() -> None:
    text = "x: Any\nfrom typing import Any\ny: dict[str, Any]\nAnything = 1\nmy_Any = 2\n"
    lines = [line for line in text.splitlines() if ANY_WORD.search(line) and "import" not in line]
    assert lines == ["x: Any", "y: dict[str, Any]"]


def test_no_module_of_the_package_is_over_700_lines() -> None:
    lengths = {
        path: len(path.read_text(encoding="utf-8").splitlines()) for path in modules(PACKAGE)
    }
    assert lengths, "no module found"
    too_long = [
        f"{path.relative_to(PACKAGE.parent)}: {n}"
        for path, n in lengths.items()
        if n > MAX_MODULE_LINES
    ]
    assert not too_long, "\n".join(too_long)
