#!/bin/bash
# What an idle module costs: one guest, two namespaces joined by one veth
# pair, both attached and their peers alive, nothing sent.  For each
# parameter set the module is loaded, the guest's busy share of its CPU
# over SECONDS is read from /proc/stat with the frames namespace a sent,
# and the module is unloaded; without the module first and last.
#   scripts/vm --timeout 600 -- bench/idle-ns.sh [SECONDS [PARAMS...]]
# Defaults: 10 s; the module's defaults, ka_ms=200 link_dead_ms=600,
# tick_us=10000, both, and the defaults again.  Each PARAMS is one
# quoted set ("" for the defaults).  ME_KO: another module to load.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
secs=${1:-10}
shift || true
if [ $# -eq 0 ]; then
	set -- "" "ka_ms=200 link_dead_ms=600" "tick_us=10000" \
		"tick_us=10000 ka_ms=200 link_dead_ms=600" ""
fi
ko=${ME_KO:-$top/kernel/multiedge.ko}

busy() { awk '$1 == "cpu" {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
txp() { ip -n a -s link show va | awk '/TX:/ {getline; print $2}'; }
measure() { # LABEL
	local p0 p1 b0 t0 b1 t1
	p0=$(txp); read -r b0 t0 < <(busy)
	sleep "$secs"
	read -r b1 t1 < <(busy); p1=$(txp)
	awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v n="$1" -v p=$((p1 - p0)) -v s="$secs" \
		'BEGIN {printf "%-44s busy %5.2f%% of the guest, a sent %d frames/s\n", n, 100 * b / t, p / s}'
}

modprobe veth
ip netns add a
ip netns add b
ip link add va netns a type veth peer name vb netns b
ip -n a link set va up
ip -n b link set vb up
sleep 2
measure "no module"
for params in "$@"; do
	# shellcheck disable=SC2086 # one set, several parameters
	insmod "$ko" $params
	ip netns exec a "$B/mectl" attach va >/dev/null
	ip netns exec b "$B/mectl" attach vb >/dev/null
	for ((i = 0; i < 100; i++)); do
		ip netns exec a "$B/mectl" peers 2>/dev/null | grep -q alive && break
		sleep 0.1
	done
	sleep 1
	measure "module [${params:-defaults}]"
	ip netns exec a "$B/mectl" detach va >/dev/null
	ip netns exec b "$B/mectl" detach vb >/dev/null
	rmmod multiedge
done
measure "no module"
dmesg | grep -E "WARNING|BUG|Oops" && exit 1
exit 0
