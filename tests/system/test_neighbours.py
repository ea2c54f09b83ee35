"""Neighbouring inputs whose noisy answers are all the same: the console and the public
outputs must be the same too (issue 57's audit).

Two pairs, each the smallest that shows it: the demo job (persons) on a tiny input and the
same input with one vacant housing unit more (in a block that has housing units already:
the unit types a block has, which ``invariants/`` publishes, are unchanged); and the
housing-unit product (H1) on that input and on one with a person fewer (from a unit that
keeps another: occupancy is unchanged). With one seed, every noisy answer is the same, so
whatever differs is a leak: a count of input rows on stderr, a timing in the certificate
or in ``levels/``. The console is compared after masking durations and paths, and without
the periodic progress lines (their number depends on the clock); the public files byte
for byte, but for the certificate's ``created`` and the random part of the names Spark
gives its files.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pandas as pd
import pytest

from das.job.cli import main
from das.logs import CONFIDENTIAL
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

pytestmark = pytest.mark.spark

DEMO = [str(ROOT / "configs" / "demo.toml"), "--set", "spark.shuffle_partitions=2"]
H1 = [
    str(ROOT / "configs" / "h1_2020_production.toml"),
    "--set", "run.production=false",
    "--set", "spark.shuffle_partitions=2",
]  # fmt: skip
#: A progress line the watcher prints every few seconds: how many depends on the clock.
TICK = re.compile(r"^[^:]+: [\d,]+/[\d,]+ \w+, elapsed ")
DURATION = re.compile(r"\b\d+(h\d+m|m\d+s|s)\b")
SPARK_NAME = re.compile(r"-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")


def _with_vacant_unit(units: pd.DataFrame) -> pd.DataFrame:
    housing = units[units["gqtype"] == 0]
    block = housing["geoid"].iloc[0]
    extra = pd.DataFrame(
        {"unit_id": [units["unit_id"].max() + 1], "geoid": [block], "gqtype": [0],
         "occupied": [False]}
    ).astype(units.dtypes.to_dict())  # fmt: skip
    return pd.concat([units, extra], ignore_index=True)


def _without_a_person(persons: pd.DataFrame) -> pd.DataFrame:
    sizes = persons.groupby("unit_id")["person_id"].transform("size")
    leaving = persons.index[sizes > 1][0]
    return persons.drop(index=leaving).reset_index(drop=True)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("neighbours")
    persons, units = tiny_input(seed=3, blocks=12)
    return {
        "base": write_input(root / "base", persons, units),
        "vacant": write_input(root / "vacant", persons, _with_vacant_unit(units)),
        "fewer": write_input(root / "fewer", _without_a_person(persons), units),
    }


def _run(config: list[str], input_dir: Path, root: Path, capsys, caplog) -> tuple[Path, list[str]]:
    """``das run`` in this process (the session's Spark); its console lines, masked."""
    caplog.clear()
    capsys.readouterr()
    output = root / "run"
    with caplog.at_level(logging.INFO):
        code = main(["run", *config, "--input", str(input_dir), "--output", str(output),
                     "--seed", "5"])  # fmt: skip
    assert code == 0
    out, err = capsys.readouterr()
    # pytest also hooks its capture onto loggers that do not propagate, such as the
    # confidential one (das.logs), which no console handler of the command ever sees
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("das") and not r.name.startswith(CONFIDENTIAL)
    ]
    lines = [*logged, *err.splitlines(), *out.splitlines()]
    masked = [
        DURATION.sub("<t>", line.replace(str(root), "<root>").replace(str(input_dir), "<in>"))
        for line in lines
        if not TICK.match(line)
    ]
    return output, masked


def _public(output: Path) -> dict[str, bytes]:
    """Every public file's bytes, by its name without Spark's random part; the
    certificate without ``created``."""
    found = {}
    for path in sorted(output.rglob("*")):
        if not path.is_file() or path.name.endswith(".crc"):
            continue  # Hadoop's checksums follow the bytes compared here
        data = path.read_bytes()
        if path.name == "certificate.json":
            document = json.loads(data)
            document.pop("created")
            data = json.dumps(document).encode()
        elif path.name == "certificate.md":
            data = re.sub(rb"Created [^;]+;", b"Created <t>;", data)
        found[SPARK_NAME.sub("", path.relative_to(output).as_posix())] = data
    return found


@pytest.mark.parametrize(
    ("config", "neighbour"), [(DEMO, "vacant"), (H1, "fewer")], ids=["persons", "units"]
)
def test_neighbours_with_the_same_noise_look_the_same_from_outside(
    spark, inputs, tmp_path, capsys, caplog, config, neighbour
):
    first, said = _run(config, inputs["base"], tmp_path / "a", capsys, caplog)
    second, said_too = _run(config, inputs[neighbour], tmp_path / "b", capsys, caplog)
    assert said_too == said
    assert any(line.startswith("das run ") for line in said)  # the summary was compared too
    mine, theirs = _public(first), _public(second)
    assert sorted(theirs) == sorted(mine)
    differing = [name for name in mine if mine[name] != theirs[name]]
    assert differing == []
    # and the confidential directories do tell them apart (the rows read)
    log = (tmp_path / "a" / "run-confidential" / "run.log").read_text()
    assert log != (tmp_path / "b" / "run-confidential" / "run.log").read_text()
