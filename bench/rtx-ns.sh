#!/bin/bash
# Where multiedge's resent data packets come from on a link that loses
# nothing: one guest, two namespaces joined by one veth pair, one-way
# writes at each MTU and size; after each run the client's retransmissions
# by cause (loss from sacks, timeout, failover), the server's duplicates,
# every drop counter on the way (the link's receive ring, the veth pair,
# the softnet backlog) and the congestion window.
#   scripts/vm --timeout 900 -- bench/rtx-ns.sh [KO [SIZES [MTUS [SECONDS]]]]
# Defaults: build/kernel/multiedge.ko (the tests' ME_KO if set),
# 65536,1048576, MTUs 1500 9000, 2 s.  ME_MODULE_PARAMS adds parameters.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=${ME_BIN:-$top/build/bin}
. "$top/bench/ns-module.sh"
ko=${1:-${ME_KO:-$top/kernel/multiedge.ko}}
sizes=${2:-65536,1048576} mtus=${3:-1500 9000} secs=${4:-2}
out=$top/build/rtx-ns
rm -rf "$out"; mkdir -p "$out"
modprobe veth


stats() { ip netns exec "$1" "$B/mectl" stats 2>/dev/null; }
softnet_drops() { local s=0 d; while read -r _ d _; do s=$((s + 16#$d)); done </proc/net/softnet_stat; echo $s; }

for mtu in $mtus; do
	for size in ${sizes//,/ }; do
		ns_pair "$mtu"
		# shellcheck disable=SC2086
		ns_load "$ko" ${ME_MODULE_PARAMS:-}
		ip netns exec b "$B/me_bench" server --idle 60 >>"$out/server.log" 2>&1 &
		sp=$!
		sleep 0.3
		stats a >"$out/a0"; stats b >"$out/b0"
		sd0=$(softnet_drops)
		ip netns exec a "$B/me_bench" client --test oneway --sizes "$size" --seconds "$secs" \
			--min-iters 8 --csv "$out/me.csv" --label "mtu=$mtu" >>"$out/client.log" 2>&1 ||
			echo "rtx-ns: me_bench failed (MTU $mtu, $size B)" >&2
		stats a >"$out/a1"; stats b >"$out/b1"
		sd1=$(softnet_drops)
		wait "$sp" 2>/dev/null || true
		mbps=$(tail -1 "$out/me.csv" | awk -F, -v h="$(head -1 "$out/me.csv")" \
			'BEGIN{n=split(h,c,",");for(i=1;i<=n;i++)if(c[i]=="mbps")m=i}{print $m}')
		echo "== MTU $mtu, $size B: $mbps MB/s; softnet drops $((sd1 - sd0))"
		for k in tx_data tx_rtx_loss tx_rtx_rto tx_rtx_fail rto_fired tx_ack tx_nack link_down path_stalled; do
			printf '  client %-12s %s\n' "$k" $(( $(awk -v k=$k '$1==k{print $2}' "$out/a1") - $(awk -v k=$k '$1==k{print $2}' "$out/a0") ))
		done
		for k in rx_pkts rx_dup rx_window rx_nores tx_ack tx_nack; do
			printf '  server %-12s %s\n' "$k" $(( $(awk -v k=$k '$1==k{print $2}' "$out/b1") - $(awk -v k=$k '$1==k{print $2}' "$out/b0") ))
		done
		echo "  client link:"; ip netns exec a "$B/mectl" links | sed 's/^/    /'
		echo "  server link:"; ip netns exec b "$B/mectl" links | sed 's/^/    /'
		echo "  client neighbours:"; ip netns exec a "$B/mectl" neighbours | sed 's/^/    /'
		echo "  veth va:"; ip -n a -s link show va | sed 's/^/    /'
		echo "  veth vb:"; ip -n b -s link show vb | sed 's/^/    /'
	done
done
ns_unload
ip netns del a; ip netns del b
