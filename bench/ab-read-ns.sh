#!/bin/bash
# Two builds of the module side by side, remote reads against writes, in
# one guest: two namespaces joined by one veth pair, `me_bench --test
# read` and `--test oneway` at 1 and 8 in flight, the modules alternating
# in every round (same boot, same host contention).  Prints one CSV row
# per run: label (module-mtu-depth), test, size, depth, MB/s, median us.
#   scripts/vm --timeout 900 -- bench/ab-read-ns.sh OLD.ko NEW.ko [ROUNDS [MTUS [SIZES]]]
# Defaults: 2 rounds, MTU 1500 and 9000, sizes 65536,1048576, 2 s each.
# PARAMS_OLD, PARAMS_NEW: module parameters for each (set them in a
# wrapper run under scripts/vm, which does not pass the environment on).
# Output in /tmp/ab-read.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
. "$top/bench/ns-module.sh"
usage="usage: ab-read-ns.sh OLD.ko NEW.ko [ROUNDS [MTUS [SIZES]]]"
ko_a=${1:?$usage}
ko_b=${2:?$usage}
rounds=${3:-2} mtus=${4:-1500 9000} sizes=${5:-65536,1048576}
out=/tmp/ab-read
rm -rf "$out"; mkdir -p "$out"
: >"$out/all.csv"
dmesg -C
modprobe veth

run() { # KO LABEL MTU [PARAMS...]
	ns_pair "$3"
	ns_load "$1" "${@:4}" || exit 1
	for d in 1 8; do
		for t in read oneway; do
			# The server serves one session, then exits.
			ip netns exec b "$B/me_bench" server --idle 60 >"$out/server.log" 2>&1 &
			local spid=$!
			rm -f "$out/r.csv"
			if ip netns exec a "$B/me_bench" client --test "$t" --sizes "$sizes" \
				--depth "$d" --seconds 2 --csv "$out/r.csv" \
				--label "$2-mtu$3-d$d" >"$out/client.log" 2>&1; then
				grep -v '^label' "$out/r.csv" >>"$out/all.csv"
			else
				echo "ab-read-ns: $2 $t depth $d failed:" >&2
				cat "$out/client.log" >&2
			fi
			wait "$spid" || true
		done
	done
	ip netns del a; ip netns del b
	ns_unload
}

for ((r = 0; r < rounds; r++)); do
	for mtu in $mtus; do
		# shellcheck disable=SC2086 # parameters, one word each
		run "$ko_a" old "$mtu" ${PARAMS_OLD:-}
		# shellcheck disable=SC2086
		run "$ko_b" new "$mtu" ${PARAMS_NEW:-}
	done
done
echo "label,test,size,depth,mbps,lat_median_us"
cut -d, -f1-3,5,9,10 "$out/all.csv" | sort -t, -k2,2 -k1,1 -k3,3n
dmesg | grep -E "WARNING|BUG|Oops" && exit 1
exit 0
