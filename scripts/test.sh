#!/usr/bin/env bash
# The whole test suite: unit tests (no root), then integration tests (root, real labs).
# Before and after, any lab left by an earlier crashed run of this suite is removed by name.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/pytest -q -p no:cacheprovider "$@" tests
