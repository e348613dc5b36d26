#!/usr/bin/env bash
# The whole check: lint (ruff), the architecture contract (import-linter layers), types (mypy),
# then the test suite: unit tests (no root), then integration tests (root, real labs).
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
echo "tests: pytest"
exec pytest -q -p no:cacheprovider --durations=20 "$@" tests
