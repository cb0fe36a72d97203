# Shared by the one-guest namespace scripts (ab-ns.sh, ab-read-ns.sh,
# rtx-ns.sh, fi-pingpong-ns.sh): the namespaces and their veth pair; the
# module loaded fresh and attached to the veth ends va (namespace a) and
# vb (namespace b).  Needs B (the binaries' folder).

# ns_pair MTU [SUBNET]: namespaces a and b (made again if they exist)
# joined by the veth pair va-vb at MTU, up with their loopbacks; with
# SUBNET (10.9.3) the addresses SUBNET.1 (a) and SUBNET.2 (b).
ns_pair() {
	ip netns del a 2>/dev/null || true; ip netns del b 2>/dev/null || true
	ip netns add a; ip netns add b
	ip link add va netns a mtu "$1" type veth peer name vb netns b mtu "$1"
	ip -n a link set va up; ip -n b link set vb up
	ip -n a link set lo up; ip -n b link set lo up
	if [ -n "${2:-}" ]; then
		ip -n a addr add "$2.1/24" dev va; ip -n b addr add "$2.2/24" dev vb
	fi
}

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
