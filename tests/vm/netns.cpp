// Guest tests: namespaces, veth pairs and bridges through rtnetlink.
#include "netns.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

namespace metest::netns {
namespace {

constexpr const char *kDir = "/run/netns";	// where `ip netns` keeps the names

std::string path_of(const std::string &name)
{
	return std::string(kDir) + "/" + name;
}

// One rtnetlink request: the header, an ifinfomsg, attributes (nestable).
class Request {
public:
	Request(std::uint16_t type, std::uint16_t flags, const ifinfomsg &ifi) : buf_(NLMSG_HDRLEN)
	{
		nlmsghdr h{};
		h.nlmsg_type = type;
		h.nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
		h.nlmsg_seq = 1;
		std::memcpy(buf_.data(), &h, sizeof(h));
		put(&ifi, sizeof(ifi));
	}
	void put(const void *p, size_t n)
	{
		size_t at = buf_.size();
		buf_.resize(at + NLMSG_ALIGN(n));
		if (n)
			std::memcpy(&buf_[at], p, n);
	}
	void attr(std::uint16_t type, const void *p, size_t n)
	{
		rtattr a{};
		a.rta_len = static_cast<std::uint16_t>(RTA_LENGTH(n));
		a.rta_type = type;
		size_t at = buf_.size();
		buf_.resize(at + RTA_SPACE(n));
		std::memcpy(&buf_[at], &a, sizeof(a));
		if (n)
			std::memcpy(&buf_[at + RTA_LENGTH(0)], p, n);
	}
	void attr_str(std::uint16_t type, const std::string &s) { attr(type, s.c_str(), s.size() + 1); }
	void attr_u32(std::uint16_t type, std::uint32_t v) { attr(type, &v, sizeof(v)); }
	// A nested attribute: begin() opens it, end() sets its length.
	size_t begin(std::uint16_t type)
	{
		size_t at = buf_.size();
		attr(type, nullptr, 0);
		return at;
	}
	void end(size_t at)
	{
		rtattr a;
		std::memcpy(&a, &buf_[at], sizeof(a));
		a.rta_len = static_cast<std::uint16_t>(buf_.size() - at);
		std::memcpy(&buf_[at], &a, sizeof(a));
	}
	// Sends the request from a socket of the calling thread's namespace and
	// reads the kernel's answer: 0 or the errno it reported.
	int exchange()
	{
		nlmsghdr h;
		std::memcpy(&h, buf_.data(), sizeof(h));
		h.nlmsg_len = static_cast<std::uint32_t>(buf_.size());
		std::memcpy(buf_.data(), &h, sizeof(h));
		int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
		if (fd < 0)
			return errno;
		sockaddr_nl kernel{};
		kernel.nl_family = AF_NETLINK;
		int err = EPROTO;
		if (::sendto(fd, buf_.data(), buf_.size(), 0, reinterpret_cast<sockaddr *>(&kernel),
			     sizeof(kernel)) < 0) {
			err = errno;
		} else {
			// The ack (an NLMSG_ERROR, 0 for success) is the only answer;
			// extended-ack text after it may be cut off, which is fine.
			alignas(nlmsghdr) char reply[8192];
			ssize_t n = ::recv(fd, reply, sizeof(reply), 0);
			if (n < 0)
				err = errno;
			else if (static_cast<size_t>(n) >= NLMSG_LENGTH(sizeof(nlmsgerr))) {
				nlmsghdr r;
				std::memcpy(&r, reply, sizeof(r));
				if (r.nlmsg_type == NLMSG_ERROR) {
					nlmsgerr e;
					std::memcpy(&e, reply + NLMSG_HDRLEN, sizeof(e));
					err = -e.error;
				}
			}
		}
		::close(fd);
		return err;
	}

private:
	std::vector<char> buf_;
};

ifinfomsg link_msg(unsigned flags = 0, unsigned change = 0)
{
	ifinfomsg ifi{};
	ifi.ifi_family = AF_UNSPEC;
	ifi.ifi_flags = flags;
	ifi.ifi_change = change;
	return ifi;
}

// Sets ifname of the calling thread's namespace up or down, first making it
// a port of bridge `master` if one is named.  0 or an errno.
int set_up_here(const std::string &ifname, bool up, const std::string &master)
{
	Request r(RTM_NEWLINK, 0, link_msg(up ? IFF_UP : 0, IFF_UP));
	r.attr_str(IFLA_IFNAME, ifname);
	if (!master.empty()) {
		unsigned idx = ::if_nametoindex(master.c_str());
		if (idx == 0)
			return errno;
		r.attr_u32(IFLA_MASTER, idx);
	}
	return r.exchange();
}

AssertionResult failed(const std::string &what, int err)
{
	return AssertionFailure() << what << ": " << std::strerror(err);
}

} // namespace

AssertionResult add(const std::string &name)
{
	if (::mkdir(kDir, 0755) != 0 && errno != EEXIST)
		return failed(std::string("mkdir ") + kDir, errno);
	if (auto r = del(name); !r)
		return r;
	std::string p = path_of(name);
	int fd = ::open(p.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return failed("create " + p, errno);
	::close(fd);
	// unshare() moves only the calling thread: a thread of its own makes
	// the namespace, pins it under the name with a bind mount and ends.
	std::string what;
	int err = 0;
	std::thread([&] {
		if (::unshare(CLONE_NEWNET) != 0) {
			err = errno;
			what = "unshare(CLONE_NEWNET)";
		} else if (::mount("/proc/thread-self/ns/net", p.c_str(), "none", MS_BIND,
				   nullptr) != 0) {
			err = errno;
			what = "bind mount on " + p;
		} else if ((err = set_up_here("lo", true, "")) != 0) {
			what = "loopback up";
		}
	}).join();
	if (err) {
		::umount2(p.c_str(), MNT_DETACH);
		::unlink(p.c_str());
		return failed("namespace " + name + ": " + what, err);
	}
	return AssertionSuccess();
}

AssertionResult del(const std::string &name)
{
	if (name.empty() || name.find('/') != std::string::npos)
		return AssertionFailure() << "bad namespace name \"" << name << "\"";
	std::string p = path_of(name);
	// EINVAL: not a mount point (no namespace was pinned there).
	if (::umount2(p.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
		return failed("umount " + p, errno);
	if (::unlink(p.c_str()) != 0 && errno != ENOENT)
		return failed("unlink " + p, errno);
	return AssertionSuccess();
}

AssertionResult add_veth(const std::string &if_a, const std::string &ns_a, const std::string &if_b,
			 const std::string &ns_b, unsigned mtu)
{
	// The namespaces by descriptor; -1 for the caller's own ("").
	int fa = ns_a.empty() ? -1 : ::open(path_of(ns_a).c_str(), O_RDONLY | O_CLOEXEC);
	if (fa < 0 && !ns_a.empty())
		return failed("namespace " + ns_a, errno);
	int fb = ns_b.empty() ? -1 : ::open(path_of(ns_b).c_str(), O_RDONLY | O_CLOEXEC);
	if (fb < 0 && !ns_b.empty()) {
		int err = errno;
		if (fa >= 0)
			::close(fa);
		return failed("namespace " + ns_b, err);
	}
	Request r(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, link_msg());
	r.attr_str(IFLA_IFNAME, if_a);
	r.attr_u32(IFLA_MTU, mtu);
	if (fa >= 0)
		r.attr_u32(IFLA_NET_NS_FD, static_cast<std::uint32_t>(fa));
	size_t info = r.begin(IFLA_LINKINFO);
	r.attr_str(IFLA_INFO_KIND, "veth");
	size_t data = r.begin(IFLA_INFO_DATA);
	size_t peer = r.begin(VETH_INFO_PEER);
	ifinfomsg ifi = link_msg();
	r.put(&ifi, sizeof(ifi));
	r.attr_str(IFLA_IFNAME, if_b);
	r.attr_u32(IFLA_MTU, mtu);
	if (fb >= 0)
		r.attr_u32(IFLA_NET_NS_FD, static_cast<std::uint32_t>(fb));
	r.end(peer);
	r.end(data);
	r.end(info);
	int err = r.exchange();
	if (fa >= 0)
		::close(fa);
	if (fb >= 0)
		::close(fb);
	if (err)
		return failed("veth " + ns_a + ":" + if_a + " - " + ns_b + ":" + if_b + " (mtu " +
			      std::to_string(mtu) + ")", err);
	return AssertionSuccess();
}

AssertionResult add_bridge(const std::string &ns, const std::string &name)
{
	Enter in(ns);
	if (!in.ok())
		return failed("enter namespace " + ns, errno);
	Request r(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, link_msg(IFF_UP, IFF_UP));
	r.attr_str(IFLA_IFNAME, name);
	size_t info = r.begin(IFLA_LINKINFO);
	r.attr_str(IFLA_INFO_KIND, "bridge");
	size_t data = r.begin(IFLA_INFO_DATA);
	r.attr_u32(IFLA_BR_FORWARD_DELAY, 0);
	r.attr_u32(IFLA_BR_STP_STATE, 0);
	r.end(data);
	r.end(info);
	if (int err = r.exchange())
		return failed("bridge " + name + " in " + ns, err);
	return AssertionSuccess();
}

AssertionResult set_up(const std::string &ns, const std::string &ifname, bool up,
		       const std::string &master)
{
	Enter in(ns);
	if (!in.ok())
		return failed("enter namespace " + ns, errno);
	if (int err = set_up_here(ifname, up, master))
		return failed(ns + ":" + ifname + (master.empty() ? "" : " master " + master) +
				      (up ? " up" : " down"),
			      err);
	return AssertionSuccess();
}

AssertionResult del_link(const std::string &ns, const std::string &ifname)
{
	Enter in(ns);
	if (!in.ok())
		return failed("enter namespace " + ns, errno);
	Request r(RTM_DELLINK, 0, link_msg());
	r.attr_str(IFLA_IFNAME, ifname);
	int err = r.exchange();
	if (err && err != ENODEV)
		return failed("delete " + ns + ":" + ifname, err);
	return AssertionSuccess();
}

Enter::Enter(const std::string &ns)
{
	if (ns.empty()) {
		ok_ = true;	// where the thread is: nothing to enter or leave
		return;
	}
	self_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int target = ::open(path_of(ns).c_str(), O_RDONLY | O_CLOEXEC);
	if (self_ >= 0 && target >= 0 && ::setns(target, CLONE_NEWNET) == 0)
		ok_ = true;
	int err = errno;
	if (target >= 0)
		::close(target);
	errno = err;
}

Enter::~Enter()
{
	if (self_ < 0)
		return;
	if (ok_ && ::setns(self_, CLONE_NEWNET) != 0) {
		// Staying in the wrong namespace would poison every later test.
		std::fprintf(stderr, "netns: cannot return to the original namespace: %s\n",
			     std::strerror(errno));
		std::abort();
	}
	::close(self_);
}

} // namespace metest::netns
