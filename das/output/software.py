"""Which software writes a run: das's own code, by content, and the packages that shape it.

das's version number names a release, not the code: an editable install or a patched
checkout runs other code under the same number. So a run records the SHA-256 of the das
package's files (its code and its shipped schemas), with the versions of the packages that
can change a run's output for the same seed. ``--resume`` compares the record before it
continues a run, since a resumed run keeps the stages already written (noise drawn, levels
solved) and would mix two programs' output in one release; the certificate publishes it, so
an auditor can tell which code made a release.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

from das import __version__

#: The packages whose versions can change a run's output for the same seed.
RESULT_PACKAGES = ("pyspark", "numpy", "highspy", "numba", "scipy")

#: What a wheel of das installs (pyproject's package data): editor and bytecode files are not.
CODE_SUFFIXES = (".py", ".toml", ".properties")

PACKAGE = Path(__file__).resolve().parents[1]


def code_digest(root: Path = PACKAGE) -> str:
    """``sha256:<hex>`` of every code and data file under ``root``, by relative path and
    content: the same for a checkout and for the wheel built from it."""
    files = {
        path.relative_to(root).as_posix(): path
        for path in root.rglob("*")
        if path.suffix in CODE_SUFFIXES
        and path.is_file()
        and "__pycache__" not in path.relative_to(root).parts
    }
    digest = hashlib.sha256()
    for name in sorted(files):  # by the names' text: the same order on every machine
        data = files[name].read_bytes()
        digest.update(b"%d:%s%d:" % (len(name.encode()), name.encode(), len(data)))
        digest.update(data)
    return f"sha256:{digest.hexdigest()}"


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_software() -> dict[str, str]:
    """das's version and code digest, then the version of each of ``RESULT_PACKAGES``."""
    found = {"das": __version__, "das_code": code_digest()}
    return found | {name: package_version(name) for name in RESULT_PACKAGES}
