#!/bin/bash
# me_bench in one guest: two network namespaces (nodes a and b) joined by
# LINKS veth pairs; server in b, client in a, then the memcpy reference.
#   scripts/vm --timeout 600 -- bench/try-ns.sh
#   scripts/vm --timeout 600 -- bench/try-ns.sh 1 --threads 2 --sizes 1K:64K
# Arguments: the number of links (default 2), then client options that
# override the defaults (all tests, 8:1048576, 0.5 s).  Results in /tmp/bench.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
LINKS=2
if [[ ${1:-} =~ ^[0-9]+$ ]]; then LINKS=$1; shift; fi
out=/tmp/bench
mkdir -p "$out"
dmesg -C
insmod $top/kernel/multiedge.ko
modprobe veth
ip netns add a; ip netns add b
for ((l = 0; l < LINKS; l++)); do
	ip link add va$l netns a type veth peer name vb$l netns b
	ip -n a link set va$l up; ip -n b link set vb$l up
	ip netns exec a $B/mectl attach va$l
	ip netns exec b $B/mectl attach vb$l
done
ip -n a link set lo up; ip -n b link set lo up
rc=0
ip netns exec b $B/me_bench server --idle 300 > $out/server.log 2>&1 &
spid=$!
ip netns exec a $B/me_bench client --test all --sizes 8:1048576 --seconds 0.5 \
	--csv $out/r.csv --json $out/r.json --label ns-veth$LINKS "$@" || rc=$?
wait $spid || { echo "server exit $?"; rc=1; }
echo "--- server log"; cat $out/server.log
echo "--- csv"; cat $out/r.csv
echo "--- json (first 2)"; head -2 $out/r.json
ip netns exec a $B/mectl counters || true
$B/me_bench memcpy --sizes 4K:4M --seconds 0.3 --label guest || rc=1
ip netns del a; ip netns del b
sleep 1
rmmod multiedge || rc=1
dmesg | grep -E "WARNING|BUG|Oops|multiedge" | tail -20 || true
echo "try-ns rc=$rc"
exit $rc
