"""The solver library: one family (a parent and all its children) post-processed, with no
Spark and no JVM, so it runs the same in a notebook, a test or a Spark task.

Entry points:

- ``das.solve.parent.solve_parent(ParentProblem) -> ParentSolution``: one pass of one
  family from its noisy answers (``Measurement``: a query's matrix, its weight 1/sigma^2
  and the children's answers), the parent's counts and the constraints (structural zeros,
  facility bounds, fixed totals); the weighted NNLS fit, then the integer rounding. The
  example in docs/architecture.md ("One family from a notebook") runs in the tests.
- ``das.solve.family.solve_family``: every pass of a level's strategy for one family,
  as the Spark level loop (``das.postprocess``) runs it for each.
"""
