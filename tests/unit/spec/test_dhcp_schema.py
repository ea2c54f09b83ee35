"""The DHC persons schema (dhcp_persons.toml) against the 2020 facts of DESIGN.md "DHC-P"."""

import pickle

import numpy as np
import pytest

from das.errors import UserError
from das.spec.schema import load_schema, schema_from_dict

#: The ten 2020 DHC-P queries (canonical factor order) and their sizes.
DHCP_QUERIES = {
    "relgq_4_groups*age_18_64_116": 12,
    "sex*age_18_64_116": 6,
    "sex*age_38_groups": 76,
    "sex*hispanic": 4,
    "relgq_4_groups*sex": 8,
    "gq_constr_groups*age_10_groups": 60,
    "popSehsdTargetsRelship": 19,
    "relship_and_eight_level_GQ*sex*age_40_groups*hispanic*cenrace": 252_000,
    "relgq*sex*age_40_groups*hispanic*cenrace": 423_360,
    "detailed": 1_227_744,
}


@pytest.fixture(scope="module")
def dhcp():
    return load_schema("dhcp_persons")


def test_layout(dhcp):
    assert [a.name for a in dhcp.attributes] == ["relgq", "sex", "age", "hispanic", "cenrace"]
    assert dhcp.shape == (42, 2, 116, 2, 63)
    assert dhcp.size == 1_227_744


def test_the_32_structural_zeros_hold_322560_cells(dhcp):
    assert len(dhcp.structural_zeros) == 32
    assert all(set(zero) == {"relgq", "age"} for zero in dhcp.structural_zeros)
    assert int(dhcp.structural_zero_mask.sum()) == 322_560


def _zero_ages(dhcp):
    """relgq -> the set of ages its structural zeros forbid."""
    found: dict[int, set[int]] = {}
    for zero in dhcp.structural_zeros:
        for r in zero["relgq"]:
            found.setdefault(r, set()).update(zero["age"])
    return found


def _under(n):
    return set(range(n))


def _over(n):
    return set(range(n + 1, 116))


def test_structural_zeros_are_the_2020_rules(dhcp):
    expected = {r: _under(15) for r in range(6)}
    expected |= {r: _over(89) for r in (6, 7, 8)}
    expected |= {10: _under(30), 12: _under(30), 11: _over(74), 13: _under(15) | _over(89)}
    expected |= {16: _over(20), 27: _under(20), 32: _under(3) | _over(30)}
    expected |= {r: _under(15) for r in range(18, 23)}
    expected |= {r: _under(17) | _over(65) for r in (23, 31, 34, 35)}
    expected |= {r: _over(25) for r in (24, 25, 26)}
    expected |= {33: _under(16) | _over(65), 37: _under(16), 38: _under(16)}
    expected |= {39: _under(16) | _over(75)}
    assert _zero_ages(dhcp) == expected


def test_the_zero_mask_is_the_rules_on_every_sex_hispanic_and_race(dhcp):
    cube = dhcp.structural_zero_mask.reshape(dhcp.shape)
    pairs = cube.any(axis=(1, 3, 4))
    assert np.array_equal(pairs, cube.all(axis=(1, 3, 4)))
    for r, ages in _zero_ages(dhcp).items():
        assert set(np.flatnonzero(pairs[r])) == ages


@pytest.mark.parametrize(("name", "size"), DHCP_QUERIES.items())
def test_query_sizes_and_partition(dhcp, name, size):
    query = dhcp.query(name)
    assert query.name == name
    assert query.size == size
    assert query.cell_map.shape == (dhcp.size,)
    assert np.array_equal(np.unique(query.cell_map), np.arange(size))


def test_noisy_cells_per_geounit(dhcp):
    assert sum(DHCP_QUERIES.values()) == 1_903_289


