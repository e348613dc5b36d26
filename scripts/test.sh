#!/usr/bin/env bash
# The whole check: lint (ruff), the architecture contract (import-linter layers), types (mypy,
# beside the first phase), then the test suite in two phases:
#   1. every test not marked serial (the unit tier and most integration tests) on several
#      workers at once (pytest-xdist; SFCLAB_TEST_WORKERS, default 6: the integration tests
#      mostly wait on the kernel, on subprocesses and on the network; with 4 workers the
#      machine was idle a fifth of the phase's second half, and the phase took 562 s where 6
#      took 518 s; a test that fails while another's flood made the CPUs' backlogs drop frames
#      is run once more, tests/integration/backlog_rerun.py);
#   2. the tests marked serial (they time or count what the machine's load changes, or compare
#      the whole machine before and after), one at a time with nothing else of the run beside.
# The status is failure if either phase fails; at the end, the 20 slowest tests of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# the run starts thousands of Python processes (CLI commands, probes, four pytest workers and
# the serial phase's own); without bytecode caches each compiles every module it imports, and
# pytest rewrites every test module's asserts again: with PYTHONDONTWRITEBYTECODE set, an
# 'sfclab validate' took 0.43 s of CPU instead of 0.32 s and each phase's collection 13 s
# instead of 6.  The caches go where Python puts them (__pycache__, ignored by git)
unset PYTHONDONTWRITEBYTECODE
echo "lint: ruff"
ruff check --quiet src tests bench scripts
echo "architecture: import-linter"
lint-imports --no-cache > build/lint-imports.log || { cat build/lint-imports.log; exit 1; }
grep -E "KEPT|BROKEN" build/lint-imports.log
workers="${SFCLAB_TEST_WORKERS:-6}"
[[ "$workers" =~ ^[1-9][0-9]?$ ]] || { echo "SFCLAB_TEST_WORKERS: expected 1 to 99, got '$workers'" >&2; exit 2; }
mkdir -p build/tests
rm -f build/tests/*.xml build/tests/reruns.txt
# the type check (up to a minute when its cache is cold) runs beside the parallel phase, whose
# workers mostly wait on the kernel; its verdict is read when that phase ends, before the
# serial phase, which has nothing beside it
echo "types: mypy (beside the parallel phase)"
mypy --no-error-summary --cache-dir build/mypy-cache > build/mypy.log 2>&1 &
mypy_pid=$!
# interrupted before its verdict is read: end it (by its PID, still this shell's child)
trap '[[ -n "$mypy_pid" ]] && kill "$mypy_pid" 2>/dev/null; true' EXIT
status=0
# pytest's status 5 is "no test selected": a phase the arguments leave empty has not failed
# each phase's wall time and the CPU time of its processes (those it waited for: not the labs'
# daemons or containers), which bounds the phase's wall time on these 2-core machines
phase() {
    local name="$1"; shift
    echo "tests: pytest, $name"
    local s=0
    local TIMEFORMAT="tests: $name took %0R s; its processes used %0U s of CPU in user space and %0S s in the kernel"
    # no schemathesis or anyio plugin: no test uses them (the API fuzzer runs schemathesis's
    # command), and each pytest process would import them (about 1 s of CPU)
    time pytest -q -p no:cacheprovider -p no:schemathesis -p no:anyio \
        --junitxml="build/tests/$name.xml" "$@" || s=$?
    if [[ $s -ne 0 && $s -ne 5 ]]; then status=$s; fi
}
# one test (or group) at a time to each free worker, the long ones first (tests/conftest.py)
phase parallel -n "$workers" --dist loadgroup --no-loadscope-reorder -m "not serial" "$@" tests
echo "types: mypy"
mypy_status=0
wait "$mypy_pid" || mypy_status=$?
mypy_pid=""
cat build/mypy.log
if [[ $mypy_status -ne 0 ]]; then echo "types: mypy failed (exit $mypy_status)"; status=$mypy_status; fi
# the unit tier has no serial test (tests/conftest.py refuses one): not collected again here
phase serial -m serial "$@" tests/integration
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
# a parallel-phase test that failed while another test's flood filled the CPUs' backlogs ran
# once more (tests/integration/backlog_rerun.py): each such rerun, and its verdict
if [[ -s build/tests/reruns.txt ]]; then
    echo "tests run again (their first run failed while the machine's CPU backlogs dropped frames):"
    cat build/tests/reruns.txt
fi
exit "$status"
