#!/bin/bash
# Two builds of the module side by side with TCP, in one guest: two
# namespaces joined by one veth pair, one-way writes at each MTU and size,
# the modules and TCP interleaved in every repetition (same boot, same
# host contention).  Prints the medians of MB/s, whole-guest busy CPU
# ticks per MB, and for multiedge the client's data frames and the
# server's acks per MB.
#   scripts/vm --timeout 1200 -- bench/ab-ns.sh OLD.ko NEW.ko [REPS [SIZES [MTUS]]]
# Defaults: 3 repetitions, sizes 65536,1048576, MTUs 1500 9000.
# ME_A_PARAMS, ME_B_PARAMS: module parameters for each (the same .ko twice
# compares two settings).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
. "$top/bench/ns-module.sh"
ko_a=${1:?usage: ab-ns.sh OLD.ko NEW.ko [REPS [SIZES [MTUS]]]}
ko_b=${2:?usage: ab-ns.sh OLD.ko NEW.ko [REPS [SIZES [MTUS]]]}
reps=${3:-3} sizes=${4:-65536,1048576} mtus=${5:-1500 9000}
secs=2
out=/tmp/ab
rm -rf "$out"; mkdir -p "$out"
modprobe veth

. "$top/bench/cpu-clock.sh"
# Busy time in 1/100 s (the clock's less the idle ticks), and the idle.
busy_ticks() { local t i; read -r t i < <(cpu_clock); echo "$((t - i)) $i"; }


# Engine counter NAME of namespace NS (`mectl stats`).
counter() { ip netns exec "$1" "$B/mectl" stats 2>/dev/null | awk -v k="$2" '$1 == k {print $2; exit}'; }

run_me() { # LABEL MTU SIZE
	local t0 t1 i0 i1 d0 d1 a0 a1
	ip netns exec b "$B/me_bench" server --idle 60 >>"$out/server.log" 2>&1 &
	local sp=$!
	sleep 0.3
	d0=$(counter a tx_data); a0=$(counter b tx_ack)
	read -r t0 i0 < <(busy_ticks)
	ip netns exec a "$B/me_bench" client --test oneway --sizes "$3" --seconds "$secs" \
		--min-iters 8 --csv "$out/me.csv" --label "$1 mtu=$2" >>"$out/client.log" 2>&1 ||
		echo "ab-ns: me_bench failed ($1, MTU $2, $3 B)" >&2
	read -r t1 i1 < <(busy_ticks)
	d1=$(counter a tx_data); a1=$(counter b tx_ack)
	wait "$sp" 2>/dev/null || true
	local mbps
	mbps=$(tail -1 "$out/me.csv" | awk -F, -v h="$(head -1 "$out/me.csv")" \
		'BEGIN{n=split(h,c,",");for(i=1;i<=n;i++)if(c[i]=="mbps")m=i}{print $m}')
	echo "$1 $2 $3 $mbps $t0 $t1 $i0 $i1 ${d0:-0} ${d1:-0} ${a0:-0} ${a1:-0}" >>"$out/rows"
}

run_tcp() { # MTU SIZE
	local t0 t1 i0 i1
	ip netns exec b iperf3 -s -1 >>"$out/iperf-server.log" 2>&1 &
	local sp=$!
	sleep 0.3
	read -r t0 i0 < <(busy_ticks)
	ip netns exec a iperf3 -c 10.9.3.2 -l "$2" -t "$secs" -J >"$out/iperf.json" 2>&1 || true
	read -r t1 i1 < <(busy_ticks)
	wait "$sp" 2>/dev/null || true
	local mbps
	mbps=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % (d["end"]["sum_received"]["bytes"] / d["end"]["sum_received"]["seconds"] / 1e6))' "$out/iperf.json" 2>/dev/null || echo 0)
	echo "tcp $1 $2 $mbps $t0 $t1 $i0 $i1 0 0 0 0" >>"$out/rows"
}

for ((r = 1; r <= reps; r++)); do
	for mtu in $mtus; do
		ns_pair "$mtu" 10.9.3
		for size in ${sizes//,/ }; do
			order="a b"
			((r % 2)) || order="b a"
			for which in $order; do
				ko=$ko_a params=${ME_A_PARAMS:-}
				[ "$which" = b ] && ko=$ko_b params=${ME_B_PARAMS:-}
				# shellcheck disable=SC2086 # a list of parameters
				ns_load "$ko" $params || exit 1
				run_me "$which" "$mtu" "$size"
			done
			run_tcp "$mtu" "$size"
		done
	done
	echo "ab-ns: repetition $r of $reps done"
done
ns_unload
ip netns del a; ip netns del b

python3 - "$out/rows" "$ko_a" "$ko_b" "${ME_A_PARAMS:-}" "${ME_B_PARAMS:-}" <<'EOF'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
res = {}
for sysname, mtu, size, mbps, t0, t1, i0, i1, d0, d1, a0, a1 in rows:
    busy = int(t1) - int(t0)
    key = (int(mtu), int(size), sysname)
    res.setdefault(key, []).append((float(mbps), busy, int(d1) - int(d0), int(a1) - int(a0)))
print("a = %s %s\nb = %s %s" % (sys.argv[2], sys.argv[4], sys.argv[3], sys.argv[5]))
print("| MTU | size | system | MB/s (median) | per repetition | busy ticks/MB | data frames/MB | acks/MB |")
print("|---:|---:|---|---:|---|---:|---:|---:|")
for key in sorted(res):
    v = res[key]
    mbs = [x[0] for x in v]
    # ticks (1/100 s of one CPU) per MB moved: busy / (MB/s * seconds)
    secs = 2.0
    tpm = [x[1] / (x[0] * secs) for x in v if x[0] > 0]
    dpm = [x[2] / (x[0] * secs) for x in v if x[0] > 0]
    apm = [x[3] / (x[0] * secs) for x in v if x[0] > 0]
    med = lambda l: statistics.median(l) if l else 0
    print("| %d | %d | %s | %.1f | %s | %.2f | %s | %s |" % (
        key[0], key[1], key[2], med(mbs), ", ".join("%.1f" % m for m in mbs), med(tpm),
        "%.0f" % med(dpm) if key[2] != "tcp" else "-", "%.0f" % med(apm) if key[2] != "tcp" else "-"))
EOF
dmesg | grep -E "WARNING|BUG|Oops" && exit 1
exit 0
