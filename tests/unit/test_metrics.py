import pytest

from das.metrics import size_bin
from das.progress import _clock


@pytest.mark.parametrize(
    ("population", "label"),
    [
        (0, "0"),
        (1, "1-9"),
        (9, "1-9"),
        (10, "10-99"),
        (999, "100-999"),
        (9999, "1000-9999"),
        (10_000, "10000+"),
        (10**7, "10000+"),
    ],
)
def test_size_bins(population, label):
    assert size_bin(population) == label


def test_clock():
    assert _clock(5) == "5s" and _clock(65) == "1m05s" and _clock(3700) == "1h01m"
