from das.job.progress import _clock


def test_clock():
    assert _clock(5) == "5s" and _clock(65) == "1m05s" and _clock(3700) == "1h01m"
