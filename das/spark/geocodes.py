"""Geocodes as GEOID prefixes, as Spark columns: a geounit's code at a level is the first
``length`` characters of its blocks' GEOIDs (the root of a US run has the empty code)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def geocode_of(column: str, length: int) -> Column:
    """The geocode at prefix ``length`` of a GEOID column ("" for the root of a US run)."""
    return F.substring(column, 1, length) if length else F.lit("")
