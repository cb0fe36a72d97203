#!/bin/bash
# What congestion control does to a stream over a lossy link between two
# guests: node 0 writes one way to node 1's `me_bench server` while
# `netem` drops LOSS% of the frames on both guests' eth0; for each of RUNS
# runs it prints the run's MB/s, the sender's engine counters over the
# run (data packets, resent by loss and by timeout, timeouts, needless
# ones, losses taken for a queue's -- by which rule -- and for random,
# the window's cuts by each cause, resets, undos) and its path to node 1
# every 0.25 s (round trip and delay of data, base, noise, target, window,
# bytes in flight).
#   scripts/vm --nodes 2 --links 1 --timeout 300 -- bench/loss-trace.sh [LOSS [SIZE [SECS [RUNS]]]]
# Defaults: 1% loss, 1 MiB writes, 6 s per run, 3 runs.  ME_KO: another
# module to load; ME_MODULE_PARAMS: its parameters (set them in a wrapper
# script run under scripts/vm: it does not pass the host's environment
# on).  The two nodes meet in build/loss-trace/.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
loss=${1:-1} size=${2:-1048576} secs=${3:-6} runs=${4:-3}
node=${ME_NODE:?run under scripts/vm --nodes 2}
sh=$top/build/loss-trace
# Waits without starting a process (benchmarks.md, Method).
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u "$nap_fd" || :; }
. "$top/bench/pair-dir.sh"
pair_dir "$sh"
dmesg -C
insmod "${ME_KO:-$top/kernel/multiedge.ko}" ${ME_MODULE_PARAMS:-} || exit 1
ip link set eth0 mtu 1500 up
"$B/mectl" attach eth0 >/dev/null
modprobe -q sch_netem
for ((i = 0; i < 300; i++)); do "$B/mectl" peers 2>/dev/null | grep -q alive && break; nap 0.1; done
tc qdisc add dev eth0 root netem loss "$loss%" || exit 1

finish() {
	tc qdisc del dev eth0 root 2>/dev/null
	rmmod multiedge
	dmesg | grep -E "WARNING|BUG|Oops" && exit 1
	exit 0
}
if [ "$node" -eq 1 ]; then
	"$B/me_bench" server --idle 120 >/tmp/server.log 2>&1 &
	touch "$sh/ready"
	while [ ! -e "$sh/done" ]; do nap 0.2; done
	kill %1 2>/dev/null; wait
	finish
fi
for ((i = 0; i < 600; i++)); do [ -e "$sh/ready" ] && break; nap 0.1; done
nap 1

# The sender's counters, NAME=VALUE.
counters() {
	"$B/mectl" stats | awk '$1 ~ /^(tx_data|tx_rtx_loss|tx_rtx_rto|rto_fired|rtx_spurious|cc_loss_queue|cc_loss_random|cc_queue_delay|cc_queue_burst|cc_queue_full|cc_cut_loss|cc_cut_delay|cc_cut_rto|cc_reset|cc_undo|cc_calm)$/ {
		printf "%s=%s ", $1, $2}'
}
# Over a run: each counter's growth.
growth() { # BEFORE AFTER
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) { split(x[i], p, "="); split(y[i], q, "=");
			printf "%s %d, ", p[1], q[2] - p[2] }
		print "" }'
}
echo "loss-trace: $loss% netem loss on both guests, $size-byte writes, $secs s per run"
for ((r = 1; r <= runs; r++)); do
	echo "run $r (the path every 0.25 s):"
	before=$(counters)
	(
		end=$((SECONDS + secs + 2))
		while [ $SECONDS -lt $end ]; do
			nap 0.25
			"$B/mectl" nbrs 2>/dev/null | awk '$3 ~ /:/ && $4 == "alive" {
				print "    data_rtt", $6, "delay", $7, "base", $8, "noise", $9, "target", $10,
				      "cwnd", $12, "inflight", $13; exit}'
		done
	) &
	sampler=$!
	res=$("$B/me_bench" client --test oneway --sizes "$size" --seconds "$secs" --keep-server 2>&1)
	wait $sampler
	grep -qE 'MB/s' <<<"$res" || echo "loss-trace: me_bench failed: $res" >&2
	echo "  $(grep -E 'MB/s' <<<"$res" | tail -1)"
	echo "  sender: $(growth "$before" "$(counters)")"
done
touch "$sh/done"
finish
