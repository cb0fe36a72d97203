# Shared by the one-guest namespace scripts (ab-ns.sh, rtx-ns.sh): the
# module loaded fresh and attached to the veth ends va (namespace a) and
# vb (namespace b).  Needs B (the binaries' folder).

# Unloads the module, waiting while it is still in use.
ns_unload() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ -d /sys/module/multiedge ] || return 0
		rmmod multiedge 2>/dev/null || sleep 0.2
	done
}

# ns_load KO [PARAMS...]: loads KO, attaches va and vb, waits until the
# two namespaces see each other alive.
ns_load() {
	local ko=$1 i
	shift
	ns_unload
	insmod "$ko" "$@"
	ip netns exec a "$B/mectl" attach va >/dev/null
	ip netns exec b "$B/mectl" attach vb >/dev/null
	for ((i = 0; i < 100; i++)); do
		ip netns exec a "$B/mectl" peers 2>/dev/null | grep -q alive && return 0
		sleep 0.1
	done
	echo "$(basename "$0"): peer not alive with $ko" >&2
	return 1
}