def test_query_answers_match_sums_over_the_cube(dhcp):
    rng = np.random.default_rng(3)
    cells = rng.choice(dhcp.size, 5000, replace=False)
    counts = rng.integers(1, 4, cells.size)
    codes = dhcp.cell_codes(cells)
    relgq, sex, age = codes[:, 0], codes[:, 1], codes[:, 2]
    by_age3 = np.digitize(age, [18, 65])
    got = dhcp.query("sex*age_18_64_116").answer(cells, counts)
    expected = np.bincount(sex * 3 + by_age3, weights=counts, minlength=6)
    assert np.array_equal(got, expected)
    group = np.select([relgq < 2, relgq < 18, relgq < 33], [0, 1, 2], 3)
    got = dhcp.query("relgq_4_groups*age_18_64_116").answer(cells, counts)
    assert np.array_equal(got, np.bincount(group * 3 + by_age3, weights=counts, minlength=12))


def test_recodes_are_the_2020_ones(dhcp):
    g = dhcp.groupings
    assert [len(g[n].groups) for n in ("age_38_groups", "age_40_groups", "age_10_groups")] == [
        38,
        40,
        10,
    ]
    assert g["age_38_groups"].groups[15] == (15, 16, 17)
    assert g["age_38_groups"].groups[-1] == tuple(range(110, 116))
    assert g["age_40_groups"].groups[17] == (17,)
    assert g["age_10_groups"].groups[-1] == tuple(range(35, 116))
    assert g["gq_constr_groups"].groups == (
        tuple(range(18)),
        (32,),
        (18, 19, 20, 21, 22),
        (33, 37, 38, 39, 40, 41),
        (23, 31, 34, 35),
        (24, 25, 26, 27, 28, 29, 30, 36),
    )
    assert g["relship_and_eight_level_GQ"].groups[18:] == (
        tuple(range(18, 24)),
        (24, 25, 26),
        (27,),
        tuple(range(28, 33)),
        (33,),
        (34, 35),
        tuple(range(36, 42)),
    )


def test_relgq_lives_in_the_pl94_unit_types(dhcp):
    types = dhcp.unit_type_of_levels()
    assert types == tuple([0] * 18 + [1] * 6 + [2] * 3 + [3] + [4] * 5 + [5] + [6] * 2 + [7] * 6)
    assert load_schema("pl94_persons").unit_type_of_levels() == tuple(range(8))
    gq_pl = next(c for c in dhcp.output if c.name == "GQTYPE_PL")
    assert gq_pl.values == types


def test_output_columns_keep_the_pl94_ones(dhcp):
    names = [c.name for c in dhcp.output]
    pl94 = [c.name for c in load_schema("pl94_persons").output]
    assert names[: len(pl94)] == pl94
    assert names[len(pl94) :] == ["GQTYPE", "RELSHIP", "QSEX", "QAGE", "LIVE_ALONE"]
    qage = next(c for c in dhcp.output if c.name == "QAGE")
    assert qage.values == tuple(range(116))


def _facility_schema(**facilities):
    return {
        "name": "toy",
        "attributes": [
            {"name": "kind", "source": "gqtype", "recode": "identity", "levels": ["a", "b", "c"]}
        ],
        "facilities": facilities,
    }


def test_facility_types_must_cover_the_levels():
    with pytest.raises(UserError, match=r"facilities\.unit_types must give a unit type"):
        schema_from_dict(_facility_schema(attribute="kind", unit_types=[0, 1]))
    with pytest.raises(UserError, match=r"unknown key\(s\) \['types'\]"):
        schema_from_dict(_facility_schema(attribute="kind", types=[0, 1, 1]))
    toy = schema_from_dict(_facility_schema(attribute="kind", unit_types=[0, 1, 1]))
    assert toy.unit_type_of_levels() == (0, 1, 1)


def test_a_pickled_schema_leaves_its_derived_arrays_behind(dhcp):
    """Spark ships the schema to its tasks: not the queries and mask it built (MBs each)."""
    dhcp.query("detailed")
    assert dhcp.structural_zero_mask.size == dhcp.size
    data = pickle.dumps(dhcp)
    assert len(data) < 100_000
    copy = pickle.loads(data)
    assert copy == dhcp
    assert np.array_equal(copy.query("detailed").cell_map, dhcp.query("detailed").cell_map)
    assert int(copy.structural_zero_mask.sum()) == 322_560
