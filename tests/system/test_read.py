"""The reader on Spark: histograms at every level equal the input exactly; bad input is reported."""

from __future__ import annotations

import numpy as np
import pytest

from das.errors import UserError
from das.input.check import InputCounts, InputError, check_input
from das.input.read import read_histograms
from das.input.tables import load_tables
from das.spec.config import load_config
from das.spec.schema import schema_from_dict
from tests.conftest import ROOT
from tests.helpers import CSV_INPUT, tiny_input, write_input

pytestmark = pytest.mark.spark
CONFIG = ROOT / "configs" / "pl94_2020_production.toml"


@pytest.fixture(scope="module")
def config():
    return load_config(CONFIG, overrides=["run.production=false", "spark.shuffle_partitions=3"])


def _collect(level_histograms):
    rows = level_histograms.frame.collect()
    return {
        r["geocode"]: (
            np.array(r["cells"], dtype=np.int64),
            np.array(r["counts"], dtype=np.int64),
            np.array(r["units"], dtype=np.int64),
        )
        for r in rows
    }


def test_histograms_reproduce_the_input_at_every_level(spark, config, tmp_path):
    persons, units = tiny_input(seed=3)
    levels = read_histograms(spark, config, str(write_input(tmp_path, persons, units)))
    schema = config.schema
    gq = units.set_index("unit_id")["gqtype"].loc[persons["unit_id"]].to_numpy()
    codes = np.stack(
        [
            gq,
            (persons["age"] >= 18).astype(int),
            persons["hispanic"].astype(int),
            persons["cenrace"] - 1,
        ],
        axis=1,
    )
    person_cells = schema.cell_index(codes)
    for level in config.geography.levels:
        got = _collect(levels[level.name])
        key = persons["geoid"].str[: level.length]
        unit_key = units["geoid"].str[: level.length]
        assert set(got) == set(key) | set(unit_key)
        for geocode, (cells, counts, unit_counts) in got.items():
            expected = np.bincount(person_cells[(key == geocode).to_numpy()], minlength=schema.size)
            dense = np.zeros(schema.size, dtype=np.int64)
            dense[cells] = counts
            assert np.array_equal(dense, expected), (level.name, geocode)
            assert np.all(counts > 0) and np.all(np.diff(cells) > 0)
            here = units[(unit_key == geocode).to_numpy()]
            counted = here[(here["gqtype"] == 0) | here["occupied"]]
            assert unit_counts.tolist() == np.bincount(counted["gqtype"], minlength=8).tolist()
        assert sum(c.sum() for _, c, _ in got.values()) == len(persons)


def test_csv_input_and_column_mapping(spark, config, tmp_path):
    persons, units = tiny_input(seed=4)
    persons = persons.rename(columns={"geoid": "GEOID"})
    write_input(tmp_path, persons, units, fmt="csv")
    mapped = load_config(
        CONFIG,
        overrides=["run.production=false", *CSV_INPUT, "input.columns={geoid = 'GEOID'}"],
    )
    with pytest.raises(UserError, match=r"units.csv: missing column\(s\) geoid \(column 'GEOID'\)"):
        # the units table still says "geoid": one mapping applies to both tables
        read_histograms(spark, mapped, str(tmp_path))
    units = units.rename(columns={"geoid": "GEOID"})
    write_input(tmp_path, persons, units, fmt="csv")
    levels = read_histograms(spark, mapped, str(tmp_path))
    total = levels["us"].frame.collect()[0]
    assert sum(total["counts"]) == len(persons)


BAD_CASES = [
    (
        "geoid-format",
        "persons",
        lambda p, u: p.assign(geoid=p["geoid"].where(p.index != 0, "4400100010")),
        "4400100010",
    ),
    (
        "geoid-format",
        "units",
        lambda p, u: u.assign(geoid=u["geoid"].where(u.index != 0, "44001000100X000")),
        "44001000100X000",
    ),
    ("age-domain", "persons", lambda p, u: p.assign(age=p["age"].where(p.index != 1, 130)), "130"),
    (
        "cenrace-domain",
        "persons",
        lambda p, u: p.assign(cenrace=p["cenrace"].where(p.index != 2, 64)),
        "64",
    ),
    (
        "gqtype-domain",
        "units",
        lambda p, u: u.assign(gqtype=u["gqtype"].where(u.index != 0, 9)),
        "9",
    ),
    (
        "null-age",
        "persons",
        lambda p, u: p.assign(age=p["age"].astype("Int32").where(p.index != 0, None)),
        "None",
    ),
    (
        "age-type",
        "persons",
        lambda p, u: p.assign(age=p["age"].astype(float).where(p.index != 0, 30.5)),
        "30.5",
    ),
    (  # stored as an integer already, but too large for the contract's int
        "age-type",
        "persons",
        lambda p, u: p.assign(age=p["age"].astype("int64").where(p.index != 0, 2**40)),
        str(2**40),
    ),
    (
        "duplicate-unit-id",
        "units",
        lambda p, u: u.assign(unit_id=u["unit_id"].where(u.index != 1, u["unit_id"][0])),
        None,
    ),
    (
        "duplicate-person-id",
        "persons",
        lambda p, u: p.assign(person_id=p["person_id"].where(p.index != 1, 1)),
        None,
    ),
    (
        "unknown-unit",
        "persons",
        lambda p, u: p.assign(unit_id=p["unit_id"].where(p.index != 0, 99999)),
        "99999",
    ),
    (
        "geoid-differs-from-unit",
        "persons",
        lambda p, u: p.assign(geoid=p["geoid"].where(p.index != 0, "440990000000000")),
        "440990000000000",
    ),
]


