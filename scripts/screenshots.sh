#!/usr/bin/env bash
# `make screenshots`, after `make demo`: the web view's pictures in docs/ from the demo's own
# results database and a lab of the demo, in Debian's chromium (headless, through Playwright):
#   docs/web-lab.png      the lab view of the functions demo (scenarios/functions-chain.yaml)
#                         after a rate curve of 1500-byte frames started from its form: the
#                         200 Mbit/s shaper's drops painted on it
#   docs/web-measure.png  the form during an NDR/PDR search on that lab, trial by trial
#                         (the search is then stopped from the form)
#   docs/web-results.png  the results view of the demo's experiment (throughput against chain
#                         length, build/demo/results.db)
#   docs/web-compare.png  that experiment beside the same file run with 1 flow instead of 2
#                         (into a copy of the database, build/screenshots/results.db: the
#                         demo's own is left as it was)
# SFCLAB_SCREENSHOTS_OUT=DIR writes the pictures there instead of docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
demo_db=build/demo/results.db
out=build/screenshots
pictures="${SFCLAB_SCREENSHOTS_OUT:-docs}"
lab=fnchain
[[ -f "$demo_db" ]] || { echo "screenshots: no $demo_db: run 'make demo' first" >&2; exit 2; }
if sfclab inspect "$lab" --json >/dev/null 2>&1; then
    echo "screenshots: lab '$lab' is already up (the demo's functions lab): 'sfclab down $lab'" \
         "first" >&2
    exit 2
fi
rm -rf "$out" && mkdir -p "$out" "$pictures"
# a consistent copy of the demo's database (it may hold a write-ahead log beside it)
python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
    "$demo_db" "$out/results.db"
serve_pid=""
cleanup() {
    [[ -n "$serve_pid" ]] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" || true
    sfclab down "$lab" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "== the demo's experiment again, edited to 1 flow (for the comparison)"
sed 's/^  flows: 2$/  flows: 1/' scenarios/demo-chain-length.yaml > "$out/demo-chain-length-1flow.yaml"
grep -q '^  flows: 1$' "$out/demo-chain-length-1flow.yaml"
sfclab run "$out/demo-chain-length-1flow.yaml" --db "$out/results.db"

echo "== the functions lab, and the server"
sfclab up scenarios/functions-chain.yaml >/dev/null
token="$out/token"
(umask 077 && python3 -c "import secrets; print(secrets.token_urlsafe(24))" > "$token")
port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
sfclab serve --listen "127.0.0.1:$port" --db "$PWD/$out/results.db" --token-file "$token" \
    2> "$out/serve.log" &
serve_pid=$!

echo "== the pictures"
python scripts/screenshots.py --url "http://127.0.0.1:$port/" --token-file "$token" \
    --lab "$lab" --out "$pictures"
ls -l "$pictures"/web-*.png
