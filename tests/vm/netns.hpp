// Guest tests: network namespaces, veth pairs and bridges made in-process
// through rtnetlink, as `ip netns add`, `ip link add ... type veth` and
// `ip link set ... up` would make them.
//
// Why not `ip`: under TCG every process the tests spawn costs 0.1-0.2 s,
// and a cluster fixture of three nodes and a switch ran some thirty of them
// (5 of a fabric test's 6 seconds).  These calls take microseconds.
//
// A namespace made here is an ordinary named one (/run/netns/<name>): `ip -n`
// and `tc -n` act in it, and `ip netns del` removes it.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace metest::netns {

// Creates namespace `name` (replacing a stale one of that name) with its
// loopback up.
::testing::AssertionResult add(const std::string &name);
// Removes the name; the namespace dies with its last user.  A name that
// does not exist is not an error.
::testing::AssertionResult del(const std::string &name);

// Below, a namespace named "" is the calling thread's own.

// A veth pair from if_a in namespace ns_a to if_b in ns_b, both of `mtu`,
// both down.
::testing::AssertionResult add_veth(const std::string &if_a, const std::string &ns_a,
				    const std::string &if_b, const std::string &ns_b,
				    unsigned mtu);
// A bridge `name` in namespace ns with STP off and no forwarding delay (a
// port forwards as soon as it is up), up.
::testing::AssertionResult add_bridge(const std::string &ns, const std::string &name);
// Sets interface ifname of namespace ns up or down; with `master`, first
// makes it a port of that bridge (of the same namespace).
::testing::AssertionResult set_up(const std::string &ns, const std::string &ifname, bool up,
				  const std::string &master = "");

// Deletes interface ifname of namespace ns (a veth takes its peer along);
// one that does not exist is not an error.
::testing::AssertionResult del_link(const std::string &ns, const std::string &ifname);

// Runs the calling thread in namespace `ns` ("": where it is) until the
// guard dies.
class Enter {
public:
	explicit Enter(const std::string &ns);
	~Enter();
	Enter(const Enter &) = delete;
	Enter &operator=(const Enter &) = delete;
	bool ok() const { return ok_; }

private:
	int self_ = -1;
	bool ok_ = false;
};

} // namespace metest::netns