@pytest.mark.parametrize(
    ("rule", "table", "break_it", "value"), BAD_CASES, ids=[c[0] + "-" + c[1] for c in BAD_CASES]
)
def test_each_bad_input_rule_is_reported(spark, config, tmp_path, rule, table, break_it, value):
    persons, units = tiny_input(seed=5)
    if table == "persons":
        persons = break_it(persons, units)
    else:
        units = break_it(persons, units)
    write_input(tmp_path, persons, units)
    with pytest.raises(InputError) as info:
        read_histograms(spark, config, str(tmp_path))
    broken = {(r.name, r.table): count for r, count, _ in info.value.report}
    assert (rule, table) in broken
    message = str(info.value)
    assert f"[{rule}]" in message and f"{table}.parquet" in message
    if value is not None:
        assert value in message


@pytest.mark.parametrize("stored", ["boolean", "text"])
def test_vacancy_rules(spark, config, tmp_path, stored):
    """The same rows are refused whether the files store booleans or their text."""
    persons, units = tiny_input(seed=6)
    occupied_hu = units[(units["gqtype"] == 0) & units["occupied"]].index[0]
    vacant_hu = units[(units["gqtype"] == 0) & ~units["occupied"]].index[0]
    units.loc[occupied_hu, "occupied"] = False
    units.loc[vacant_hu, "occupied"] = True
    if stored == "text":
        units["occupied"] = np.where(units["occupied"], "Yes", "n")
        persons["hispanic"] = np.where(persons["hispanic"], "TRUE", "0")
    write_input(tmp_path, persons, units)
    with pytest.raises(InputError) as info:
        read_histograms(spark, config, str(tmp_path))
    assert sorted((r.name, n) for r, n, _ in info.value.report) == [
        ("occupied-unit-without-residents", 1),
        (
            "person-in-vacant-unit",
            int((persons["unit_id"] == units.loc[occupied_hu, "unit_id"]).sum()),
        ),
    ]


def test_missing_units_table(spark, config, tmp_path):
    persons, units = tiny_input(seed=7)
    write_input(tmp_path, persons, units)
    (tmp_path / "units.parquet").unlink()
    with pytest.raises(UserError, match="input has no units table"):
        read_histograms(spark, config, str(tmp_path))


# ---- values no cast may pass silently -----------------------------------------------------
def test_booleans_coded_1_2_are_refused_not_cast_to_true(spark, config, tmp_path):
    """The MDF codes Hispanic origin 1/2: a cast would make everyone Hispanic."""
    persons, units = tiny_input(seed=8)
    persons["hispanic"] = np.where(persons["hispanic"], 2, 1)
    write_input(tmp_path, persons, units)
    with pytest.raises(InputError) as info:
        read_histograms(spark, config, str(tmp_path))
    twos = persons.loc[persons["hispanic"] == 2, "person_id"]
    assert [(r.name, n) for r, n, _ in info.value.report] == [("hispanic-type", len(twos))]
    first_key = min(twos.astype(str))  # samples come in key order, as text
    first = f"{tmp_path}/persons.parquet: person_id={first_key}, hispanic='2'"
    assert str(info.value).startswith(
        "the input breaks the contract; nothing was run:\n"
        f"  [hispanic-type] {len(twos)} row(s) in persons, column hispanic: expected a boolean: "
        f"true/false or 1/0 (as text: true/t/yes/y/1 or false/f/no/n/0, in any case)\n      {first}"
    )


