#!/bin/bash
# The op-rate test (me_bench --test oprate) without the emulated network:
# one guest, two network namespaces joined by a veth pair, both ends on the
# guest's CPUs, so the rate is what the guest's CPU(s) can do per write.
#   scripts/vm --cpus 1 --timeout 900 -- bench/try-oprate-ns.sh [REPS] [SECONDS]
# Runs the ioctl door and io_uring batches 1, 16, 64 at 8 B and 4 KiB, 128
# in flight, REPS (default 3) repetitions back to back; rows in
# build/try-oprate-ns/oprate.csv, then bench/collect.py's table (phase U).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin out=$top/build/try-oprate-ns
reps=${1:-3} secs=${2:-2}
rm -rf "$out"; mkdir -p "$out/raw"
dmesg -C
insmod "$top/kernel/multiedge.ko"
modprobe veth
ip netns add a; ip netns add b
ip link add va netns a type veth peer name vb netns b
ip -n a link set va up; ip -n b link set vb up
ip -n a link set lo up; ip -n b link set lo up
ip netns exec a "$B/mectl" attach va
ip netns exec b "$B/mectl" attach vb
rc=0
for ((i = 1; i <= reps; i++)); do
	for v in "ioctl" "uring 1" "uring 16" "uring 64"; do
		set -- $v
		args=(--door "$1"); [ "$1" = uring ] && args+=(--batch "$2")
		ip netns exec b timeout 300 "$B/me_bench" server --idle 60 >>"$out/server.log" 2>&1 &
		sp=$!
		ip netns exec a timeout 300 "$B/me_bench" client --test oprate "${args[@]}" --depth 128 \
			--sizes 8,4096 --seconds "$secs" --warmup 0.5 --min-iters 256 \
			--csv "$out/raw/multiedge.csv" --label "U rep=$i" || rc=1
		wait "$sp" || rc=1
	done
done
echo "--- refused ioctl, guest's getppid for scale"
perf bench syscall basic -l 200000 2>/dev/null | grep -E "usecs/op" || true
ip netns exec a "$B/mectl" counters | sed -n '/^engine/,$p' | grep -E "tx_data|tx_rtx|tx_ack|rto_fired"
ip netns del a; ip netns del b
sleep 1
rmmod multiedge || rc=1
dmesg | grep -E "WARNING|BUG|Oops" && rc=1
/usr/bin/python3 "$top/bench/collect.py" "$out" 2>/dev/null | sed -n '/Operation rate/,$p'
echo "try-oprate-ns rc=$rc"
exit $rc
