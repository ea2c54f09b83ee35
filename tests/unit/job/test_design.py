"""``das design budget`` end to end on a small synthetic hierarchy (no Spark), and its
refusals (exit 2, the message pinned)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from das.errors import UserError
from das.job.cli import main
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
CONFIG = str(ROOT / "configs" / "pl94_2020_production.toml")
WORKLOAD = str(ROOT / "configs" / "workloads" / "pl94_2020.toml")


def _design(*extra: str) -> list[str]:
    return ["design", "budget", CONFIG, "--workload", WORKLOAD, *extra]


def test_design_budget_writes_a_config_the_run_accepts(tmp_path, capsys):
    out = tmp_path / "designed.toml"
    code = main(_design("--out", str(out), "--fanouts", "1,2,2,2,3"))
    printed = capsys.readouterr().out
    assert code == 0
    assert "synthetic tree, fanouts 1,2,2,2,3" in printed
    assert "block_group votingage*hispanic*cenrace" in printed
    before, after = load_config(CONFIG), load_config(out)
    assert after.budget.rho == before.budget.rho == after.budget.total_rho()
    for level, shares in after.budget.query_shares.items():
        assert sum(shares.values()) == 1
        assert list(shares) == list(before.budget.query_shares[level])
        assert all(Fraction(4096) * s == int(4096 * s) for s in shares.values())
    assert sum(after.budget.level_shares.values()) == 1
    assert after.passes == before.passes
    assert main(["run", str(out), "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                 "--dry-run"]) == 2  # fmt: skip  # no input tables here: refused past the config


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--workload", "nothere.toml"], r"--workload nothere.toml: no such file"),
        (["--fanouts", "1,2,x"], r"--fanouts '1,2,x': expected 5 positive integers"),
        (["--max-ratio", "0.5"], r"--max-ratio must be at least 1, got 0.5"),
        (["--input", "/nonexistent/dir"], r"--input /nonexistent/dir: no such directory"),
        (["--out", "/nonexistent/dir/x.toml"], r"--out /nonexistent/dir/x.toml: its directory does not exist"),
    ],
)
def test_refusals(tmp_path, capsys, args, match):
    flags = {"--workload": WORKLOAD, "--out": str(tmp_path / "x.toml")}
    flags.update(dict(zip(args[::2], args[1::2], strict=True)))
    if "--input" not in flags:
        flags.setdefault("--fanouts", "1,2,2,2,3")
    assert main(["design", "budget", CONFIG, *[x for kv in flags.items() for x in kv]]) == 2
    err = capsys.readouterr().err
    with pytest.raises(UserError, match=match):
        raise UserError(err)


def test_refuses_a_workload_naming_an_unknown_level(tmp_path, capsys):
    workload = tmp_path / "w.toml"
    workload.write_text('[[entry]]\nlevel = "ward"\nquery = "total"\nweight = 1\nreason = "r"\n')
    argv = ["design", "budget", CONFIG, "--workload", str(workload), "--out",
            str(tmp_path / "x.toml"), "--fanouts", "1,2,2,2,3"]  # fmt: skip
    assert main(argv) == 2
    assert "entry 1: unknown level 'ward'; the config's levels are us, state" in capsys.readouterr().err


def test_refuses_to_overwrite_the_config(tmp_path, capsys):
    copy = tmp_path / "c.toml"
    copy.write_text(Path(CONFIG).read_text())
    argv = ["design", "budget", str(copy), "--workload", WORKLOAD, "--out", str(copy),
            "--fanouts", "1,2,2,2,3"]  # fmt: skip
    assert main(argv) == 2
    assert "is the config itself: name a new file" in capsys.readouterr().err
