"""The solver library runs one family with no Spark: docs/architecture.md's example, run
in a fresh interpreter where pyspark cannot be imported, prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "architecture.md"
BLOCKER = "import sys\nsys.modules['pyspark'] = None  # any import of pyspark now fails\n"


def _section() -> str:
    text = PAGE.read_text()
    return text[text.index("## One family from a notebook") :].split("\n## ")[0]


def test_the_notebook_example_solves_a_family_without_spark():
    code, printed = re.findall(r"```(?:python)?\n(.*?)```", _section(), re.S)[:2]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER + code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed


def test_the_blocker_blocks():
    """Not vacuous: with the same blocker, importing the Spark level loop fails."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER + "import das.postprocess.levels"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "pyspark" in done.stderr
