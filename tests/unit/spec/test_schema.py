import numpy as np
import pytest
import scipy.sparse as sp

from das.errors import UserError
from das.spec.cenrace import cenrace_combinations
from das.spec.schema import load_schema, schema_from_dict, shipped_schemas

PL94_QUERIES = [
    "total",
    "hhgq",
    "hhinstlevels",
    "votingage",
    "hispanic",
    "cenrace",
    "hispanic*cenrace",
    "votingage*cenrace",
    "votingage*hispanic",
    "votingage*hispanic*cenrace",
    "detailed",
]


@pytest.fixture(scope="module")
def persons():
    return load_schema("pl94_persons")


def test_shipped_schemas():
    assert {"pl94_persons", "h1_units"} <= set(shipped_schemas())
    assert load_schema("h1_units").size == 2


def test_persons_layout(persons):
    assert persons.shape == (8, 2, 2, 63)
    assert persons.size == 2016


def test_cenrace_codes_follow_the_2020_order():
    combos = cenrace_combinations()
    assert len(combos) == 63
    assert combos[:6] == [(i,) for i in range(6)]  # codes 1-6: one race
    assert combos[6] == (0, 1)  # code 7: White and Black
    assert combos[20] == (4, 5)  # code 21: NHPI and SOR (last two-race)
    assert combos[-1] == (0, 1, 2, 3, 4, 5)  # code 63: all six


@pytest.mark.parametrize("name", PL94_QUERIES)
def test_every_query_partitions_the_cells(persons, name):
    query = persons.query(name)
    dense = query.matrix.toarray()
    assert set(np.unique(dense)) <= {0.0, 1.0}
    assert np.all(dense.sum(axis=0) == 1)


def test_query_sizes(persons):
    sizes = {n: persons.query(n).size for n in PL94_QUERIES}
    assert sizes == {
        "total": 1,
        "hhgq": 8,
        "hhinstlevels": 3,
        "votingage": 2,
        "hispanic": 2,
        "cenrace": 63,
        "hispanic*cenrace": 126,
        "votingage*cenrace": 126,
        "votingage*hispanic": 4,
        "votingage*hispanic*cenrace": 252,
        "detailed": 2016,
    }


def test_marginal_answers_match_a_dense_sum(persons):
    rng = np.random.default_rng(1)
    hist = rng.poisson(0.3, persons.size)
    cube = hist.reshape(persons.shape)
    cells = np.flatnonzero(hist)
    q = persons.query("votingage*cenrace")
    expected = cube.sum(axis=(0, 2)).ravel()
    assert np.array_equal(q.matrix @ hist, expected)
    assert np.array_equal(q.answer(cells, hist[cells]), expected)
    inst = persons.query("hhinstlevels").answer(cells, hist[cells])
    by_hhgq = cube.sum(axis=(1, 2, 3))
    assert inst.tolist() == [by_hhgq[0], by_hhgq[1:5].sum(), by_hhgq[5:].sum()]


def test_factor_order_is_canonical(persons):
    assert persons.query("cenrace*votingage").name == "votingage*cenrace"


def test_structural_zero_is_nursing_under_18(persons):
    mask = persons.structural_zero_mask
    codes = persons.cell_codes(np.flatnonzero(mask))
    assert mask.sum() == 126
    assert set(codes[:, 0]) == {3} and set(codes[:, 1]) == {0}


def test_cell_index_round_trip(persons):
    cells = np.arange(persons.size)
    assert np.array_equal(persons.cell_index(persons.cell_codes(cells)), cells)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("votingage*age", "unknown factor 'age'"),
        ("hhgq*hhinstlevels", "uses attribute 'hhgq' twice"),
    ],
)
def test_bad_query_names(persons, name, message):
    with pytest.raises(UserError, match=message):
        persons.query(name)


def toy_schema_dict():
    """A third schema built from data alone: no engine change needed."""
    return {
        "name": "toy",
        "record": "persons",
        "attributes": [
            {
                "name": "size",
                "source": "age",
                "recode": "cut",
                "cuts": [10, 60],
                "valid_range": [0, 115],
                "levels": ["small", "medium", "large"],
            },
            {"name": "flag", "source": "hispanic", "recode": "bool", "levels": ["no", "yes"]},
        ],
        "groupings": {
            "big": {"attribute": "size", "groups": [[0], [1, 2]], "labels": ["small", "big"]}
        },
        "structural_zeros": [{"size": [0], "flag": [1]}],
    }


def test_toy_schema_from_data_only():
    toy = schema_from_dict(toy_schema_dict())
    assert toy.size == 6
    assert toy.query("big*flag").matrix.toarray().tolist() == [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 1, 0],
        [0, 0, 0, 1, 0, 1],
    ]
    assert toy.structural_zero_mask.tolist() == [False, True, False, False, False, False]


def test_grouping_must_partition():
    data = toy_schema_dict()
    data["groupings"]["big"]["groups"] = [[0], [1]]
    with pytest.raises(UserError, match="must partition the levels"):
        schema_from_dict(data)


def test_unknown_recode_and_key():
    data = toy_schema_dict()
    data["attributes"][1]["recode"] = "magic"
    with pytest.raises(UserError, match="unknown recode 'magic'; allowed"):
        schema_from_dict(data)
    data = toy_schema_dict()
    data["colour"] = "blue"
    with pytest.raises(UserError, match="unknown schema key"):
        schema_from_dict(data)


def _kronecker(schema, query):
    """The query's matrix as the Kronecker product over attributes (the definition)."""
    matrix = sp.csr_matrix(np.ones((1, 1)))
    chosen = {
        (schema.groupings[f].attribute if f in schema.groupings else f): f for f in query.factors
    }
    for a in schema.attributes:
        factor = chosen.get(a.name)
        if factor is None:
            block = sp.csr_matrix(np.ones((1, a.size)))
        elif factor in schema.groupings:
            group = schema.groupings[factor].group_of(a.size)
            ones = (np.ones(a.size), (group, np.arange(a.size)))
            block = sp.csr_matrix(ones, shape=(len(schema.groupings[factor].groups), a.size))
        else:
            block = sp.identity(a.size, format="csr")
        matrix = sp.kron(matrix, block, format="csr")
    return matrix


@pytest.mark.parametrize("name", PL94_QUERIES)
def test_matrix_from_the_index_equals_the_kronecker_product(persons, name):
    """The matrix built from ``cell_map`` is the Kronecker product, entry for entry and in
    the same stored order (so products with it sum in the same order)."""
    query = persons.query(name)
    expected = _kronecker(persons, query)
    assert query.matrix.shape == expected.shape
    assert np.array_equal(query.matrix.indptr, expected.indptr)
    assert np.array_equal(query.matrix.indices, expected.indices)
    assert np.array_equal(query.matrix.data, expected.data)


def test_a_query_is_built_once_per_schema(persons):
    first = persons.query("votingage*cenrace")
    assert persons.query("votingage*cenrace") is first
    other_order = persons.query("cenrace*votingage")
    assert other_order.cell_map is first.cell_map
    assert other_order.factors == ("cenrace", "votingage")
    assert not first.cell_map.flags.writeable


def test_report_queries_must_be_queries_of_the_schema():
    data = toy_schema_dict()
    data["report"] = ["big*flag", "total"]
    assert schema_from_dict(data).report == ("big*flag", "total")
    data["report"] = ["big*colour"]
    with pytest.raises(UserError, match="colour"):
        schema_from_dict(data)
