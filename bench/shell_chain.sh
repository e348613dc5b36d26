#!/usr/bin/env bash
# The baseline sfclab is measured against: a routed chain of N namespaces built the way
# hand-written testbeds do it, one `ip` process per object (as in the container service-chaining
# paper's testbed).  Usage: shell_chain.sh up|down N PREFIX
set -euo pipefail
op=$1 n=$2 p=$3
if [ "$op" = down ]; then
  for i in $(seq 0 $((n - 1))); do ip netns del "$p$i"; done
  exit 0
fi
for i in $(seq 0 $((n - 1))); do
  ip netns add "$p$i"
  ip -n "$p$i" link set lo up
done
for i in $(seq 0 $((n - 2))); do
  j=$((i + 1))
  ip link add e1 netns "$p$i" type veth peer e0 netns "$p$j"
  ip -n "$p$i" addr add "198.$((18 + i / 256)).$((i % 256)).1/24" dev e1
  ip -n "$p$j" addr add "198.$((18 + i / 256)).$((i % 256)).2/24" dev e0
  ip -n "$p$i" link set e1 up
  ip -n "$p$j" link set e0 up
done
for i in $(seq 1 $((n - 2))); do
  ip netns exec "$p$i" sysctl -qw net.ipv4.ip_forward=1
done
# routes, the least a hand-written testbed needs for src and dst to reach each other: a default
# route toward dst, and a route to src's subnet toward src
for i in $(seq 0 $((n - 1))); do
  if [ "$i" -lt $((n - 1)) ]; then
    ip -n "$p$i" route add default via "198.$((18 + i / 256)).$((i % 256)).2"
  fi
  if [ "$i" -ge 2 ]; then
    ip -n "$p$i" route add 198.18.0.0/24 via "198.$((18 + (i - 1) / 256)).$(((i - 1) % 256)).1"
  fi
done
