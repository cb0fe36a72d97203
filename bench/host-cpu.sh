#!/bin/bash
# The host's CPU per MB of a two-guest profile-pair run: the guests' own
# figures miss what their frames cost the host (the QEMU threads that
# emulate the devices and carry the links) and cannot tell a host with
# cores to spare from a full one.
#   bench/host-cpu.sh -- scripts/vm --nodes 2 --links 1 ... -- WRAPPER [SIZE [SECONDS [MTU]]]
# where WRAPPER runs bench/profile-pair.sh in the guests.  Passes the
# command's output on, then prints for multiedge's run and TCP's: how
# busy the host was over the middle of the run (its start plus 1 s to its
# stop less 1 s, as the phase files in build/profile-pair/ appear) and
# its CPU per MB moved (the receiver's window rate), split by guest
# (node0 sends) into its vCPU thread, its QEMU main loop (the devices,
# the link's socket) and its other threads.  Samples every 0.2 s
# with shell builtins only (no process started per sample).
set -euo pipefail
[ "${1:-}" = -- ] || { echo "usage: bench/host-cpu.sh -- COMMAND..." >&2; exit 2; }
shift
top=$(cd "$(dirname "$0")/.." && pwd)
phases=$top/build/profile-pair
samples=$(mktemp)	# the samples
out=$(mktemp)		# the command's output
stop=$samples.stop
trap 'rm -f "$samples" "$out" "$stop"' EXIT

# One line per sample: time, host busy and all ticks (/proc/stat), the
# phase files present, and each QEMU thread's ticks as guest/thread=ticks.
sample() {
	local -a cpu f args
	local -A node=()
	local p t name st ph th i
	exec {nap}<> <(:)
	while [ ! -e "$stop" ]; do
		read -r -a cpu </proc/stat
		ph= th=
		for f in start-me stop-me start-tcp stop-tcp; do
			[ -e "$phases/$f" ] && ph+=",$f"
		done
		for p in /proc/[0-9]*; do
			read -r name 2>/dev/null <"$p/comm" || continue
			[[ $name == qemu-system-* ]] || continue
			if [ -z "${node[$p]:-}" ]; then
				# scripts/vm names each guest: -name nodeN,...
				node[$p]=${p#/proc/}
				mapfile -d "" -t args 2>/dev/null <"$p/cmdline" || :
				for ((i = 0; i + 1 < ${#args[@]}; i++)); do
					[ "${args[i]}" = -name ] && node[$p]=${args[i + 1]%%,*}
				done
			fi
			for t in "$p"/task/*; do
				read -r name 2>/dev/null <"$t/comm" || continue
				read -r st 2>/dev/null <"$t/stat" || continue
				read -r -a f <<<"${st##*) }"
				th+=" ${node[$p]}/${name// /_}=$((f[11] + f[12]))"
			done
		done
		echo "$EPOCHREALTIME $((cpu[1] + cpu[2] + cpu[3] + cpu[6] + cpu[7] + cpu[8])) $((cpu[1] + cpu[2] + cpu[3] + cpu[4] + cpu[5] + cpu[6] + cpu[7] + cpu[8])) p$ph |$th"
		read -rt 0.2 -u "$nap" || :
	done
}
sample >"$samples" &
spid=$!
rc=0
"$@" 2>&1 | tee "$out" || rc=$?
touch "$stop"
wait "$spid" || :

python3 - "$samples" "$out" <<'EOF'
import re, sys

rows = []
for line in open(sys.argv[1]):
    head, _, threads = line.partition("|")
    f = head.split()
    if len(f) < 4:
        continue
    ticks = {}
    for kv in threads.split():
        k, _, v = kv.rpartition("=")
        ticks[k] = ticks.get(k, 0) + int(v)
    rows.append((float(f[0]), int(f[1]), int(f[2]), set(f[3].split(",")[1:]), ticks))
text = open(sys.argv[2]).read()
HZ = 100  # USER_HZ
for sysn in ("me", "tcp"):
    m = re.search(r"=== %s: [\d.]+ MB/s \(the run\), ([\d.]+) MB/s \(the receiver's window\)" % sysn, text)
    run = [r for r in rows if "start-" + sysn in r[3] and "stop-" + sysn not in r[3]]
    if not m or len(run) < 15:
        print(f"=== host: {sysn}: no run to measure")
        continue
    t0 = run[0][0] + 1
    t1 = run[-1][0] - 1
    w = [r for r in run if t0 <= r[0] <= t1]
    a, b = w[0], w[-1]
    secs = b[0] - a[0]
    mb = float(m.group(1)) * secs
    busy = (b[1] - a[1]) / HZ
    share = (b[1] - a[1]) / max(1, b[2] - a[2])
    split = {}
    for k, v in b[4].items():
        guest, name = k.split("/", 1)
        kind = "vCPU" if "TCG" in name or "KVM" in name else \
            "main loop" if name.startswith("qemu-system") else "other"
        split[f"{guest} {kind}"] = split.get(f"{guest} {kind}", 0) + v - a[4].get(k, 0)
    parts = ", ".join(f"{k} {v / HZ / mb * 1e6:.0f}" for k, v in sorted(split.items()))
    print(f"=== host: {sysn}: busy {100 * share:.0f}% over {secs:.1f} s; CPU per MB {busy / mb * 1e6:.0f} us ({parts})")
EOF
exit "$rc"
