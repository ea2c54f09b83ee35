from fractions import Fraction
from pathlib import Path

import pytest

from das.errors import UserError
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = ROOT / "configs" / "pl94_2020_production.toml"


def test_production_config_budget_sums_exactly():
    config = load_config(PRODUCTION)
    assert config.budget.rho == Fraction(542, 339) ** 2
    assert config.budget.total_rho() == config.budget.rho
    assert config.geography.names == ["us", "state", "county", "tract", "block_group", "block"]
    assert config.budget.level_shares["state"] == Fraction(1440, 4099)
    assert "total" not in [q.name for q in config.queries["us"]]
    assert config.passes[0] == ("total",)
    assert config.production and config.seed is None


def test_production_refuses_a_seed():
    with pytest.raises(UserError, match="production = true refuses a fixed seed"):
        load_config(PRODUCTION, seed=7)


def test_override_sets_an_exact_value():
    config = load_config(PRODUCTION, overrides=["budget.rho=1/2"])
    assert config.budget.rho == Fraction(1, 2)
    assert config.budget.total_rho() == Fraction(1, 2)


def _write(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(PRODUCTION.read_text() + text)
    return path


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("budget.rhoo=1", r"budget.rhoo=1: unknown key"),
        ("budget.rho=abc", r"budget.rho=abc: expected an exact number"),
        ("budget.geolevels.block=1/4099", r"budget.geolevels: shares must sum to exactly 1"),
        ("run.production=yes", r"run.production=yes: Input should be a valid boolean"),
        (
            "postprocess.rounder=highs",
            r"invalid configuration\n  --set postprocess\.rounder=highs: unknown key",
        ),
        (
            "geography.levels=[['us', 0], ['state', 2], ['county', 2], ['block', 15]]",
            "increase strictly",
        ),
        ("strategy.passes=[['total']]", r"strategy.passes: measured queries .* are in no pass"),
        ("budget.queries.state.age=1", r"budget.queries.state.age: .*unknown factor 'age'"),
        ("run.schema=nope", r"unknown schema 'nope'"),
    ],
)
def test_bad_values_name_the_flag_key_and_expectation(override, message):
    """An error that ``--set`` caused names the flag, not the file (which the flag changed);
    where the message names no key, it names the file and the flags."""
    with pytest.raises(UserError, match=message) as info:
        load_config(PRODUCTION, overrides=[override])
    assert f"--set {override}" in str(info.value)


def test_a_bad_value_in_the_file_names_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(PRODUCTION.read_text().replace('rho = "293764/114921"', 'rho = "1/0"', 1))
    message = r"c.toml: invalid configuration\n  budget.rho: expected a fraction with a nonzero "
    with pytest.raises(UserError, match=message + r"denominator, got '1/0'$"):
        load_config(path)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nname=1")
    with pytest.raises(UserError, match="not valid TOML"):
        load_config(bad)


def test_bad_override_syntax():
    with pytest.raises(UserError, match="expected key=value"):
        load_config(PRODUCTION, overrides=["budget.rho"])


# ---- shares on invariant answers ----------------------------------------------------------
CENSUS = ROOT / "configs" / "pl94_2020_census.toml"


def test_a_share_on_the_invariant_state_total_is_refused_naming_file_key_and_ways_out():
    """The 2020 config without its opt-in: the state total is invariant (state level)."""
    with pytest.raises(UserError) as info:
        load_config(CENSUS, overrides=["budget.spend_on_invariants={}"])
    assert str(info.value) == (
        "--set budget.spend_on_invariants={}: budget.queries.state.total = 3773/4097: the "
        "answer is invariant at level "
        "state (strategy.invariants.total = 'state' holds the total exact at us, state), so "
        "this share (rho 177339451520/214437516707 ~ 0.827, 5433120/16793603 of the run's "
        "rho) buys a measurement that is drawn, published and never used.\n"
        "Either remove the entry and give its share to the level's other queries (each "
        "budget.queries.<level> must still sum to exactly 1), or, to spend it anyway (as the "
        '2020 production run did), say so: budget.spend_on_invariants = { state = ["total"] }'
    )


