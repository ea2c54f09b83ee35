"""The Spark stage's checkpoint schema (``das.postprocess.levels``), checked without a session:
a level's checkpoint is written with it, so it must not change."""

from __future__ import annotations

from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from das.postprocess.levels import SOLUTION_SCHEMA
from das.postprocess.rows import SOLUTION_ARROW


def test_the_checkpoint_schema_is_the_family_rows_schema():
    expected = T.StructType(
        [
            T.StructField("geocode", T.StringType(), False),
            T.StructField("cells", T.ArrayType(T.IntegerType(), False), False),
            T.StructField("counts", T.ArrayType(T.LongType(), False), False),
            T.StructField("solves", T.IntegerType(), False),
            T.StructField("failsafe", T.StringType(), True),
            T.StructField("seconds", T.DoubleType(), False),
            T.StructField("mip_gap", T.DoubleType(), False),
        ]
    )
    assert expected == SOLUTION_SCHEMA
    assert to_arrow_schema(SOLUTION_SCHEMA).equals(SOLUTION_ARROW, check_metadata=True)
