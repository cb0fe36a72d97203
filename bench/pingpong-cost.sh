#!/bin/bash
# What an 8-byte ping-pong's round trip costs the two guests: node 0 runs
# `me_bench pingpong` against node 1's `me_bench server`, then `me_bench
# tcp-pingpong` against node 1's `me_bench tcp-echo` (the same loop and
# statistics), each for the same time, while both nodes count, over the
# middle of each run, their busy CPU, eth0's frames each way, interrupts,
# context switches, softirqs, and how often the module's timer and
# receive threads, workers and ksoftirqd ran (ran_*).  Prints each
# system's RTT/2 (median, mean) and, per round trip on each node, those
# counts.  No `perf` unless PERF=1: recording in the guests moves these
# figures by more than the differences looked for (benchmarks.md,
# Latency).
#   scripts/vm --nodes 2 --links 1 --timeout 400 -- bench/pingpong-cost.sh [SECONDS [SIZE]]
# Defaults: 4 s per system (counted over the middle SECONDS-2 s), 8 bytes.
# ME_KO: another module to load; ME_MODULE_PARAMS: its parameters; PERF=1:
# also `perf record -a` on both nodes, top symbols printed.  Set them in
# the guest (a wrapper script run under scripts/vm): scripts/vm does not
# pass the host's environment on.  The two nodes meet in
# build/pingpong-cost/.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
secs=${1:-4} size=${2:-8}
rec=$((secs - 2))
[ "$rec" -ge 1 ] || { echo "pingpong-cost: SECONDS must be at least 3" >&2; exit 2; }
node=${ME_NODE:?run under scripts/vm --nodes 2}
sh=$top/build/pingpong-cost
perf=${PERF:-0}
[ "$perf" != 1 ] || command -v perf >/dev/null ||
	{ echo "pingpong-cost: perf not found (Debian package linux-perf)" >&2; exit 2; }
# Waits without starting a process (benchmarks.md, Method).
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u "$nap_fd" || :; }
. "$top/bench/pair-dir.sh"
pair_dir "$sh"
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
dmesg -C
insmod "${ME_KO:-$top/kernel/multiedge.ko}" ${ME_MODULE_PARAMS:-} || exit 1
ip link set eth0 mtu 1500 up
ip addr add "10.9.0.$((node + 1))/24" dev eth0
"$B/mectl" attach eth0 >/dev/null
for ((i = 0; i < 300; i++)); do "$B/mectl" peers 2>/dev/null | grep -q alive && break; nap 0.1; done

. "$top/bench/cpu-clock.sh"
# One snapshot: the busy and whole time in 1/100 s (cpu-clock.sh), eth0's
# frames in and out, interrupts, context switches, and the softirqs by
# kind.
snap() {
	local t i
	read -r t i < <(cpu_clock)
	echo "busy $((t - i))"
	echo "ticks $t"
	awk '/^intr/ {print "intr", $2} /^ctxt/ {print "ctxt", $2}' /proc/stat
	echo "rx_frames $(cat /sys/class/net/eth0/statistics/rx_packets)"
	echo "tx_frames $(cat /sys/class/net/eth0/statistics/tx_packets)"
	# The softirqs by kind; then, from every thread's status, how often
	# each kind of thread was switched out (voluntarily or not), so which
	# of them a round trip wakes: the module's timer and receive threads,
	# workers, ksoftirqd.  A thread that exits between two snapshots takes
	# its count along (so not me_bench, whose threads come and go with its
	# runs).  One awk for both: each process started here is CPU counted.
	awk 'FILENAME == "/proc/softirqs" {
			if ($1 ~ /^(TIMER|NET_RX|HRTIMER|RCU|SCHED):$/) {
				s = 0; for (i = 2; i <= NF; i++) s += $i
				sub(":", "", $1); print $1, s
			}
			next
		}
		/^Name:/ {n = $2; sub(/\/.*/, "", n)}
		/^(voluntary|nonvoluntary)_ctxt_switches:/ {ran[n] += $2}
		END {split("me-timer me-rx kworker ksoftirqd", k, " ")
			for (i = 1; i <= 4; i++) print "ran_" k[i], ran[k[i]] + 0}' \
		/proc/softirqs /proc/[0-9]*/task/[0-9]*/status 2>/dev/null
}
# Over a run of SYS: the counts over [1, 1 + rec] s after its start.
record() { # SYS
	local pr=()
	[ "$perf" != 1 ] || pr=(perf record -a -o "/tmp/$1.data" --)
	"${pr[@]}" bash -c "
		exec {n}<> <(:)
		touch $sh/rec-$1-$node
		while [ ! -e $sh/start-$1 ]; do read -rt 0.02 -u \$n || :; done
		read -rt 1 -u \$n; $(declare -f cpu_clock snap); snap >$sh/$1-$node.0
		read -rt $rec -u \$n; snap >$sh/$1-$node.1
		while [ ! -e $sh/stop-$1 ]; do read -rt 0.05 -u \$n || :; done" 2>/dev/null
	[ "$perf" != 1 ] || perf report -i "/tmp/$1.data" --no-children --sort comm,sym --stdio 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -30 >"$sh/$1-$node.prof"
	touch "$sh/recd-$1-$node"
}

