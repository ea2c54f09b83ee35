"""A child for test_harness: emits its arguments, or fails (``fail``) after emitting."""

from __future__ import annotations

import sys

from bench.harness import emit

if __name__ == "__main__":
    emit({"arguments": sys.argv[1:]})
    if "fail" in sys.argv[1:]:
        print("the child's own error", file=sys.stderr)
        sys.exit(3)
