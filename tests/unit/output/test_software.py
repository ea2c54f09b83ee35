"""das.output.software: the code digest a run records, and what it covers."""

from __future__ import annotations

import shutil
from pathlib import Path

from das.output.software import PACKAGE, RESULT_PACKAGES, code_digest, run_software


def _tree(root: Path) -> Path:
    (root / "spec" / "schemas").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "spec" / "config.py").write_text("X = 1\n")
    (root / "spec" / "schemas" / "p.toml").write_text("[schema]\n")
    return root


def test_the_digest_follows_every_code_and_data_file_by_path_and_content(tmp_path):
    digest = code_digest(_tree(tmp_path / "a"))
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert code_digest(_tree(tmp_path / "b")) == digest  # where the tree lies does not count
    changed = _tree(tmp_path / "c")
    (changed / "spec" / "config.py").write_text("X = 2\n")
    assert code_digest(changed) != digest
    schema = _tree(tmp_path / "d")
    (schema / "spec" / "schemas" / "p.toml").write_text("[schema]\nname = 'x'\n")
    assert code_digest(schema) != digest
    added = _tree(tmp_path / "e")
    (added / "spec" / "new.py").write_text("")
    assert code_digest(added) != digest
    moved = _tree(tmp_path / "f")
    (moved / "spec" / "config.py").rename(moved / "config.py")
    assert code_digest(moved) != digest


def test_bytecode_and_editor_files_do_not_count(tmp_path):
    digest = code_digest(_tree(tmp_path / "a"))
    tree = _tree(tmp_path / "b")
    (tree / "spec" / "__pycache__").mkdir()
    (tree / "spec" / "__pycache__" / "config.cpython-311.pyc").write_bytes(b"\0")
    (tree / "spec" / "__pycache__" / "stale.py").write_text("")
    (tree / "spec" / ".config.py.swp").write_bytes(b"\0")
    (tree / "notes.txt").write_text("x")
    assert code_digest(tree) == digest


def test_the_installed_package_is_digested_as_its_copy(tmp_path):
    """The digest of das itself is that of its files wherever they are: a wheel built from
    this checkout installs the same files, and so records the same digest."""
    copy = shutil.copytree(PACKAGE, tmp_path / "das", ignore=shutil.ignore_patterns("*.pyc"))
    assert code_digest(copy) == code_digest() == run_software()["das_code"]
    assert list(run_software()) == ["das", "das_code", *RESULT_PACKAGES]
