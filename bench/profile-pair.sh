#!/bin/bash
# Where the receiver's CPU goes between two guests: node 0 writes one-way
# to node 1 over eth0 with multiedge and then with TCP (iperf3), each for
# the same time, while node 1 records `perf record -a` and its busy CPU
# over the middle of each run, and node 0 its own busy CPU over the same
# stretch.  Prints each system's rate over the run and over the window,
# both nodes' busy CPU per MB moved in the window, their frames each way
# and virtio interrupts per MB, and the receiver's profiles' top symbols.
#   scripts/vm --nodes 2 --links 1 --timeout 600 -- bench/profile-pair.sh [SIZE [SECONDS [MTU]]]
# Defaults: 1 MiB writes, 6 s (node 1 records the middle SECONDS-2 s), eth0
# at MTU 1500 on both nodes.
# ME_KO: another module to load; ME_MODULE_PARAMS: its parameters;
# ME_PERF=0: no perf (its sampling costs a TCG guest a share of its CPU
# per frame, so busy figures with it run high); the CPU splits and the
# threads' figures are printed either way; ME_PERF=sender: the sender
# records instead, from its run's start to its stop; ME_PERF_ARGS: more
# perf record options (-g); ME_PERF_CALLERS, ME_PERF_ANNOTATE: see
# perf_detail() below;
# ME_BENCH_ARGS: more me_bench client options (--depth 16); ME_PATHS=1:
# sample the sender's paths.  Set them in the guest (a wrapper script run
# under scripts/vm): scripts/vm does not pass the host's environment on.
# The two nodes meet in build/profile-pair/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
size=${1:-1048576} secs=${2:-6} mtu=${3:-1500}
rec=$((secs - 2))
[ "$rec" -ge 1 ] || { echo "profile-pair: SECONDS must be at least 3" >&2; exit 2; }
node=${ME_NODE:?run under scripts/vm --nodes 2}
sh=$top/build/profile-pair
# Waits without starting a process (a sleep(1) in these polling loops is a
# fork and an exec on the CPUs being measured; benchmarks.md, Method).
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u "$nap_fd" || :; }
out=/tmp/profile
mkdir -p "$out"
command -v perf >/dev/null || { echo "profile-pair: perf not found (Debian package linux-perf)" >&2; exit 2; }
. "$top/bench/pair-dir.sh"
pair_dir "$sh"
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
dmesg -C
insmod "${ME_KO:-$top/kernel/multiedge.ko}" ${ME_MODULE_PARAMS:-}
ip link set eth0 mtu "$mtu" up
ip addr add "10.9.0.$((node + 1))/24" dev eth0
"$B/mectl" attach eth0 >/dev/null
for ((i = 0; i < 300; i++)); do
	"$B/mectl" peers 2>/dev/null | grep -q alive && break
	nap 0.1
done
touch "$sh/node$node-ready"	# after node 0 emptied the directory: it is attached

