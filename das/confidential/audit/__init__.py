"""The reconstruction audit (``das audit``): how many of the input's block-level records an
attacker rebuilds from a release, beside guesses that need no release at all.

The record is (block, voting age, Hispanic origin, CENRACE) and, where the release
publishes it, the GQ type; where the schema has sex and single-year age (DHC-P), also the
DHC record (block, sex, age, Hispanic origin, CENRACE), for every source but the exact
tables, which publish neither. Sources: ``exact_tables`` (the P.L. 94-171 tables P1-P5 that a
release without disclosure avoidance would publish for every block, reconstructed by
arithmetic and, for the GQ type, an integer program), ``protected`` (the run's protected
block histograms, as the MDF publishes them) and two baselines (the block's tract scaled
to its size; the county's most common record). Each is matched one-to-one against the
confidential records of its block. Confidential: it reads the input, and its figures are
facts about it.

- ``layout``     the records as recodes of the schema's cells, and dense per-block arrays
- ``tables``     P1-P5 of a block, and the (voting age, Hispanic, race) table they determine
- ``gq``         the GQ types: a consistent record set (HiGHS) and its solution variability
- ``baselines``  guesses without a release: largest-remainder scaling, a record given to all
- ``match``      one-to-one matching in a block; persons unique in their block
- ``blocks``     every source on a batch of blocks (pure numpy)
- ``frames``     the Spark side: the blocks' arrays joined, audited, summed by size bin
- ``summary``    the sums as ``audit.json``
- ``section``    its section of the confidential report, with a figure
"""
