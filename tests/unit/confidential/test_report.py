"""The confidential report: one self-contained page, titled with the run, levels in
hierarchy order, bias by size and diversity, protected beside noisy."""

from __future__ import annotations

import base64
import re
from dataclasses import replace
from html.parser import HTMLParser

import pandas as pd
import pytest

from das.confidential.breakdowns import by_bin, by_level, by_size_and_diversity
from das.confidential.markup import number
from das.confidential.page import report_page
from das.confidential.plots import plotted_levels
from das.confidential.report import run_info
from das.spec.config import load_config
from tests.unit.confidential.report_examples import LEVELS, WRITTEN, demo_run, metrics


class Page(HTMLParser):
    """What a reader of the page meets: title, headings, tables (body rows of cell texts,
    each under the heading before it) and every attribute."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.title = ""
        self.headings: list[tuple[str, str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.attributes: list[tuple[str, str, str]] = []
        self._text: list[str] | None = None
        self._row: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attributes += [(tag, name, value or "") for name, value in attrs]
        if tag in ("title", "h1", "h2", "h3", "h4", "summary", "td"):
            self._text = []
        elif tag == "table" and self.headings:
            self.tables.setdefault(self.headings[-1][1], [])
        elif tag == "tr":
            self._row = []

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._text is None or tag not in ("title", "h1", "h2", "h3", "h4", "summary", "td"):
            if tag == "tr" and self._row:
                self.tables[self.headings[-1][1]].append(self._row)
            return
        text, self._text = "".join(self._text), None
        if tag == "title":
            self.title = text
        elif tag == "td" and self._row is not None:
            self._row.append(text)
        else:
            self.headings.append((tag, text))


@pytest.fixture(scope="module")
def text() -> str:
    """The demo run's page (drawing its figures takes a second or two: drawn once)."""
    return report_page(metrics(), demo_run())


@pytest.fixture(scope="module")
def page(text: str) -> Page:
    return Page(text)


def test_title_names_the_run_date_config_and_mode(page):
    assert page.title == (
        "demo · 2026-01-02 03:04 UTC · configs/demo.toml · test mode — error report (CONFIDENTIAL)"
    )
    production = run_info(load_config("configs/pl94_2020_production.toml"), written=WRITTEN)
    assert production.mode == "production" and production.seed is None
    assert production.title.endswith("· configs/pl94_2020_production.toml · production mode")


def test_header_says_the_page_is_confidential_and_why(text):
    assert "CONFIDENTIAL — do not publish." in text
    assert "not differentially private" in text
    assert "test (fixed seed 1: not for release)" in text


def test_sections_in_reading_order(page):
    assert [text for tag, text in page.headings if tag == "h2"] == [
        "Error by level",
        "Error by geounit size and diversity",
    ]
    h3 = [text for tag, text in page.headings if tag == "h3"]
    assert h3 == ["total", "votingage*hispanic*cenrace", "detailed", "block_group"]
    # the level above the block in full, the other levels below the root folded
    folded = [text for tag, text in page.headings if tag == "summary"]
    assert folded == ["state", "county", "tract", "block"]


def test_levels_in_hierarchy_order_not_the_tables(page):
    assert metrics()["level"].iloc[0] == "block"  # the table is not in hierarchy order
    for query in ("total", "votingage*hispanic*cenrace", "detailed"):
        assert [row[0] for row in page.tables[query]] == list(LEVELS)


def test_unmeasured_invariant_totals_have_no_noisy_answer_and_are_left_out_of_the_figure(page):
    run = demo_run()
    total = by_level(metrics(), run.levels, "total", run.measured)
    assert plotted_levels(total) == list(LEVELS[2:])  # the US and state totals: invariant
    detailed = by_level(metrics(), run.levels, "votingage*hispanic*cenrace", run.measured)
    assert plotted_levels(detailed) == list(LEVELS)
    us, state = page.tables["total"][:2]
    assert us[0] == "us" and us.count("not measured") == 3  # MAE, mean signed, RMSE
    assert state[0] == "state" and state.count("not measured") == 3


def test_protected_beside_noisy_values(page):
    table = metrics()
    row = table[
        (table["level"] == "tract")
        & (table["query"] == "total")
        & (table["size_bin"] == "all")
        & (table["diversity_bin"] == "all")
    ].set_index("source")
    tract = next(r for r in page.tables["total"] if r[0] == "tract")
    assert tract[1] == f"{int(row.loc['protected', 'cells']):,}"
    assert tract[2:4] == [number(row.loc["protected", "mae"]), number(row.loc["noisy", "mae"])]
    signed = [number(row.loc[s, "mean_signed"], signed=True) for s in ("protected", "noisy")]
    assert tract[4:6] == signed


def test_bias_by_bin_lowest_first_with_the_table_values(page):
    table = metrics()
    by_size = by_bin(table, "block_group", "total", "size_bin")
    assert list(by_size.index) == ["1-9", "10-99", "100-999"]  # not "10-99" < "1-9"
    assert list(by_size["cells"]) == [3, 5, 7]
    expected = table[
        (table["level"] == "block_group")
        & (table["query"] == "total")
        & (table["source"] == "noisy")
        & (table["size_bin"] == "10-99")
        & (table["diversity_bin"] == "all")
    ]["mean_signed"].item()
    assert by_size.loc["10-99", "mean_signed_noisy"] == expected
    by_diversity = by_bin(table, "block_group", "total", "diversity_bin")
    assert list(by_diversity.index) == ["0-0.1", "0.1-0.3", "0.5-1"]
    signed, counts = by_size_and_diversity(table, "block_group", "total", "protected")
    assert list(signed.columns) == ["1-9", "10-99", "100-999"]
    assert counts.loc["0.1-0.3", "10-99"] == 5 and pd.isna(counts.loc["0.1-0.3", "1-9"])
    assert [row[0] for row in page.tables["By true population"]][:3] == list(by_size.index)
    assert "By true diversity index" in page.tables


def test_self_contained_no_external_urls(text, page):
    links = [(tag, name, value) for tag, name, value in page.attributes if name in ("src", "href")]
    assert links and all(v.startswith(("data:image/png;base64,", "#")) for _, _, v in links)
    outside_images = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)
    assert not re.search(r"https?:|//|<script|<link|@import|url\(", outside_images, re.I)
    images = [v for tag, name, v in page.attributes if tag == "img" and name == "src"]
    assert len(images) == 2  # error by level; bias by bin
    for src in images:
        assert base64.b64decode(src.removeprefix("data:image/png;base64,")).startswith(b"\x89PNG")


def test_text_from_the_run_is_escaped():
    text = report_page(metrics(), replace(demo_run(), name="<b>x</b>"))
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text


def test_schema_without_race_has_no_diversity_bins():
    text = report_page(metrics(diversity=False), demo_run())
    page = Page(text)
    assert "By true population" in page.tables and "By true diversity index" not in page.tables
    assert text.count("No bins: the schema has no race and ethnicity.") == 5  # every level


def test_resumed_run_without_noisy_sums_shows_protected_only():
    page = Page(report_page(metrics(noisy=False), demo_run()))
    tract = next(r for r in page.tables["total"] if r[0] == "tract")
    assert tract[3] == "–" and tract[2] != "–"


@pytest.mark.parametrize(
    ("value", "signed", "text"),
    [(0.0, True, "0"), (0.0123456, True, "+0.0123"), (-2.345, True, "-2.35"),
     (1234.5, False, "1,234"), (float("nan"), False, "–")],
)  # fmt: skip
def test_numbers_to_about_three_figures(value, signed, text):
    assert number(value, signed) == text