# The snapshots below use shell builtins only: a process started inside
# a window (a cat, an awk, a sleep) costs a TCG guest tens of
# milliseconds of CPU, counted as the stream's (an earlier version
# started about a dozen per window).
# eth0's frames received and sent, its virtio interrupts, its bytes
# received and sent so far, and the interrupts of its receive and its
# transmit queues, one line.
net_snap() {
	local st=/sys/class/net/eth0/statistics rp tp rb tb line i q
	local -A irq=([input]=0 [output]=0)
	local -a w
	read -r rp <$st/rx_packets; read -r tp <$st/tx_packets
	read -r rb <$st/rx_bytes; read -r tb <$st/tx_bytes
	while read -r line; do
		[[ $line =~ virtio.*-(input|output) ]] || continue
		q=${BASH_REMATCH[1]}
		read -r -a w <<<"$line"
		for ((i = 1; i < ${#w[@]}; i++)); do
			[[ ${w[i]} =~ ^[0-9]+$ ]] || break
			irq[$q]=$((irq[$q] + w[i]))
		done
	done </proc/interrupts
	echo "$rp $tp $((irq[input] + irq[output])) $rb $tb ${irq[input]} ${irq[output]}"
}
export -f net_snap

# The first line of /proc/stat (the CPUs' busy and idle ticks) and the
# uptime (s).  The busy ticks miss time: a tick counts one jiffy to what
# the CPU was doing when it came, and a TCG vCPU's ticks come late while
# QEMU emulates a device for it or the host runs the other guest (a
# late tick counts one for several); idle time is measured by the
# clock.  So busy time is taken as the uptime's share of all CPUs less
# the idle ticks (benchmarks.md, 2026-12-06), as bench/cpu-clock.sh
# does, here with builtins: no process inside the window.
cpu_snap() { local l u; read -r l </proc/stat; read -r u _ </proc/uptime; echo "$l $u"; }
export -f cpu_snap
ncpu=$(getconf _NPROCESSORS_ONLN)
# FILE (two cpu_snap lines): busy and all ticks, by the ticks and by the
# clock (uptime x CPUs less idle and iowait).
busy_of() {
	awk -v nc="$ncpu" '{b = $2+$3+$4+$7+$8+$9; t = b+$5+$6; u = $12}
		NR == 1 {b0 = b; t0 = t; u0 = u}
		NR == 2 {c = (u - u0) * 100 * nc
			printf "%d %d %.0f %.0f\n", b - b0, t - t0, c - ((t - b) - (t0 - b0)), c}' "$1"
}

# One line per thread that may work for a stream on this node (the
# module's, softirq, the benchmark programs'): comm, CPU ticks (user +
# system), voluntary and involuntary context switches so far.
thr_snap() {
	local d c s k val v n
	local -a f
	for d in /proc/[0-9]*; do
		read -r c 2>/dev/null <"$d/comm" || continue
		case $c in me-*|ksoftirqd*|iperf3|me_bench) ;; *) continue ;; esac
		read -r s 2>/dev/null <"$d/stat" || continue
		read -r -a f <<<"${s##*) }"
		v=0 n=0
		while read -r k val; do
			case $k in
			voluntary_ctxt_switches:) v=$val ;;
			nonvoluntary_ctxt_switches:) n=$val ;;
			esac
		done 2>/dev/null <"$d/status"
		echo "$c $((f[11] + f[12])) $v $n"
	done
}
export -f thr_snap

# Up to 120 s; a failure names what the other node got to (its files).
wait_for() {
	local i
	for ((i = 0; i < 2400; i++)); do [ -e "$sh/$1" ] && return 0; nap 0.05; done
	echo "profile-pair: node $node waited 120 s for $1; build/profile-pair holds:" \
		"$(cd "$sh" && echo *)" >&2
	return 1
}

# The first N lines of a recording's profile sorted by KEYS (perf report
# --sort); with COMM, only the lines of the threads whose names match it.
perf_top() { # DATA KEYS N [COMM]
	local pat='^ +[0-9.]+% '
	[ -z "${4:-}" ] || pat+=" +$4"
	perf report -i "$1" --no-children --sort "$2" --stdio 2>/dev/null |
		grep -E "$pat" | head -"$3" || true
}

# ME_PERF_CALLERS="sym ...": the call chains into those symbols (needs
# ME_PERF_ARGS=-g); ME_PERF_ANNOTATE="sym ...": their hottest
# instructions (printed from a recording without -g; with it this perf
# printed none).  Read while the module is loaded (its symbols).
perf_detail() { # DATA SYS WHO
	local f
	for f in ${ME_PERF_CALLERS:-}; do
		echo "=== $2: the $3's calls to $f"
		perf report -i "$1" --no-children -S "$f" -G --stdio 2>/dev/null |
			grep -v '^#' | grep -v '^$' | head -80 || true
	done
	for f in ${ME_PERF_ANNOTATE:-}; do
		echo "=== $2: the $3's hottest instructions of $f"
		perf annotate -i "$1" --stdio -l "$f" 2>/dev/null |
			grep -E '^ +[0-9]+\.[0-9]+ ' | sort -rn | head -30 || true
	done
}

# Which node records: the receiver (ME_PERF unset or 1), the sender
# (ME_PERF=sender) or neither (0).
rperf=0 sperf=0
case ${ME_PERF:-1} in
1) rperf=1 ;;
sender) sperf=1 ;;
0) ;;
*) echo "profile-pair: ME_PERF is 1, 0 or sender, not '$ME_PERF'" >&2; exit 2 ;;
esac

