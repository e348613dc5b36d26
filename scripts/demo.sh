#!/usr/bin/env bash
# `make demo`: the main job, end to end, on real namespaces.
#  1. the lab core: a 6-namespace routed chain up, inspected, traffic end to end, torn down;
#  2. network functions: firewall -> NAT -> shaper -> DPI, each shown doing its job;
#  3. service function chains: flows steered by MPLS label stacks in eBPF, traced hop by hop;
#  4. hosts and tenants: three emulated hosts joined by VXLAN tunnels, two tenants sharing a NAT;
#  5. an experiment: throughput against chain length into SQLite, and its report;
#  6. a container function: HAProxy in a container, in a chain steered by labels.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
out=build/demo
rm -rf "$out" && mkdir -p "$out"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() { for lab in chain6 fnchain sfcweb hosts-tenants ctrlb; do sfclab down "$lab" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT

step "1. lab core: a 6-namespace chain"
sfclab up scenarios/chain6.yaml
sfclab inspect chain6
dst=$(sfclab inspect chain6 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["nodes"]["dst"]["interfaces"][0]["addresses"][0].split("/")[0])')
sfclab exec chain6 src -- ping -c 3 -i 0.2 "$dst"
sfclab traffic iperf chain6 --from src --to dst --flows 2 --duration 2
sfclab down chain6

step "2. functions: firewall -> NAT -> shaper (200 Mbit/s) -> DPI"
sfclab up scenarios/functions-chain.yaml
sfclab traffic iperf fnchain --from src --to dst --duration 3
dst=$(sfclab inspect fnchain --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["nodes"]["dst"]["interfaces"][0]["addresses"][0].split("/")[0])')
# UDP to port 9999 (the firewall drops it) and an HTTP request (the DPI names it)
sfclab exec fnchain src -- python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); [s.sendto(b'x'*100, ('$dst', 9999)) for _ in range(25)]"
# (socketserver, not `python3 -m http.server`: that one looks its own name up in DNS first,
# and a lab namespace has no DNS server to ask)
sfclab exec fnchain dst -- python3 -c "import http.server as h, socketserver as s; s.TCPServer(('$dst', 8080), h.SimpleHTTPRequestHandler).serve_forever()" >/dev/null 2>&1 &
sfclab exec fnchain src -- python3 -c "
import time, urllib.request
for i in range(50):
    try:
        print('HTTP status', urllib.request.urlopen('http://$dst:8080/', timeout=5).status); break
    except OSError:
        time.sleep(0.2)
else:
    raise SystemExit('the HTTP server did not answer')"
sleep 1
sfclab inspect fnchain --json | python3 scripts/demo_functions.py
sfclab down fnchain

step "3. service function chains: web traffic through a firewall pool and a NAT, by labels"
sfclab up scenarios/sfc-web.yaml
sfclab chain ls sfcweb
sfclab chain trace sfcweb web
sfclab down sfcweb

step "4. hosts and tenants: 3 emulated hosts, VXLAN tunnels, two tenants sharing a NAT router"
sfclab up scenarios/hosts-tenants.yaml
sfclab graph hosts-tenants
sfclab exec hosts-tenants red1 -- ping -c 3 -i 0.2 198.18.0.2
sfclab down hosts-tenants

step "5. experiment: throughput against chain length"
sfclab run scenarios/demo-chain-length.yaml --db "$out/results.db"
sfclab report --db "$out/results.db" --out "$out/report"

step "6. a container function: web connections through a firewall and HAProxy (a container), by labels, balanced over two servers"
sfclab image build haproxy >/dev/null   # cached: make setup built it
sfclab up scenarios/container-lb.yaml
for s in s1 s2; do
  mkdir -p "$out/$s" && echo "$s" > "$out/$s/name"
  ip=$(sfclab inspect ctrlb --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['nodes']['$s']['interfaces'][0]['addresses'][0].split('/')[0])")
  sfclab exec ctrlb "$s" -- python3 -c "import functools, http.server as h, socketserver as s; s.TCPServer(('$ip', 8080), functools.partial(h.SimpleHTTPRequestHandler, directory='$out/$s')).serve_forever()" >/dev/null 2>&1 &
done
sfclab exec ctrlb src -- python3 -c "
import time, urllib.request
for i in range(50):   # the servers and HAProxy take a moment to listen
    try:
        urllib.request.urlopen('http://198.18.1.2/name', timeout=2); break
    except OSError:
        time.sleep(0.2)
got = [urllib.request.urlopen('http://198.18.1.2/name', timeout=5).read().decode().strip() for _ in range(6)]
print('6 connections to HAProxy answered by:', ' '.join(got))
try:
    urllib.request.urlopen('http://198.18.1.2:8081/name', timeout=2)
except OSError:
    print('port 8081: dropped by the firewall')"
sfclab chain inspect ctrlb --json | python3 -c "
import json, sys
n = json.load(sys.stdin)['chains']['web']['nodes']
print('labelled packets: classified at src', n['src']['classified'], '/ into fw', n['fw']['proxy_in'], '/ into lb', n['lb']['proxy_in'])"
sfclab down ctrlb
echo
echo "The report is at $PWD/$out/report/report.md (and report.html)."
echo
echo "To see the demo's lab and its results in a browser (Ctrl-C stops the server, then"
echo "'sfclab down chain6' removes the lab):"
echo "  sfclab up scenarios/chain6.yaml && sfclab serve --db $PWD/$out/results.db"
echo "  then open, once, the address with its token that serve prints"
echo "  (http://127.0.0.1:8470/?token=...), then #/lab/chain6 and #/results on that page"
echo "  (programs: curl -H \"Authorization: Bearer \$(cat /run/sfclab/serve.token)\" ...)"
