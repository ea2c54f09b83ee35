"""TopDown disclosure avoidance on Spark.

The package is laid out in the order of the data flow; each module does one stage:

- ``config``     parse and validate a run configuration (TOML) into typed objects
- ``schema``     histogram schema as data: attributes, recodes, marginal queries
- ``geography``  geographic levels as GEOID prefixes
- ``fixture*``   deterministic test inputs (real block counts expanded, or synthetic)
- ``read``       Spark: input microdata -> validated, recoded block histograms
- ``noise``      exact discrete Gaussian sampler and its random generators
- ``accounting`` zCDP budgets and the rho -> (epsilon, delta) conversion
- ``measure``    Spark: noisy measurements per (geounit, query), persisted once
- ``optimize``   per-parent weighted NNLS and integer rounding
- ``topdown``    Spark: the top-down pass over the hierarchy
- ``write``      Spark: protected microdata and the run certificate
"""

__version__ = "0.1.0"