if [ "$node" -eq 1 ]; then
	exec 3>&2	# for the recording's own messages (its stderr is perf's)
	"$B/me_bench" server --idle 120 >"$out/server.log" 2>&1 &
	iperf3 -s -1 >"$out/iperf-server.log" 2>&1 &
	for sys in me tcp; do
		# Recording before node 0 starts: perf takes seconds to start here.
		# Busy CPU from 1 s after the start for SECONDS-2 s.
		rec_cmd=(perf record -a ${ME_PERF_ARGS:-} -o "$out/$sys.data" --)
		[ "$rperf" = 1 ] || rec_cmd=()
		"${rec_cmd[@]}" bash -c "
			exec {nap}<> <(:)
			touch $sh/recording-$sys
			for ((i = 0; i < 2400; i++)); do
				[ -e $sh/start-$sys ] && break; read -rt 0.05 -u \$nap || :
			done
			[ -e $sh/start-$sys ] || { echo 'profile-pair: node 1 waited 120 s for start-$sys' >&3; exit 1; }
			read -rt 1 -u \$nap || :
			thr_snap >$sh/$sys.thr0; net_snap >$sh/$sys.net; cpu_snap >$sh/$sys.stat
			read -rt $rec -u \$nap || :
			cpu_snap >>$sh/$sys.stat; net_snap >>$sh/$sys.net; thr_snap >$sh/$sys.thr1
			while [ ! -e $sh/stop-$sys ]; do read -rt 0.05 -u \$nap || :; done" 2>/dev/null
		busy_of "$sh/$sys.stat" >"$sh/$sys.busy"
		if [ "$rperf" = 0 ]; then
			: >"$sh/$sys.profile"; : >"$sh/$sys.threads"; : >"$sh/$sys.mythreads"
			touch "$sh/recorded-$sys"
			continue
		fi
		perf_top "$out/$sys.data" sym 45 >"$sh/$sys.profile"
		perf_top "$out/$sys.data" comm 8 >"$sh/$sys.threads"
		# The module's own threads (receive, timer) by symbol.
		perf_top "$out/$sys.data" comm,sym 40 'me-' >"$sh/$sys.mythreads"
		perf_detail "$out/$sys.data" "$sys" receiver >"$sh/$sys.detail"
		touch "$sh/recorded-$sys"
	done
	wait_for finished
	"$B/mectl" counters >"$sh/rx-counters.txt" 2>&1 || true
	touch "$sh/node1-done"
	rmmod multiedge
	dmesg | grep -E "WARNING|BUG|Oops" && exit 1
	exit 0
fi

# The sender's busy CPU over the same stretch as the receiver's.
sender_busy() { # SYS
	(nap 1; thr_snap >"$sh/$1.sthr0"; net_snap >"$sh/$1.snet"; cpu_snap >"$sh/$1.sstat"
	 nap "$rec"; cpu_snap >>"$sh/$1.sstat"; net_snap >>"$sh/$1.snet"
	 thr_snap >"$sh/$1.sthr1") &
}

# ME_PERF=sender: the sender records from before the run's start to its
# stop, as the receiver does by default.
sender_perf() { # SYS
	[ "$sperf" = 1 ] || return 0
	perf record -q -a ${ME_PERF_ARGS:-} -o "$out/$1.sdata" -- bash -c "
		exec {nap}<> <(:)
		touch $sh/srecording-$1
		while [ ! -e $sh/stop-$1 ]; do read -rt 0.05 -u \$nap || :; done" 2>/dev/null &
	spid=$!
	wait_for "srecording-$1"
}
# After the run's stop: perf writes its file before the next run starts.
sender_perf_end() {
	[ "$sperf" = 1 ] || return 0
	wait "$spid" || true
}

wait_for recording-me
sender_perf me
touch "$sh/start-me"
sender_busy me
# ME_PATHS=1: the sender's paths (RTT, delay, congestion window, in flight)
# while it runs; mectl itself costs the sender CPU here.
[ "${ME_PATHS:-0}" = 0 ] || (sleep 1; for ((i = 0; i < rec * 2; i++)); do "$B/mectl" neighbours; sleep 0.5; done) >"$sh/me.paths" 2>&1 &
"$B/me_bench" client --test oneway --sizes "$size" --seconds "$secs" --min-iters 8 \
	${ME_BENCH_ARGS:-} --csv "$sh/me.csv" --label pair >"$out/me.log" 2>&1
