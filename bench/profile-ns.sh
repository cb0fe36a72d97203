#!/bin/bash
# Where the CPU goes: one guest, two namespaces joined by one veth pair,
# multiedge one-way writes and then TCP (iperf3) over the same veth, each
# under `perf record -a` for the same time.  Prints both profiles' top
# symbols with the throughput each reached, and each one's samples by
# vCPU and thread.
#   scripts/vm --timeout 600 -- bench/profile-ns.sh [MTU [SIZE [SECONDS]]]
# Defaults: MTU 1500, 65536-byte writes, 4 s.  ME_KO: another module to
# load (to profile two builds in one boot).  Output in /tmp/profile
# (perf.data files, reports) and on the console.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
mtu=${1:-1500} size=${2:-65536} secs=${3:-4}
out=/tmp/profile
mkdir -p "$out"
command -v perf >/dev/null || { echo "profile-ns: perf not found (Debian package linux-perf)" >&2; exit 2; }
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
dmesg -C
insmod "${ME_KO:-$top/kernel/multiedge.ko}" ${ME_MODULE_PARAMS:-}
modprobe veth
ip netns add a; ip netns add b
ip link add va netns a mtu "$mtu" type veth peer name vb netns b mtu "$mtu"
ip -n a link set va up; ip -n b link set vb up
ip -n a link set lo up; ip -n b link set lo up
ip -n a addr add 10.9.2.1/24 dev va; ip -n b addr add 10.9.2.2/24 dev vb
ip netns exec a "$B/mectl" attach va
ip netns exec b "$B/mectl" attach vb
for ((i = 0; i < 100; i++)); do
	ip netns exec a "$B/mectl" peers 2>/dev/null | grep -q alive && break
	sleep 0.1
done

report() { # NAME
	perf report -i "$out/$1.data" --no-children --sort sym --stdio >"$out/$1.full" 2>/dev/null || true
	grep -v '^#' "$out/$1.full" | grep -v '^$' | head -40 >"$out/$1.txt" || true
	# Which thread on which vCPU: shows whether both sides' work overlaps
	# (benchmarks.md, "over veth one CPU does both sides' work").
	perf report -i "$out/$1.data" --no-children --sort cpu,comm --stdio 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -12 >"$out/$1.threads" || true
}

ip netns exec b "$B/me_bench" server --idle 60 >"$out/server.log" 2>&1 &
spid=$!
sleep 0.5
perf record -a -o "$out/me.data" -- \
	ip netns exec a "$B/me_bench" client --test oneway --sizes "$size" \
	--seconds "$secs" --min-iters 8 --csv "$out/me.csv" --label profile >"$out/me.log" 2>&1
wait "$spid" || true
ip netns exec a "$B/mectl" counters >"$out/me-counters.txt" 2>&1 || true

ip netns exec b iperf3 -s -1 >"$out/iperf-server.log" 2>&1 &
spid=$!
sleep 0.5
perf record -a -o "$out/tcp.data" -- \
	ip netns exec a iperf3 -c 10.9.2.2 -l "$size" -t "$secs" >"$out/tcp.log" 2>&1
wait "$spid" || true

report me
report tcp
echo "=== multiedge: $(grep -v '^system' "$out/me.csv" | tail -1)"
echo "=== TCP: $(grep -E 'sender$' "$out/tcp.log" | tail -1)"
echo "=== multiedge profile (MTU $mtu, $size B writes)"
cat "$out/me.txt"
echo "=== multiedge by vCPU and thread"
cat "$out/me.threads"
echo "=== TCP profile"
cat "$out/tcp.txt"
echo "=== TCP by vCPU and thread"
cat "$out/tcp.threads"
echo "=== multiedge counters"
cat "$out/me-counters.txt"
ip netns del a; ip netns del b
sleep 0.5
rmmod multiedge
dmesg | grep -E "WARNING|BUG|Oops" && exit 1
exit 0