if [ "$node" -eq 1 ]; then
	"$B/me_bench" server --idle 120 >/tmp/server.log 2>&1 &
	"$B/me_bench" tcp-echo --idle 120 >/tmp/echo.log 2>&1 &
fi
for sys in me tcp; do
	record $sys &
	rp=$!
	while [ ! -e $sh/rec-$sys-0 ] || [ ! -e $sh/rec-$sys-1 ]; do nap 0.05; done
	if [ "$node" -eq 0 ]; then
		nap 0.3
		touch $sh/start-$sys
		if [ $sys = me ]; then
			"$B/me_bench" client --test pingpong --sizes "$size" --seconds "$secs" \
				--csv $sh/me.csv --label cost >$sh/me.log 2>&1 ||
				echo "pingpong-cost: me_bench pingpong failed: $(cat $sh/me.log)" >&2
		else
			"$B/me_bench" tcp-pingpong --connect 10.9.0.2 --sizes "$size" --seconds "$secs" \
				--csv $sh/tcp.csv --label cost >$sh/tcp.log 2>&1 ||
				echo "pingpong-cost: me_bench tcp-pingpong failed: $(cat $sh/tcp.log)" >&2
		fi
		touch $sh/stop-$sys
	fi
	wait $rp
done
if [ "$node" -eq 1 ]; then
	touch $sh/n1done
	while [ ! -e $sh/n0done ]; do nap 0.1; done
	rmmod multiedge
	dmesg | grep -E "WARNING|BUG|Oops" && exit 1
	exit 0
fi
while [ ! -e $sh/n1done ]; do nap 0.1; done
touch $sh/n0done

# Column NAME of the one row of CSV.
col() { awk -F, -v k="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == k) c = i} NR == 2 {print $c}' "$1"; }
for sys in me tcp; do
	name=$([ $sys = me ] && echo "multiedge (me_bench pingpong)" || echo "TCP (me_bench tcp-pingpong)")
	[ -s $sh/$sys.csv ] || { echo "=== $name: no result"; continue; }
	rt=$(col $sh/$sys.csv ops_per_s)
	echo "=== $name, $size B: RTT/2 median $(col $sh/$sys.csv lat_median_us) us, mean" \
		"$(col $sh/$sys.csv lat_mean_us) us, p99 $(col $sh/$sys.csv lat_p99_us) us; $rt round trips/s"
	for n in 0 1; do
		paste -d' ' $sh/$sys-$n.0 $sh/$sys-$n.1 | awk -v rt="$rt" -v r="$rec" -v n="$n" '
			{d[$1] = $4 - $2; order[NR] = $1}
			END {
				per = rt * r
				printf "    node %d: busy %.0f%%, CPU per round trip %.0f us", n,
					100 * d["busy"] / d["ticks"], d["busy"] / 100 * 1e6 / per
				for (i = 1; i <= NR; i++) { k = order[i]; if (k != "busy" && k != "ticks")
					printf ", %s %.2f", k, d[k] / per }
				print " (per round trip)"
			}'
	done
done
if [ "$perf" = 1 ]; then
	for sys in me tcp; do for n in 0 1; do
		echo "=== $sys, node $n: top symbols"
		cat $sh/$sys-$n.prof
	done; done
fi
rmmod multiedge
dmesg | grep -E "WARNING|BUG|Oops" && exit 1
exit 0