def test_the_total_is_invariant_only_from_the_root_down_to_the_configured_level():
    # held exact down to the county: the county total of the production config is refused
    with pytest.raises(UserError, match=r"budget\.queries\.county\.total = 1/2: the answer is"):
        load_config(PRODUCTION, overrides=["strategy.invariants.total='county'"])
    # held exact at the US only: the census config's state total is used, its opt-in refused
    with pytest.raises(
        UserError,
        match=r"budget\.spend_on_invariants\.state names 'total', whose answer is not invariant",
    ):
        load_config(CENSUS, overrides=["strategy.invariants.total='us'"])
    free = load_config(
        CENSUS, overrides=["strategy.invariants={}", "budget.spend_on_invariants={}"]
    )
    assert free.budget.spent_without_use() == ()


def test_the_opt_in_is_a_table_of_lists_and_is_recorded_in_the_budget():
    config = load_config(CENSUS)
    assert config.file.budget.spend_on_invariants == {"state": ["total"]}
    assert config.budget.spent_without_use() == (("state", "total"),)
    with pytest.raises(UserError, match=r"budget\.spend_on_invariants=true: Input should be"):
        load_config(CENSUS, overrides=["budget.spend_on_invariants=true"])


def test_postprocess_target_defaults_to_the_measurements_and_refuses_other_names(tmp_path):
    """An older config without the key keeps its meaning (the measurements); the key takes
    "blue" or "measurements" and nothing else."""
    text = PRODUCTION.read_text()
    old = tmp_path / "old.toml"
    old.write_text(text.replace('target = "blue"', ""))
    assert load_config(old).file.postprocess.target == "measurements"
    blue = load_config(PRODUCTION, overrides=["postprocess.target='blue'"])
    assert blue.file.postprocess.target == "blue"
    with pytest.raises(UserError) as info:
        load_config(PRODUCTION, overrides=["postprocess.target='best'"])
    assert str(info.value).endswith(
        "invalid configuration\n  --set postprocess.target='best': Input should be 'blue' or "
        "'measurements' (got 'best')"
    )


def test_a_sparse_run_refuses_the_blue_as_its_target():
    """A sparse run measures each geounit on its parent's support only; the BLUE needs
    every row of every query, so the two are refused together, whichever key says so."""
    dhc = ROOT / "configs" / "dhcp_production.toml"
    assert load_config(dhc).file.strategy.sparse
    with pytest.raises(UserError) as info:
        load_config(dhc, overrides=["postprocess.target='blue'"])
    assert str(info.value) == (
        "--set postprocess.target='blue': strategy.sparse = true needs postprocess.target = "
        '"measurements": a sparse run measures each geounit only on the rows its parent\'s '
        "solution reaches, and the BLUE (estimates/) needs every row of every query"
    )
    with pytest.raises(UserError, match=r"^--set strategy\.sparse=true: strategy\.sparse = true"):
        load_config(PRODUCTION, overrides=["strategy.sparse=true"])
    assert not load_config(PRODUCTION).file.strategy.sparse


def test_a_sparse_run_with_a_total_pass_refuses_the_subtree_totals():
    """The subtree totals are a bottom-up pass over every row of the NMF (das.postprocess.
    below), which a sparse run has only on each parent's support."""
    measured = ["strategy.sparse=true", "postprocess.target='measurements'"]
    with pytest.raises(UserError) as info:
        load_config(PRODUCTION, overrides=measured)
    assert str(info.value).endswith(
        "strategy.sparse = true needs postprocess.subtree_totals = false when a pass fits "
        '"total" alone: the subtree totals are a bottom-up pass over every row of the NMF, '
        "and a sparse run measures each geounit only on its parent's support"
    )
    config = load_config(PRODUCTION, overrides=[*measured, "postprocess.subtree_totals=false"])
    assert config.file.strategy.sparse and config.file.postprocess.combine_totals
