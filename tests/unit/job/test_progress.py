import logging

import pytest

from das.job.progress import PHASE_WEIGHTS, Progress, clock, remaining_seconds, run_phases

LEVELS = ("us", "state", "county", "tract", "block_group", "block")


def test_clock():
    assert clock(5) == "5s" and clock(65) == "1m05s" and clock(3700) == "1h01m"


def test_the_phases_of_a_run_are_known_in_advance_and_all_weighted():
    plan = run_phases(LEVELS)
    assert plan[:3] == ("read", "measure", "estimate") and plan[-3:] == (
        "write",
        "metrics (confidential)",
        "validate",
    )
    assert plan[3:-3] == tuple(f"solve {level}" for level in LEVELS)
    assert set(plan) == set(PHASE_WEIGHTS)


def test_eta_scales_the_remaining_weights_by_the_time_so_far():
    plan = run_phases(LEVELS)
    rest = sum(PHASE_WEIGHTS.values()) - PHASE_WEIGHTS["read"]
    # twice as slow as RI on the read: the rest takes twice RI's time
    assert remaining_seconds(plan, {"read": 46.0}, "read") == pytest.approx(2 * rest)
    assert remaining_seconds(plan, {p: PHASE_WEIGHTS[p] for p in plan}, "validate") == 0
    assert remaining_seconds(plan, {}, "read") is None  # nothing timed yet


def test_a_skipped_phase_does_not_count_as_done():
    plan = run_phases(LEVELS)
    # resumed: measure reused (never timed); the estimate rests on the read alone
    with_measure = remaining_seconds(plan, {"read": 23.0}, "measure")
    assert with_measure == pytest.approx(sum(PHASE_WEIGHTS.values()) - 23.0 - 11.1)


def test_a_level_of_another_name_weighs_as_an_average_level():
    plan = run_phases(("state", "district", "block"))
    left = remaining_seconds(plan, {"read": 23.0}, "read")
    assert left == pytest.approx(11.1 + 5.0 + 1.5 + 5.25 + 14.3 + 2.5 + 3.3 + 5.4)


def test_each_phase_of_the_plan_ends_with_the_runs_elapsed_and_eta(caplog):
    progress = Progress(plan=("read", "write"))
    with caplog.at_level(logging.INFO, logger="das.progress"):
        with progress.phase("read"):
            pass
        with progress.phase("not planned"):
            pass
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("run: 2 phases: read, write; ETA: the phases to come, weighted")
    assert lines[1:3] == ["read: started", "read: done in 0s"]
    assert lines[3].startswith("run: 1/2 phases done, elapsed 0s, ETA ")
    assert lines[4:] == ["not planned: started", "not planned: done in 0s"]
    assert set(progress.timings) == {"read", "not planned"}


@pytest.mark.parametrize(("error", "ended"), [(KeyboardInterrupt, "interrupted"), (OSError, "failed")])
def test_a_phase_that_stops_is_never_reported_done(caplog, error, ended):
    progress = Progress(plan=("read", "measure", "write"))
    with caplog.at_level(logging.INFO, logger="das.progress"):
        with progress.phase("read"):
            pass
        with pytest.raises(error), progress.phase("measure"):
            raise error()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[-2:] == ["measure: started", f"measure: {ended} after 0s"]
    assert not any(line.startswith("run: 2/3 phases done") for line in lines)
