#!/usr/bin/env bash
# Run every reproduction scenario (scenarios/paper-*.yaml, scenarios/blog-ovs-chaining.yaml)
# and write one report per results database.  See docs/reproduction.md.
#
#   scripts/reproduce.sh [OUT_DIR] [NAME ...]
#
# OUT_DIR (default /tmp/repro) receives NAME.db and the report directory NAME/ for each
# scenario; the three paper-firewall-spread-{1,2,4} files go into one database,
# firewall-spread.db, and one report, firewall-spread/.  NAME limits the run to those scenarios
# (file names without .yaml; "firewall-spread" for the three spread files).
# Runs resume: a second invocation skips runs already done in the databases.
# Needs root.  About 20 minutes on a 2-core machine.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
sfclab=${SFCLAB:-$here/.venv/bin/sfclab}
out=${1:-/tmp/repro}
shift || true
mkdir -p "$out"

all=(paper-calibration-tcp paper-calibration-udp paper-ovs-patch-vs-veth blog-ovs-chaining
     paper-chain-veth-vs-ovs-tcp paper-chain-veth-vs-ovs-udp paper-firewall-rules
     firewall-spread paper-shaper-chain)
# Trellis and the OpenStack NFV study (issue 15); trellis-forwarding's user-space forwarder runs
# "python3 -m sfclab.functions.examples.tun_count", found on PATH: the venv's python first
all+=(trellis-forwarding trellis-frame-size openstack-single-tenant openstack-dedicated
      openstack-shared openstack-bypass)
export PATH="$here/.venv/bin:$PATH"
if [ $# -gt 0 ]; then todo=("$@"); else todo=("${all[@]}"); fi

status=0
start=$(date +%s)
for name in "${todo[@]}"; do
    t0=$(date +%s)
    if [ "$name" = firewall-spread ]; then
        files=("$here"/scenarios/paper-firewall-spread-{1,2,4}.yaml)
    else
        files=("$here/scenarios/$name.yaml")
    fi
    db="$out/$name.db"
    for f in "${files[@]}"; do
        echo "== $(basename "$f" .yaml) -> $db"
        # exit 1: some runs failed (they are in the report); 2: a bad file; stop on neither
        "$sfclab" run "$f" --db "$db" || status=$?
    done
    "$sfclab" report --db "$db" --out "$out/$name" || status=$?
    echo "== $name: $(( $(date +%s) - t0 )) s, report $out/$name/report.md"
done
echo "== all: $(( $(date +%s) - start )) s"
exit "$status"