touch "$sh/stop-me"
sender_perf_end
# Outside both windows: what the sender's engine did (resends, window
# cuts), and the module's accounting (the frame heads' pages).
{ "$B/mectl" counters && "$B/mectl" info; } >"$sh/tx-counters.txt" 2>&1 || true
wait_for recording-tcp
sender_perf tcp
touch "$sh/start-tcp"
sender_busy tcp
for ((i = 0; i < 50; i++)); do
	iperf3 -c 10.9.0.2 -l "$size" -t "$secs" -J >"$sh/tcp.json" 2>&1 && break
	sleep 0.2
done
touch "$sh/stop-tcp"
sender_perf_end
wait_for recorded-tcp
touch "$sh/finished"
wait_for node1-done

mb_s() { # SYS: MB/s of the run
	case $1 in
	me) awk -F, 'NR > 1 {print $9; exit}' "$sh/me.csv" ;;
	tcp) python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e6))' "$sh/tcp.json" ;;
	esac
}
# Per MB figures are per MB of payload moved within each node's recorded
# window, not at the run's average rate: the busy time is the window's,
# and with perf recording the rate swings by up to 2x within a run, so
# a window's rate may differ from the run's either way (benchmarks.md,
# 2026-12-03, fortieth).  Payload: the
# bytes the node's eth0 took in (receiver) or sent (sender) in its
# window, less each frame's headers (Ethernet 14 and multiedge's 88, or
# TCP/IP's 52 with timestamps; the few acks and keepalives among them are
# counted as data frames).
hdr() { case $1 in me) echo 102 ;; tcp) echo 66 ;; esac; }
# FILE (a .net or .snet window, two net_snap lines) SYS: MB of payload
# the node took in (.net, the receiver) or sent (.snet, the sender).
window_mb() {
	awk -v h="$(hdr "$2")" -v snd="$([[ $1 == *.snet ]] && echo 1 || echo 0)" '
		{p[NR] = snd ? $2 : $1; b[NR] = snd ? $5 : $4}
		END {print (b[2] - b[1] - h * (p[2] - p[1])) / 1e6}' "$1"
}
wait
for sys in me tcp; do
	read -r busy all cbusy call <"$sh/$sys.busy"
	read -r sbusy sall scbusy scall < <(busy_of "$sh/$sys.sstat")
	# Ticks are 1/100 s here (USER_HZ).  The busy figures are the
	# clock's (cpu_snap); the ticks' own, and the share of the window
	# they missed, follow.
	awk -v b="$cbusy" -v a="$call" -v sb="$scbusy" -v sa="$scall" -v m="$(mb_s "$sys")" \
		-v tb="$busy" -v ta="$all" -v tsb="$sbusy" -v tsa="$sall" -v nc="$ncpu" \
		-v n="$sys" -v rmb="$(window_mb "$sh/$sys.net" "$sys")" -v smb="$(window_mb "$sh/$sys.snet" "$sys")" 'BEGIN {
		if (rmb <= 0) rmb = 1e-9
		if (smb <= 0) smb = 1e-9
		printf "=== %s: %.1f MB/s (the run), %.1f MB/s (the receiver\047s window); receiver busy %.0f%%, receiver CPU %.0f us/MB; sender busy %.0f%%, sender CPU %.0f us/MB\n",
			n, m, (a > 0 ? rmb / (a / 100 / nc) : 0), (a > 0 ? 100 * b / a : 0),
			b / 100 * 1e6 / rmb, (sa > 0 ? 100 * sb / sa : 0), sb / 100 * 1e6 / smb
		printf "=== %s: by the busy ticks alone: receiver %.0f us/MB, sender %.0f us/MB; ticks missing from the window: receiver %.0f%%, sender %.0f%%\n",
			n, tb / 100 * 1e6 / rmb, tsb / 100 * 1e6 / smb,
			(a > 0 ? 100 * (a - ta) / a : 0), (sa > 0 ? 100 * (sa - tsa) / sa : 0) }'
