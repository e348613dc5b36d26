#!/usr/bin/env bash
# Run every reproduction scenario (scenarios/paper-*, blog-*, p4sfc-*, trellis-*, openstack-*)
# and write one report per results database.  See docs/reproduction.md.
#
#   scripts/reproduce.sh [OUT_DIR] [NAME ...]
#
# OUT_DIR (default /tmp/repro) receives NAME.db and the report directory NAME/ for each
# scenario; the three paper-firewall-spread-{1,2,4} files go into one database,
# firewall-spread.db, and one report, firewall-spread/; likewise p4sfc-attach (the four
# p4sfc-attach-*.yaml files) and p4sfc-stack (p4sfc-stack-{labels,routing}.yaml).
# p4sfc-classifier runs bench/bench_sfc_classifier.py (classifier tables of 1 to 100,000
# entries are loaded into a running lab, which an experiment file cannot do) into
# p4sfc-classifier.json; trellis-hosts runs bench/bench_hosts.py (Trellis's attach methods with
# the node-under-test host alone on a core, about 30 s) into trellis-hosts.json.  NAME limits the run to those scenarios (file names without .yaml,
# or the group names above).
# Runs resume: a second invocation skips runs already done in the databases.
#
# Repetitions fixed in advance, no optional stopping: each group's files first run with their
# own repetitions (the pilot); then scripts/repro_page.py plans, once per finding and from the
# pilot's variance only, the repetitions per side its claim needs for 80 % power
# (sfclab.experiments.samplesize; power, smallest effect and cap in scenarios/findings.yaml),
# keeps the plan in the record, and each file is brought up to the most its findings need in
# one step (the runs done are kept), if the estimated time fits the findings' share of
# REPRO_BUDGET seconds of added repetitions (default 480): each finding of the groups run gets
# an equal share of what is left when its group comes, and what a finding does not spend goes to
# the findings after it (sfclab.experiments.reprobudget).  Whether intervals already separate
# plays no part.  The page shows each finding's pilot, planned (with its power) and reached
# repetitions.  Sides of a comparison in one file (variants, sweep points) run interleaved in
# one shuffled order into one database.
# At the end the page (REPRO_PAGE, default docs/reproduction.md) is rewritten between its
# "repro:begin" markers (alone, from an existing OUT_DIR, measuring nothing:
# scripts/repro_page.py render OUT_DIR --page PAGE): tables, power-law fits, offered-rate
# curves, the benches' figures, findings with computed verdicts, the environment (kernel, CPU,
# tool versions, sfclab commit, load average at the start and end of each group) and the wall
# time of the whole script; OUT_DIR/reproduce.json keeps the record.
# Evidence: OUT_DIR is the run's bundle (sfclab.experiments.bundle): the databases, the reports,
# trials/NAME.json (every trial as JSON), the record with its run id (start time and commit)
# and environment (CPU frequency and governor, hypervisor, sysctls, OVS settings, Debian
# package versions), findings.yaml as it was at the start, and SHA256SUMS of every file.  Each
# generated block of the page names the run id; the page is rendered from this one bundle
# (a run of a few NAMEs renders with --partial: the other blocks keep their run's text and
# stamp), and "scripts/repro_page.py check OUT_DIR --page PAGE" verifies page against bundle.
# REPRO_BUNDLE=DIR copies the bundle into DIR (e.g. a folder of the repository) when it is
# under 20 MB, else only its SHA256SUMS and how to rebuild it.  A second invocation into the
# same OUT_DIR resumes the same run, only at the same commit.
# Needs root and the machine alone.  About 1 h 40 min on an idle 2-core machine (estimated
# 2026-11-25: about 36 min for the [P] and [B] iperf3 files, about 55 min for the 106 NDR
# searches and 8 offered-rate runs of P4-SFC, Trellis and the OpenStack study, plus REPRO_BUDGET
# for added repetitions); several times that on a loaded machine (docs/reproduction.md, "How to
# rerun", with the parts cut to stay under 2 h and what each cut costs in power).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
sfclab=${SFCLAB:-$here/.venv/bin/sfclab}
out=${1:-/tmp/repro}
shift || true
mkdir -p "$out"

