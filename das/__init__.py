"""TopDown disclosure avoidance on Spark.

One subpackage per stage, in the order of the data flow; a stage imports only from itself
and the stages above it (``tests/unit/test_layout.py`` holds the code to that):

- ``errors``        the two kinds of failure: the user's (exit 2) and the program's (exit 1)
- ``spec``          what a run is, as data: config, schema, geography, budget, exact fractions
- ``spark``         the Spark session and the driver's own small files on Spark's file system
- ``input``         the input contract, its check, and the histograms per geounit and level
- ``privacy``       exact discrete-Gaussian noise, its generators, the noisy measurement file
- ``estimate``      the BLUE of every query at every geounit, with exact variances (public)
- ``postprocess``   per parent: the L2 fit and the integer rounding; the top-down level loop
- ``output``        protected microdata, the run certificate, the independent validator
- ``confidential``  error metrics against the input and their report (never public)
- ``fixtures``      deterministic test inputs (real block counts expanded, or synthetic)
- ``job``           the ``das`` command and the run that ties the stages together
- ``cluster``       a Spark standalone cluster on 127.0.0.1 for tests and benchmarks
"""

__version__ = "0.1.0"
