"""The ``das`` command's user errors: exit code 2 and one clear line, no trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from das.job.cli import main


def test_cluster_down_without_a_cluster_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "down", "--state", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"das: error: no cluster state at {tmp_path}/cluster.json")


def test_cluster_up_refuses_bad_ports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["cluster", "up", "--state", str(tmp_path), "--worker-ports", "70a"]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "das: error: --worker-ports takes comma-separated port numbers, got '70a'\n"
    )
