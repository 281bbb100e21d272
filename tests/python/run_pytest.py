#!/usr/bin/env python3
"""Runs the package's pytest suite for `meson test`.

usage: run_pytest.py [PYTEST ARGS...] TESTS_DIR_OR_FILE

Exit 77 (meson's "skipped") when pytest is missing; pytest's exit 5 (no
test collected) is a failure here, since this suite is never empty."""
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed (Debian: python3-pytest): skipped")
    sys.exit(77)

status = pytest.main(["-q", "-p", "no:cacheprovider", "-r", "s"] + sys.argv[1:])
if status == pytest.ExitCode.NO_TESTS_COLLECTED:
    print("pytest collected no tests from %s" % " ".join(sys.argv[1:]))
    sys.exit(1)
sys.exit(int(status))