all=(paper-calibration-tcp paper-calibration-udp paper-ovs-patch-vs-veth blog-ovs-chaining blog-offloads
     paper-chain-veth-vs-ovs-tcp paper-chain-veth-vs-ovs-udp paper-firewall-rules
     firewall-spread paper-shaper-chain p4sfc-attach p4sfc-stack p4sfc-classifier)
# Trellis and the OpenStack NFV study (issue 15); trellis-forwarding's user-space forwarder runs
# "python3 -m sfclab.functions.examples.tun_count", found on PATH: the venv's python first
all+=(trellis-forwarding trellis-frame-size trellis-hosts openstack-single-tenant
      openstack-dedicated openstack-shared openstack-bypass openstack-bypass-tcp)
export PATH="$here/.venv/bin:$PATH"
if [ $# -gt 0 ]; then todo=("$@"); else todo=("${all[@]}"); fi

py=${PYTHON:-$here/.venv/bin/python}
page() { "$py" "$here/scripts/repro_page.py" "$@"; }
budget=${REPRO_BUDGET:-480}

status=0
start=$(date +%s)
page begin "$out"
page budget "$out" "$budget" "${todo[@]}"
for name in "${todo[@]}"; do
    t0=$(date +%s)
    page group "$out" "$name" start
    case "$name" in
        firewall-spread) files=("$here"/scenarios/paper-firewall-spread-{1,2,4}.yaml) ;;
        p4sfc-attach) files=("$here"/scenarios/p4sfc-attach-{sfc,routing,bridge,ovs}.yaml) ;;
        p4sfc-stack) files=("$here"/scenarios/p4sfc-stack-{labels,routing}.yaml) ;;
        p4sfc-classifier|trellis-hosts)
            # benches write JSON (the page's "bench NAME" blocks); a failed bench leaves none
            case "$name" in
                p4sfc-classifier) bench=(bench_sfc_classifier.py --reps 3) ;;
                trellis-hosts) bench=(bench_hosts.py --reps 3 --duration 2) ;;
            esac
            echo "== $name -> $out/$name.json"
            if "$py" "$here/bench/${bench[0]}" "${bench[@]:1}" --json > "$out/$name.json.tmp"
            then mv "$out/$name.json.tmp" "$out/$name.json"
            else status=$?; rm -f "$out/$name.json.tmp"
            fi
            echo "== $name: $(( $(date +%s) - t0 )) s, $out/$name.json"
            page group "$out" "$name" end
            continue ;;
        *) files=("$here/scenarios/$name.yaml") ;;
    esac
    db="$out/$name.db"
    for f in "${files[@]}"; do
        echo "== $(basename "$f" .yaml) -> $db"
        # exit 1: some runs failed (they are in the report); 2: a bad file; stop on neither
        "$sfclab" run "$f" --db "$db" || status=$?
    done
    # one step up to the planned repetitions (a plan is made once, from the pilot)
    plan=$(page more "$out" "$name" "$name") || { status=$?; plan=; }
    if [ -n "$plan" ]; then
        while read -r file reps ids est; do
            echo "== $(basename "$file" .yaml): planned $reps repetitions ($ids; about $est s)"
            r0=$(date +%s)
            "$sfclab" run "$file" --db "$db" --repetitions "$reps" </dev/null || status=$?
            page round "$out" "$name" "$file" "$reps" "$ids" "$r0"
        done <<< "$plan"
    fi
    "$sfclab" report --db "$db" --out "$out/$name" || status=$?
    page group "$out" "$name" end
    echo "== $name: $(( $(date +%s) - t0 )) s, report $out/$name/report.md"
done
page finish "$out"
echo "== all: $(( $(date +%s) - start )) s"
page bundle "$out" ${REPRO_BUNDLE:+--keep "$REPRO_BUNDLE"} || status=$?
partial=()
[ $# -eq 0 ] || partial=(--partial)
page fill "$out" "${REPRO_PAGE:-$here/docs/reproduction.md}" "${partial[@]}" || status=$?
page verdicts "$out" || status=$?
exit "$status"
