"""The input files, checked before Spark starts: each bad file is named with its reason."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from das.errors import UserError
from das.input.files import check_input_files, data_files
from das.input.report import InputError
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import tiny_input, write_input

CONFIG = ROOT / "configs" / "pl94_2020_production.toml"


def _config(*overrides: str):
    return load_config(CONFIG, overrides=["run.production=false", *overrides])


def _tables() -> tuple[pa.Table, pa.Table]:
    persons, units = tiny_input(seed=1)
    return (
        pa.Table.from_pandas(persons, preserve_index=False),
        pa.Table.from_pandas(units, preserve_index=False),
    )


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    persons, units = tiny_input(seed=1)
    return write_input(tmp_path, persons, units)


def test_a_valid_input_passes(valid):
    check_input_files(_config(), str(valid))


def test_missing_table_is_refused_before_spark(valid):
    (valid / "units.parquet").unlink()
    with pytest.raises(UserError, match=r"^input has no units table: expected .*units\.parquet"):
        check_input_files(_config(), str(valid))


def test_a_uri_is_left_to_spark():
    check_input_files(_config(), "hdfs://namenode:8020/census/in")  # touches no file system


# ---- unreadable files ---------------------------------------------------------------------
def test_truncated_parquet_is_named(valid):
    path = valid / "persons.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        UserError,
        match=rf"^{path}: is truncated: it starts as a Parquet file but its footer is missing "
        rf"\({len(data) // 2} bytes",
    ):
        check_input_files(_config(), str(valid))


def test_text_file_named_parquet_is_named(valid):
    path = valid / "units.parquet"
    path.write_text("unit_id,geoid,gqtype,occupied\n1,440010001001000,0,true\n")
    with pytest.raises(
        UserError,
        match=rf"^{path}: is not a Parquet file \(it does not start with Parquet's magic bytes PAR1\)$",
    ):
        check_input_files(_config(), str(valid))


def test_empty_file_is_named(valid):
    (valid / "units.parquet").write_bytes(b"")
    with pytest.raises(
        UserError, match=r"units\.parquet: is empty \(0 bytes\), not a Parquet file$"
    ):
        check_input_files(_config(), str(valid))


def test_corrupt_footer_is_named(valid):
    path = valid / "units.parquet"
    data = bytearray(path.read_bytes())
    data[-8:-4] = (10**6).to_bytes(4, "little")  # a footer length past the file's start
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match=rf"^{path}: cannot be read as Parquet: "):
        check_input_files(_config(), str(valid))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_named(valid):
    path = valid / "units.parquet"
    path.chmod(0)
    try:
        with pytest.raises(UserError, match=rf"^{path}: cannot be read \(Permission denied\)$"):
            check_input_files(_config(), str(valid))
    finally:
        path.chmod(0o644)


def test_several_problems_are_listed_together(valid):
    (valid / "persons.parquet").write_text("not parquet")
    (valid / "units.parquet").write_bytes(b"")
    with pytest.raises(
        UserError,
        match=r"^2 problems with the input files; nothing was run:\n  .*persons\.parquet: is not",
    ):
        check_input_files(_config(), str(valid))


# ---- a table in several files -------------------------------------------------------------
def _parts(tmp_path: Path, persons: pa.Table, units: pa.Table, *parts: pa.Table) -> Path:
    """``persons/`` holds ``parts`` as part-0, part-1, ...; units is one file."""
    (tmp_path / "persons").mkdir()
    for i, part in enumerate(parts):
        pq.write_table(part, tmp_path / "persons" / f"part-{i}.parquet")
    pq.write_table(units, tmp_path / "units.parquet")
    return tmp_path


def test_parts_with_different_types_are_named_by_file(tmp_path):
    persons, units = _tables()
    half = persons.num_rows // 2
    first = persons.slice(0, half)
    second = persons.slice(half).set_column(
        persons.schema.get_field_index("age"), "age", persons["age"].slice(half).cast(pa.string())
    )
    _parts(tmp_path, persons, units, first, second)
    directory = tmp_path / "persons"
    with pytest.raises(
        UserError,
        match=rf"^{directory}: column 'age' has different types across its files: int32 in "
        rf"{directory}/part-0\.parquet, string in {directory}/part-1\.parquet; every file of a "
        "table must store a column with the same type$",
    ):
        check_input_files(_config("input.persons='persons'"), str(tmp_path))


def test_a_column_missing_from_one_part_is_named(tmp_path):
    persons, units = _tables()
    _parts(
        tmp_path, persons, units, persons.slice(0, 5), persons.slice(5).drop_columns(["cenrace"])
    )
    with pytest.raises(
        UserError,
        match=r"column 'cenrace' is missing from .*part-1\.parquet but present in .*part-0",
    ):
        check_input_files(_config("input.persons='persons'"), str(tmp_path))


def test_hidden_files_are_skipped_like_spark_does(tmp_path):
    persons, units = _tables()
    _parts(tmp_path, persons, units, persons)
    (tmp_path / "persons" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "persons" / ".part-0.parquet.crc").write_bytes(b"crc")
    assert data_files(str(tmp_path / "persons")) == (tmp_path / "persons" / "part-0.parquet",)
    check_input_files(_config("input.persons='persons'"), str(tmp_path))


def test_an_empty_table_directory_is_refused(tmp_path):
    persons, units = _tables()
    _parts(tmp_path, persons, units)
    (tmp_path / "persons" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(
        UserError, match=r"persons: the directory holds no data file \(Spark reads none here\)$"
    ):
        check_input_files(_config("input.persons='persons'"), str(tmp_path))


# ---- names and types ----------------------------------------------------------------------
def test_columns_that_differ_only_by_case_are_refused(tmp_path):
    persons, units = _tables()
    persons = persons.append_column("Age", persons["age"])
    pq.write_table(persons, tmp_path / "persons.parquet")
    pq.write_table(units, tmp_path / "units.parquet")
    with pytest.raises(
        UserError,
        match=rf"^{tmp_path}/persons\.parquet: columns 'age' and 'Age' have the same name ignoring "
        "case, which Spark reads as one name; rename or drop all but one$",
    ):
        check_input_files(_config(), str(tmp_path))


@pytest.mark.parametrize(
    ("column", "arrow", "words"),
    [
        (
            "hispanic",
            pa.float64(),
            "double; persons.hispanic holds booleans, stored as boolean, integer or string",
        ),
        (
            "age",
            pa.timestamp("ms"),
            "timestamp[ms]; persons.age holds integers, stored as "
            "integer, floating, decimal or string",
        ),
        ("geoid", pa.float64(), "double; persons.geoid holds text, stored as string or integer"),
    ],
)
def test_a_column_stored_with_a_refused_type_is_named(tmp_path, column, arrow, words):
    persons, units = _tables()
    index = persons.schema.get_field_index(column)
    if pa.types.is_timestamp(arrow):
        values = pa.array([0] * persons.num_rows, pa.int64()).cast(arrow)
    elif column == "geoid":
        values = pa.array([float(v) for v in persons[column].to_pylist()])
    else:
        values = persons[column].cast(arrow)
    pq.write_table(persons.set_column(index, column, values), tmp_path / "persons.parquet")
    pq.write_table(units, tmp_path / "units.parquet")
    file = tmp_path / "persons.parquet"
    with pytest.raises(
        UserError, match=rf"^{file}: column '{column}' is stored as {re.escape(words)}$"
    ):
        check_input_files(_config(), str(tmp_path))


def test_types_are_checked_under_the_mapped_name(tmp_path):
    persons, units = _tables()
    persons = persons.rename_columns(["AGE" if n == "age" else n for n in persons.schema.names])
    persons = persons.set_column(
        persons.schema.get_field_index("AGE"), "AGE", persons["AGE"].cast(pa.date32())
    )
    pq.write_table(persons, tmp_path / "persons.parquet")
    pq.write_table(units, tmp_path / "units.parquet")
    with pytest.raises(
        UserError, match=r"column 'AGE' is stored as date32\[day\]; persons\.age holds integers"
    ):
        check_input_files(_config("input.columns={age = 'AGE'}"), str(tmp_path))


def test_dictionary_and_large_strings_are_the_same_stored_type(tmp_path):
    persons, units = _tables()
    geoid = persons.schema.get_field_index("geoid")
    first = persons.slice(0, 5)
    first = first.set_column(geoid, "geoid", first["geoid"].dictionary_encode())
    second = persons.slice(5)
    second = second.set_column(geoid, "geoid", second["geoid"].cast(pa.large_string()))
    _parts(tmp_path, persons, units, first, second)
    check_input_files(_config("input.persons='persons'"), str(tmp_path))


# ---- booleans coded as integers -----------------------------------------------------------
def test_booleans_coded_1_2_are_refused_with_count_and_samples(tmp_path):
    persons, units = _tables()
    coded = pa.array([2 if v else 1 for v in persons["hispanic"].to_pylist()], pa.int64())
    persons = persons.set_column(persons.schema.get_field_index("hispanic"), "hispanic", coded)
    pq.write_table(persons, tmp_path / "persons.parquet")
    pq.write_table(units, tmp_path / "units.parquet")
    twos = [
        pid
        for pid, v in zip(persons["person_id"].to_pylist(), coded.to_pylist(), strict=True)
        if v == 2
    ]
    assert twos
    with pytest.raises(InputError) as info:
        check_input_files(_config(), str(tmp_path))
    message = str(info.value)
    assert message.startswith(
        "the input breaks the contract; nothing was run:\n"
        f"  [hispanic-type] {len(twos)} row(s) in persons, column hispanic: expected a boolean: "
        "true/false or 1/0 (as text: true/t/yes/y/1 or false/f/no/n/0, in any case)\n"
        f"      {tmp_path}/persons.parquet: person_id={twos[0]}, hispanic='2'"
    )
    assert message.count("hispanic='2'") == min(len(twos), 5)
    [(rule, count, _)] = info.value.report
    assert (rule.name, count) == ("hispanic-type", len(twos))


def test_booleans_coded_0_1_pass(tmp_path):
    persons, units = _tables()
    for table, column in ((persons, "hispanic"), (units, "occupied")):
        index = table.schema.get_field_index(column)
        coded = table.set_column(index, column, table[column].cast(pa.int8()))
        pq.write_table(coded, tmp_path / f"{'persons' if table is persons else 'units'}.parquet")
    check_input_files(_config(), str(tmp_path))


def test_a_unit_boolean_coded_otherwise_is_refused_across_parts(tmp_path):
    persons, units = _tables()
    index = units.schema.get_field_index("occupied")
    codes = units["occupied"].cast(pa.int32())
    units = units.set_column(index, "occupied", pa.array([-1, *codes.to_pylist()[1:]], pa.int32()))
    pq.write_table(persons, tmp_path / "persons.parquet")
    (tmp_path / "units").mkdir()
    pq.write_table(units.slice(0, 3), tmp_path / "units" / "a.parquet")
    pq.write_table(units.slice(3), tmp_path / "units" / "b.parquet")
    with pytest.raises(
        InputError,
        match=r"\[occupied-type\] 1 row\(s\) in units, column occupied: .*\n"
        r".*units/a\.parquet: unit_id=1, occupied='-1'$",
    ):
        check_input_files(_config("input.units='units'"), str(tmp_path))


# ---- CSV ----------------------------------------------------------------------------------
def _csv(tmp_path: Path) -> Path:
    persons, units = tiny_input(seed=2)
    return write_input(tmp_path, persons, units, fmt="csv")


CSV = ("input.format='csv'", "input.persons='persons.csv'", "input.units='units.csv'")


def test_a_valid_csv_input_passes(tmp_path):
    check_input_files(_config(*CSV), str(_csv(tmp_path)))


def test_csv_header_with_names_equal_ignoring_case_is_refused(tmp_path):
    path = _csv(tmp_path) / "units.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0] + ",GQTYPE", *(line + ",0" for line in lines[1:])]) + "\n")
    with pytest.raises(
        UserError, match=rf"^{path}: columns 'gqtype' and 'GQTYPE' have the same name ignoring case"
    ):
        check_input_files(_config(*CSV), str(tmp_path))


def test_csv_parts_with_different_headers_are_refused(tmp_path):
    persons, units = tiny_input(seed=2)
    (tmp_path / "persons").mkdir()
    persons.iloc[:4].to_csv(tmp_path / "persons" / "part-0.csv", index=False)
    swapped = persons.iloc[4:][["person_id", "unit_id", "geoid", "cenrace", "hispanic", "age"]]
    swapped.to_csv(tmp_path / "persons" / "part-1.csv", index=False)
    units.to_csv(tmp_path / "units.csv", index=False)
    config = _config("input.format='csv'", "input.persons='persons'", "input.units='units.csv'")
    with pytest.raises(
        UserError,
        match=rf"^{tmp_path}/persons/part-1\.csv: its header \(person_id, unit_id, geoid, cenrace, hispanic, age\) "
        rf"differs from that of {tmp_path}/persons/part-0\.csv \(person_id, unit_id, geoid, age, hispanic, cenrace\); "
        "Spark would read every part with the first header, by position",
    ):
        check_input_files(config, str(tmp_path))


def test_csv_that_is_not_text_is_refused(tmp_path):
    path = _csv(tmp_path) / "persons.csv"
    path.write_bytes(b"\xff\xfe\x00binary\x00")
    with pytest.raises(
        UserError,
        match=rf"^{path}: is not a UTF-8 text \(CSV\) file: invalid start byte at byte 0$",
    ):
        check_input_files(_config(*CSV), str(tmp_path))


def test_gzipped_csv_headers_are_read(tmp_path):
    _csv(tmp_path)
    text = (tmp_path / "units.csv").read_text()
    (tmp_path / "units.csv").unlink()
    header = text.partition("\n")[0]
    with gzip.open(tmp_path / "units.csv.gz", "wt") as handle:
        handle.write(f"{header},Occupied\n")
    config = _config(
        "input.format='csv'", "input.persons='persons.csv'", "input.units='units.csv.gz'"
    )
    with pytest.raises(UserError, match=r"units\.csv\.gz: columns 'occupied' and 'Occupied'"):
        check_input_files(config, str(tmp_path))
