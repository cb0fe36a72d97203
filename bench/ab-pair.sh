#!/bin/bash
# Two builds (or two settings) of the module side by side with TCP,
# between two guests: node 0 writes one way to node 1 over eth0 with
# module A, then module B, then TCP (iperf3, no module loaded), and again
# for each repetition, so all three share the boot and the host's load.
# Both nodes load the same build for each run.  Prints each run's MB/s
# and the sender's counters over it (data packets, resent by loss and by
# timeout, timeouts, the window's cuts by cause, calms), then the medians
# and B's and TCP's ratio to A.
#   scripts/vm --nodes 2 --links 1 --timeout 900 -- bench/ab-pair.sh A.ko B.ko [REPS [SIZE [SECS [LOSS]]]]
# Defaults: 5 repetitions, 65536-byte writes, 4 s per run, no loss (LOSS:
# percent dropped by `netem` on both guests' eth0, for every run).
# ME_A_PARAMS, ME_B_PARAMS: module parameters for each (the same .ko
# twice compares two settings); set them in a wrapper script run under
# scripts/vm, which does not pass the host's environment on.  The two
# nodes meet in build/ab-pair/.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
usage="usage: ab-pair.sh A.ko B.ko [REPS [SIZE [SECS [LOSS]]]]"
ko_a=${1:?$usage} ko_b=${2:?$usage}
reps=${3:-5} size=${4:-65536} secs=${5:-4} loss=${6:-0}
node=${ME_NODE:?run under scripts/vm --nodes 2}
sh=$top/build/ab-pair
for f in "$ko_a" "$ko_b"; do
	[ -r "$f" ] || { echo "ab-pair: cannot read $f" >&2; exit 2; }
done
[[ $reps =~ ^[1-9][0-9]*$ && $size =~ ^[1-9][0-9]*$ && $secs =~ ^[1-9][0-9]*$ &&
   $loss =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$usage" >&2; exit 2; }
# Waits without starting a process (benchmarks.md, Method).
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u "$nap_fd" || :; }
wait_for() { # FILE: up to 120 s
	local i
	for ((i = 0; i < 2400; i++)); do [ -e "$sh/$1" ] && return 0; nap 0.05; done
	echo "ab-pair: node $node waited 120 s for $1" >&2
	return 1
}
. "$top/bench/pair-dir.sh"
pair_dir "$sh"
dmesg -C
ip link set eth0 mtu 1500 up
ip addr add "10.9.0.$((node + 1))/24" dev eth0
if [ "$loss" != 0 ]; then
	modprobe -q sch_netem
	tc qdisc add dev eth0 root netem loss "$loss%" || exit 1
fi

# Loads variant V (a or b) and attaches eth0.
load() {
	local ko=$ko_a params=${ME_A_PARAMS:-}
	[ "$1" = a ] || { ko=$ko_b; params=${ME_B_PARAMS:-}; }
	# shellcheck disable=SC2086 # the parameters are words
	insmod "$ko" $params || return 1
	"$B/mectl" attach eth0 >/dev/null
}
unload() {
	rmmod multiedge || return 1
	! dmesg | grep -E "WARNING|BUG|Oops"
}

if [ "$node" -eq 1 ]; then
	for ((r = 1; r <= reps; r++)); do
		for v in a b; do
			wait_for "go-$r-$v" || exit 1
			load "$v" || exit 1
			"$B/me_bench" server --idle 120 >"/tmp/server-$r-$v.log" 2>&1 &
			touch "$sh/ready-$r-$v"
			wait_for "end-$r-$v" || exit 1
			kill %%; wait %% 2>/dev/null
			unload || exit 1
			touch "$sh/gone-$r-$v"
		done
		# One client, then it exits: a server that a failed test left
		# stuck cannot hold the next repetition.
		iperf3 -s -1 >"/tmp/iperf-server-$r.log" 2>&1 &
		touch "$sh/tcp-ready-$r"
		wait_for "tcp-end-$r" || exit 1
		kill %% 2>/dev/null; wait
	done
	tc qdisc del dev eth0 root 2>/dev/null
	exit 0
fi

# The sender's counters, NAME=VALUE.
names='tx_data|tx_rtx_loss|tx_rtx_rto|rto_fired|cc_cut_loss|cc_cut_delay|cc_cut_rto|cc_reset|cc_calm'
counters() { "$B/mectl" stats | awk -v re="^($names)\$" '$1 ~ re {printf "%s=%s ", $1, $2}'; }
growth() { # BEFORE AFTER
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) { split(x[i], p, "="); split(y[i], q, "=");
			printf "%s %d, ", p[1], q[2] - p[2] }
		print "" }'
}
median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

echo "ab-pair: A $ko_a ${ME_A_PARAMS:-}; B $ko_b ${ME_B_PARAMS:-}; $reps repetitions," \
	"$size-byte writes, $secs s per run, $loss% loss"
: >"/tmp/ab-a" >"/tmp/ab-b" >"/tmp/ab-tcp"
for ((r = 1; r <= reps; r++)); do
	for v in a b; do
		touch "$sh/go-$r-$v"
		load "$v" || exit 1
		wait_for "ready-$r-$v" || exit 1
		for ((i = 0; i < 300; i++)); do
			"$B/mectl" peers 2>/dev/null | grep -q alive && break
			nap 0.1
		done
		before=$(counters)
		res=$("$B/me_bench" client --test oneway --sizes "$size" --seconds "$secs" 2>&1)
		after=$(counters)
		touch "$sh/end-$r-$v"
		mbs=$(sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p' <<<"$res" | tail -1)
		[ -n "$mbs" ] || { echo "ab-pair: me_bench failed ($v, run $r): $res" >&2; exit 1; }
		echo "$mbs" >>"/tmp/ab-$v"
		echo "run $r ${v^^}: $mbs MB/s; $(growth "$before" "$after")"
		wait_for "gone-$r-$v" || exit 1
		unload || exit 1
	done
	wait_for "tcp-ready-$r" || exit 1
	tcp=
	for ((i = 0; i < 50; i++)); do
		tcp=$(iperf3 -c 10.9.0.2 -l "$size" -t "$secs" -J 2>/dev/null |
			python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e6))' 2>/dev/null) && break
		nap 0.2
	done
	touch "$sh/tcp-end-$r"
	[ -n "$tcp" ] || { echo "ab-pair: iperf3 failed (run $r)" >&2; exit 1; }
	echo "$tcp" >>/tmp/ab-tcp
	echo "run $r TCP: $tcp MB/s"
done
ma=$(median </tmp/ab-a) mb=$(median </tmp/ab-b) mt=$(median </tmp/ab-tcp)
awk -v a="$ma" -v b="$mb" -v t="$mt" 'BEGIN {
	printf "medians: A %.1f, B %.1f, TCP %.1f MB/s; B/A %.2fx, A/TCP %.2fx, B/TCP %.2fx\n",
		a, b, t, b / a, a / t, b / t }'
tc qdisc del dev eth0 root 2>/dev/null
exit 0
