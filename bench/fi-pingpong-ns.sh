#!/bin/bash
# libfabric's fi_pingpong between two namespaces of one guest over one veth
# pair: the multiedge provider with sends of several packets (ABI 26, the
# default), the same provider in pieces and rendezvous as over an older
# module (FI_MULTIEDGE_LARGE_SENDS=0), and libfabric's tcp provider, all
# three in every round (same boot, same host contention).  Prints each
# size's usec per transfer (fi_pingpong's one-way figure) per system and
# round, then the medians and the ratios to tcp.
#   scripts/vm --timeout 1800 -- bench/fi-pingpong-ns.sh [ROUNDS [SIZES [MTU]]]
# Defaults: 3 rounds, sizes 1024,2048,4096,8192,16320,65536, MTU 1500.
# ME_FI_ALT=DIR adds a fourth system, "alt": the provider built in DIR (a
# libfabric provider folder: another build of fabric/ to compare), and
# ME_FI_ALT_ENV="VAR=VALUE ..." runs it with those variables (without
# ME_FI_ALT: this build, e.g. ME_FI_ALT_ENV=FI_MULTIEDGE_ACK_NOW=0).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/build/bin
. "$top/bench/ns-module.sh"
rounds=${1:-3} sizes=${2:-1024,2048,4096,8192,16320,65536} mtu=${3:-1500}
iters=200
out=/tmp/fipp
rm -rf "$out"; mkdir -p "$out"
modprobe veth
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not installed (scripts/deps)" >&2; exit 1; }

ns_pair "$mtu" 10.9.4
ns_load "$top/kernel/multiedge.ko"

# One fi_pingpong of SIZE bytes for SYSTEM; prints its usec/xfer or "-".
run() { # SYSTEM SIZE
	local sys=$1 size=$2 prov env=() extra=() i
	case $sys in
	large) prov=multiedge env=(FI_PROVIDER_PATH="$top/build/lib/libfabric") ;;
	pieces) prov=multiedge env=(FI_PROVIDER_PATH="$top/build/lib/libfabric" FI_MULTIEDGE_LARGE_SENDS=0) ;;
	tcp) prov="tcp;ofi_rxm" env=() ;;
	alt) prov=multiedge env=(FI_PROVIDER_PATH="${ME_FI_ALT:-$top/build/lib/libfabric}")
		read -ra extra <<<"${ME_FI_ALT_ENV:-}"
		env+=("${extra[@]}") ;;
	esac
	ip netns exec b env "${env[@]}" timeout 120 fi_pingpong -p "$prov" -e rdm -S "$size" \
		-I "$iters" >"$out/server.log" 2>&1 &
	local srv=$!
	for ((i = 0; i < 100; i++)); do
		ip netns exec b ss -Hltn 'sport = :47592' | grep -q LISTEN && break
		sleep 0.1
	done
	if ! ip netns exec a env "${env[@]}" timeout 120 fi_pingpong -p "$prov" -e rdm -S "$size" \
		-I "$iters" 10.9.4.2 >"$out/client.log" 2>&1; then
		echo "fi_pingpong $sys $size failed:" >&2
		cat "$out/client.log" "$out/server.log" >&2
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
		echo -
		return
	fi
	wait "$srv" 2>/dev/null || true
	# The result line: bytes, iters, total, time, MB/sec, usec/xfer, Mxfers/sec.
	awk '$2 == "'"$iters"'" && $1 ~ /^[0-9]/ {print $(NF-1); exit}' "$out/client.log"
}

systems="large pieces tcp"
[ -z "${ME_FI_ALT:-}${ME_FI_ALT_ENV:-}" ] || systems+=" alt"
echo "fi_pingpong -e rdm, $iters iterations, MTU $mtu, usec per transfer"
printf '%-6s %-8s %s\n' round size "$systems"
for ((r = 1; r <= rounds; r++)); do
	for size in ${sizes//,/ }; do
		line=""
		for sys in $systems; do
			v=$(run "$sys" "$size")
			line+=" $v"
			echo "$sys $size $v" >>"$out/all.txt"
		done
		printf '%-6s %-8s%s\n' "$r" "$size" "$line"
	done
done
echo "medians (usec per transfer) and ratios to tcp:"
for size in ${sizes//,/ }; do
	awk -v s="$size" '
		$2 == s && $3 != "-" { v[$1] = v[$1] " " $3 }
		function median(list,   a, n, i, j, t) {
			n = split(list, a, " ")
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : 0
		}
		END {
			l = median(v["large"]); p = median(v["pieces"]); t = median(v["tcp"])
			printf "%-8s large %8.1f  pieces %8.1f  tcp %8.1f  large/tcp %.2fx  pieces/tcp %.2fx  large/pieces %.2fx",
				s, l, p, t, t ? l / t : 0, t ? p / t : 0, p ? l / p : 0
			if ("alt" in v) {
				a = median(v["alt"])
				printf "  alt %8.1f  alt/large %.2fx", a, l ? a / l : 0
			}
			printf "\n"
		}' "$out/all.txt"
done
ns_unload
ip netns del a; ip netns del b