done
# Frames each way and virtio interrupts per MB moved, on both nodes: a
# frame or an interrupt costs the emulated machine far more than a byte.
for sys in me tcp; do
	for f in "$sh/$sys.snet" "$sh/$sys.net"; do
		awk -v n="$sys" -v who="$([[ $f == *.snet ]] && echo sender || echo receiver)" \
			-v mb="$(window_mb "$f" "$sys")" '
			FNR == 1 {r0 = $1; t0 = $2; i0 = $3; in0 = $6; out0 = $7; next}
			{if (mb <= 0) mb = 1
			 printf "=== %s: %s per MB: frames in %.0f, out %.0f, virtio interrupts %.0f (receive queue %.0f, transmit queue %.0f)\n",
				n, who, ($1 - r0) / mb, ($2 - t0) / mb, ($3 - i0) / mb,
				($6 - in0) / mb, ($7 - out0) / mb}' "$f"
	done
done
# Where each node's busy time went (/proc/stat: user, system, hard and
# soft interrupts, 1/100 s ticks; "no tick": busy by the clock that no
# tick counted), and each thread's CPU and sleeps
# (voluntary context switches: a receive thread's wakeups) per MB.
for sys in me tcp; do
	for who in sender receiver; do
		if [ "$who" = sender ]; then
			st=$sh/$sys.sstat net=$sh/$sys.snet t0=$sh/$sys.sthr0 t1=$sh/$sys.sthr1
		else
			st=$sh/$sys.stat net=$sh/$sys.net t0=$sh/$sys.thr0 t1=$sh/$sys.thr1
		fi
		mb=$(window_mb "$net" "$sys")
		read -r tb _ cb _ < <(busy_of "$st")
		awk -v n="$sys" -v w="$who" -v mb="$mb" -v lost="$((cb - tb))" '
			NR == 1 {split($0, a); next}
			{if (mb <= 0) mb = 1
			 printf "=== %s: %s CPU per MB (us): user %.0f, system %.0f, irq %.0f, softirq %.0f, no tick %.0f\n",
				n, w, ($2 + $3 - a[2] - a[3]) * 1e4 / mb, ($4 - a[4]) * 1e4 / mb,
				($7 - a[7]) * 1e4 / mb, ($8 - a[8]) * 1e4 / mb, lost * 1e4 / mb}' "$st"
		[ -s "$t0" ] && [ -s "$t1" ] || continue
		awk -v n="$sys" -v w="$who" -v mb="$mb" '
			FNR == NR {t[$1] += $2; v[$1] += $3; x[$1] += $4; next}
			{c[$1] += $2; cv[$1] += $3; cx[$1] += $4}
			END {if (mb <= 0) mb = 1
			 for (k in c) if (c[k] - t[k] > 0 || cv[k] - v[k] > 0)
				printf "=== %s: %s thread %s per MB: CPU %.0f us, sleeps %.0f, preempted %.0f\n",
					n, w, k, (c[k] - t[k]) * 1e4 / mb, (cv[k] - v[k]) / mb, (cx[k] - x[k]) / mb}' "$t0" "$t1"
	done
done
for sys in me tcp; do
	[ -s "$sh/$sys.profile" ] || continue
	echo "=== $sys: receiver's profile"
	cat "$sh/$sys.profile"
	echo "=== $sys: receiver's threads"
	cat "$sh/$sys.threads"
	echo "=== $sys: the module's threads on the receiver, by symbol"
	cat "$sh/$sys.mythreads"
	cat "$sh/$sys.detail"
done
for sys in me tcp; do
	[ -e "$out/$sys.sdata" ] || continue
	echo "=== $sys: sender's profile"
	perf_top "$out/$sys.sdata" sym 45
	echo "=== $sys: sender's threads"
	perf_top "$out/$sys.sdata" comm 8
	echo "=== $sys: the sender's threads by symbol"
	perf_top "$out/$sys.sdata" comm,sym 40 '(me|iperf3|ksoftirqd)'
	perf_detail "$out/$sys.sdata" "$sys" sender
done
if [ -e "$sh/me.paths" ]; then
	echo "=== me: the sender's paths during the run (mectl neighbours)"
	{ grep -m1 node "$sh/me.paths"; grep -v node "$sh/me.paths" | grep . | head -20; } || true
fi
echo "=== receiver's counters"
cat "$sh/rx-counters.txt"
echo "=== sender's counters (after multiedge's run)"
cat "$sh/tx-counters.txt"
rmmod multiedge
dmesg | grep -E "WARNING|BUG|Oops" && exit 1
exit 0
