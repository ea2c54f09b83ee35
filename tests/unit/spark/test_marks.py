"""Reading the run's mode from a footer's Spark schema entry, without Spark."""

from __future__ import annotations

import json

from das.spark.marks import MODE_KEY, SPARK_SCHEMA_KEY, RunMode, footer_modes, schema_modes


def _schema(*metadata: dict[str, str]) -> str:
    fields = [{"name": f"c{i}", "type": "integer", "metadata": m} for i, m in enumerate(metadata)]
    return json.dumps({"type": "struct", "fields": fields})


def test_every_columns_mode_is_read_and_a_column_without_one_reads_empty():
    test, production = RunMode(test=True).metadata, RunMode(test=False).metadata
    assert schema_modes(_schema(test, test)) == {"test"}
    assert schema_modes(_schema(test, production)) == {"test", "production"}
    assert schema_modes(_schema(test, {})) == {"test", ""}
    assert schema_modes(_schema()) == set()
    assert schema_modes(None) == set()  # a file not written by Spark


def test_a_footer_is_read_through_its_spark_schema_entry():
    schema = _schema({MODE_KEY: "production"})
    assert footer_modes({SPARK_SCHEMA_KEY: schema, "other": "x"}) == {"production"}
    assert footer_modes({"other": "x"}) == set()
