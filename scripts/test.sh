#!/usr/bin/env bash
# The whole check: lint (ruff), the architecture contract (import-linter layers), types (mypy),
# then the test suite in two phases:
#   1. every test not marked serial (the unit tier and most integration tests) on several
#      workers at once (pytest-xdist; SFCLAB_TEST_WORKERS, default 3: the integration tests
#      mostly wait on the kernel, on subprocesses and on the network);
#   2. the tests marked serial (they time or count what the machine's load changes, or compare
#      the whole machine before and after), one at a time with nothing else of the run beside.
# The status is failure if either phase fails; at the end, the 20 slowest tests of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
echo "lint: ruff"
ruff check --quiet src tests bench scripts
echo "architecture: import-linter"
lint-imports --no-cache > build/lint-imports.log || { cat build/lint-imports.log; exit 1; }
grep -E "KEPT|BROKEN" build/lint-imports.log
echo "types: mypy"
mypy --no-error-summary --cache-dir build/mypy-cache
mkdir -p build/tests
rm -f build/tests/*.xml
workers="${SFCLAB_TEST_WORKERS:-3}"
[[ "$workers" =~ ^[1-9][0-9]?$ ]] || { echo "SFCLAB_TEST_WORKERS: expected 1 to 99, got '$workers'" >&2; exit 2; }
status=0
# pytest's status 5 is "no test selected": a phase the arguments leave empty has not failed
phase() {
    local name="$1"; shift
    echo "tests: pytest, $name"
    local s=0
    pytest -q -p no:cacheprovider --junitxml="build/tests/$name.xml" "$@" || s=$?
    if [[ $s -ne 0 && $s -ne 5 ]]; then status=$s; fi
}
# one test (or group) at a time to each free worker, the long ones first (tests/conftest.py)
phase parallel -n "$workers" --dist loadgroup --no-loadscope-reorder -m "not serial" "$@" tests
phase serial -m serial "$@" tests
python - build/tests/*.xml <<'PY'
"""The 20 slowest tests of both phases (set-up, call and tear-down together)."""
import sys
import xml.etree.ElementTree as ET

rows = [(float(c.get("time", 0)), f.rsplit("/", 1)[-1].removesuffix(".xml"),
         f"{c.get('classname', '').replace('.', '/')}.py::{c.get('name')}")
        for f in sys.argv[1:] for c in ET.parse(f).iter("testcase")]
print(f"{' slowest 20 tests of the run ':=^79}")
for t, phase, name in sorted(rows, reverse=True)[:20]:
    print(f"{t:8.2f}s {phase:<8} {name}")
PY
exit "$status"