def test_a_minor_in_a_nursing_facility_is_refused(spark, config, tmp_path):
    persons, units = tiny_input(seed=9)
    facility = units.loc[units["gqtype"] > 0, "unit_id"].iloc[0]
    units.loc[units["unit_id"] == facility, "gqtype"] = 3
    residents = persons.index[persons["unit_id"] == facility]
    persons.loc[residents, "age"] = 40
    persons.loc[residents[0], "age"] = 12
    write_input(tmp_path, persons, units)
    with pytest.raises(InputError) as info:
        read_histograms(spark, config, str(tmp_path))
    assert [(r.name, n) for r, n, _ in info.value.report] == [("structural-zero-hhgq-votingage", 1)]
    pid = persons.loc[residents[0], "person_id"]
    assert str(info.value).endswith(
        "  [structural-zero-hhgq-votingage] 1 row(s) in persons, columns gqtype, age: expected a "
        "record outside the structural zero of schema 'pl94_persons': no record has hhgq=nursing "
        "(gqtype 3) and votingage=under_18 (age 0..17)\n"
        f"      {tmp_path}/persons.parquet: person_id={pid}, gqtype='3', age='12'"
    )


def test_a_toy_schema_gets_its_own_zero_rules(spark, config, tmp_path):
    """Zeros come from the schema: Hispanic White alone on persons; occupied housing units on
    a units schema whose filter keeps housing units only (occupied GQ facilities pass)."""
    persons, units = tiny_input(seed=10)
    persons.loc[persons["cenrace"] == 1, "hispanic"] = False
    persons.loc[0, ["hispanic", "cenrace"]] = [True, 1]
    write_input(tmp_path, persons, units)
    tables = load_tables(spark, config, str(tmp_path))
    on_persons = schema_from_dict(
        {
            "name": "toy_persons",
            "attributes": [
                {"name": "hispanic", "source": "hispanic", "recode": "bool", "levels": ["n", "y"]},
                {
                    "name": "race",
                    "source": "cenrace",
                    "recode": "offset",
                    "offset": 1,
                    "levels": "cenrace63",
                },
            ],
            "structural_zeros": [{"hispanic": [1], "race": [0]}],
        }
    )
    with pytest.raises(InputError) as info:
        check_input(tables, on_persons)
    assert [(r.name, n) for r, n, _ in info.value.report] == [("structural-zero-hispanic-race", 1)]
    on_units = schema_from_dict(
        {
            "name": "toy_units",
            "record": "units",
            "filter": {"gqtype": [0]},
            "attributes": [
                {"name": "occupancy", "source": "occupied", "recode": "bool", "levels": ["v", "o"]},
            ],
            "structural_zeros": [{"occupancy": [1]}],
        }
    )
    occupied_housing = int(((units["gqtype"] == 0) & units["occupied"]).sum())
    assert 0 < occupied_housing < int(units["occupied"].sum())
    with pytest.raises(InputError) as info:
        check_input(tables, on_units)
    assert [(r.name, n) for r, n, _ in info.value.report] == [
        ("structural-zero-occupancy", occupied_housing)
    ]


# ---- what the check costs and counts --------------------------------------------------------
def test_a_clean_input_is_counted_by_one_spark_action(spark, config, tmp_path, monkeypatch):
    """Both tables' rows and every rule come back from one action: no count, no isEmpty,
    no sample fetched."""
    persons, units = tiny_input(seed=11)
    write_input(tmp_path, persons, units)
    tables = load_tables(spark, config, str(tmp_path))
    actions: list[str] = []
    frames = type(tables.persons)  # the session's DataFrame class (pyspark's classic one)
    for name in ("collect", "count", "isEmpty", "first", "take", "toArrow", "toPandas"):
        method = getattr(frames, name)
        monkeypatch.setattr(
            frames,
            name,
            lambda self, *a, _n=name, _m=method, **k: actions.append(_n) or _m(self, *a, **k),
        )
    assert check_input(tables, config.schema) == InputCounts(len(persons), len(units))
    assert actions == ["collect"]


def test_repeated_keys_count_every_copy_and_no_null(spark, config, tmp_path):
    """A key rule counts each row whose key another row holds too (three copies: three rows);
    a null key is the null rule's, not a repeat."""
    persons, units = tiny_input(seed=12)
    persons["person_id"] = persons["person_id"].astype("Int64")
    persons.loc[[1, 2], "person_id"] = persons.loc[0, "person_id"]  # three rows with one id
    persons.loc[4, "person_id"] = persons.loc[3, "person_id"]  # two with another
    persons.loc[[6, 7], "person_id"] = None
    units.loc[1, "unit_id"] = units.loc[0, "unit_id"]
    write_input(tmp_path, persons, units)
    tables = load_tables(spark, config, str(tmp_path))
    with pytest.raises(InputError) as info:
        check_input(tables, config.schema)
    counts = {r.name: n for r, n, _ in info.value.report}
    assert counts["null-person_id"] == 2
    assert counts["duplicate-person-id"] == 5
    assert counts["duplicate-unit-id"] == 2
    path = f"{tmp_path}/persons.parquet"
    ids = [persons.loc[0, "person_id"]] * 3 + [persons.loc[3, "person_id"]] * 2
    samples = next(s for r, _, s in info.value.report if r.name == "duplicate-person-id")
    assert samples == [f"{path}: person_id={i}" for i in sorted(ids, key=str)]
