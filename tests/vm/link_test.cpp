// Guest tests of links: attach/detach by ioctl, library and module
// parameter; the netdevice notifier (down, up, MTU, unregister, namespace
// move); per-namespace state; privilege checks.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "module_util.hpp"
#include "netns.hpp"
#include "multiedge/multiedge.hpp"
#include "uapi/multiedge.h"
extern "C" {
#include "kernel/core/wire.h"	// the HELLO layout
}

using namespace metest;
using multiedge::Device;
using multiedge::LinkInfo;

namespace {

class LinkTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_FALSE(module_loaded()) << "an earlier test left multiedge loaded";
		ASSERT_EQ(modprobe("veth"), 0) << "modprobe veth failed";
		for (const char *i : {"0", "1"}) {
			std::string a = std::string("me-a") + i, b = std::string("me-b") + i;
			ASSERT_TRUE(netns::add_veth(a, "", b, "", 1500));
			ASSERT_TRUE(netns::set_up("", a, true));
			ASSERT_TRUE(netns::set_up("", b, true));
		}
	}

	void TearDown() override
	{
		if (module_loaded()) {
			EXPECT_EQ(unload_module(), 0) << "cannot unload multiedge";
		}
		EXPECT_TRUE(netns::del_link("", "me-a0"));
		EXPECT_TRUE(netns::del_link("", "me-a1"));
		EXPECT_TRUE(netns::del("me-ns"));
	}

	static Device open_device()
	{
		auto dev = Device::open();
		EXPECT_TRUE(dev) << dev.error().message();
		return std::move(dev).value();
	}

	static std::vector<LinkInfo> links(const Device &dev)
	{
		auto l = dev.links();
		EXPECT_TRUE(l) << l.error().message();
		return l ? l.value() : std::vector<LinkInfo>{};
	}

	static const LinkInfo *find(const std::vector<LinkInfo> &v, const std::string &name)
	{
		for (const auto &l : v)
			if (l.ifname == name)
				return &l;
		return nullptr;
	}
};

int raw_link_ioctl(int fd, unsigned long cmd, const char *name, unsigned flags = 0)
{
	me_link_req req{};
	req.size = sizeof(req);
	req.flags = flags;
	std::strncpy(req.ifname, name, sizeof(req.ifname));
	return ::ioctl(fd, cmd, &req) == 0 ? 0 : errno;
}

// Runs `child` in a forked process; returns its exit status (-1 if it did
// not exit normally).
template <typename F>
int in_child(F child)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(child());
	int st = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

// The name carried by the first HELLO seen on `ifname` (of the calling
// thread's namespace) within `ms` milliseconds; "<none>" if none came.
std::string hello_name_on(const char *ifname, int ms)
{
	int fd = ::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ME_DEFAULT_ETHERTYPE));
	if (fd < 0)
		return "<socket: " + std::string(std::strerror(errno)) + ">";
	sockaddr_ll sll{};
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ME_DEFAULT_ETHERTYPE);
	sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname));
	std::string name = "<none>";
	if (::bind(fd, reinterpret_cast<sockaddr *>(&sll), sizeof(sll)) != 0) {
		::close(fd);
		return "<bind: " + std::string(std::strerror(errno)) + ">";
	}
	auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
	while (std::chrono::steady_clock::now() < end) {
		pollfd p{fd, POLLIN, 0};
		if (::poll(&p, 1, 50) <= 0)
			continue;
		unsigned char b[256];
		ssize_t n = ::recv(fd, b, sizeof(b), 0);
		// A HELLO: its header, then the name (payload_len at 6)
		if (n < ME_HDR_HELLO || b[0] != ME_WIRE_VERSION || b[1] != ME_PT_HELLO)
			continue;
		size_t len = static_cast<size_t>(b[6]) << 8 | b[7];
		if (ME_HDR_HELLO + len > static_cast<size_t>(n))
			continue;
		name.assign(reinterpret_cast<const char *>(b) + ME_HDR_HELLO, len);
		break;
	}
	::close(fd);
	return name;
}

} // namespace

TEST_F(LinkTest, AttachListDetach)
{
	ASSERT_EQ(load_module(), 0);
	Device dev = open_device();
	EXPECT_TRUE(links(dev).empty());

	ASSERT_TRUE(dev.attach_link("me-a0"));
	ASSERT_TRUE(dev.attach_link("me-a1"));
	auto l = links(dev);
	ASSERT_EQ(l.size(), 2u);
	EXPECT_EQ(l[0].ifname, "me-a0"); // attach order
	EXPECT_EQ(l[1].ifname, "me-a1");
	EXPECT_TRUE(l[0].up);
	EXPECT_EQ(l[0].mtu, 1500u);
	EXPECT_NE(l[0].ifindex, 0u);

	ASSERT_TRUE(dev.detach_link("me-a0"));
	l = links(dev);
	ASSERT_EQ(l.size(), 1u);
	EXPECT_EQ(l[0].ifname, "me-a1");
}

TEST_F(LinkTest, AttachErrors)
{
	ASSERT_EQ(load_module(), 0);
	Device dev = open_device();
	auto st = dev.attach_link("me-nonexistent");
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::no_such_device);
	EXPECT_NE(st.error().message().find("no such network device"), std::string::npos);

	st = dev.attach_link("lo"); // not Ethernet
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::invalid_argument);

	ASSERT_TRUE(dev.attach_link("me-a0"));
	st = dev.attach_link("me-a0");
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::file_exists);

	st = dev.detach_link("me-a1");
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::no_such_file_or_directory);

	st = dev.attach_link("a-name-far-too-long-for-linux");
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::invalid_argument);
}

TEST_F(LinkTest, RawArgumentChecks)
{
	ASSERT_EQ(load_module(), 0);
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(raw_link_ioctl(fd, ME_IOC_LINK_ATTACH, "me-a0", 1), EOPNOTSUPP);
	EXPECT_EQ(raw_link_ioctl(fd, ME_IOC_LINK_ATTACH, ""), EINVAL);

	me_link_req unterminated{};
	unterminated.size = sizeof(unterminated);
	std::memset(unterminated.ifname, 'x', sizeof(unterminated.ifname));
	EXPECT_EQ(::ioctl(fd, ME_IOC_LINK_ATTACH, &unterminated), -1);
	EXPECT_EQ(errno, EINVAL);

	me_link_req small{};
	small.size = ME_LINK_REQ_SIZE_VER0 - 1;
	EXPECT_EQ(::ioctl(fd, ME_IOC_LINK_ATTACH, &small), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(::ioctl(fd, ME_IOC_LINK_DETACH, nullptr), -1);
	EXPECT_EQ(errno, EFAULT);

	ASSERT_EQ(raw_link_ioctl(fd, ME_IOC_LINK_ATTACH, "me-a0"), 0);
	ASSERT_EQ(raw_link_ioctl(fd, ME_IOC_LINK_ATTACH, "me-a1"), 0);

	// Listing: too small an entry size, reserved bits, bad array, and a
	// short array that reports the full count.
	me_link_info infos[2] = {};
	me_link_list req{};
	req.size = sizeof(req);
	req.count = 2;
	req.links = reinterpret_cast<uintptr_t>(infos);
	req.info_size = ME_LINK_INFO_SIZE_VER0 - 8;
	EXPECT_EQ(::ioctl(fd, ME_IOC_LINK_LIST, &req), -1);
	EXPECT_EQ(errno, EINVAL);
	req.info_size = sizeof(me_link_info);
	req.__reserved = 1;
	EXPECT_EQ(::ioctl(fd, ME_IOC_LINK_LIST, &req), -1);
	EXPECT_EQ(errno, EINVAL);
	req.__reserved = 0;
	req.links = 16;
	EXPECT_EQ(::ioctl(fd, ME_IOC_LINK_LIST, &req), -1);
	EXPECT_EQ(errno, EFAULT);
	req.links = reinterpret_cast<uintptr_t>(infos);
	req.count = 1;
	ASSERT_EQ(::ioctl(fd, ME_IOC_LINK_LIST, &req), 0) << std::strerror(errno);
	EXPECT_EQ(req.count, 2u);
	EXPECT_STREQ(infos[0].ifname, "me-a0");
	EXPECT_EQ(infos[1].ifname[0], 0); // no room: untouched
	::close(fd);
}

// The first link fixes the namespace's packet size (its MTU); a device too
// small for it, or for a whole send (1280), is refused with EMSGSIZE.
TEST_F(LinkTest, AttachRefusesTooSmallMtu)
{
	ASSERT_EQ(sh("ip link set me-a0 mtu 1000 && ip link set me-a1 mtu 9000"), 0);
	ASSERT_EQ(load_module(), 0);
	Device dev = open_device();
	auto st = dev.attach_link("me-a0");
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::message_size);
	EXPECT_NE(st.error().message().find("raise the MTU"), std::string::npos);
	EXPECT_EQ(dev.query()->packet_size, 0u) << "a refused link starts nothing";

	ASSERT_TRUE(dev.attach_link("me-a1"));
	EXPECT_EQ(dev.query()->packet_size, 9000u);
	ASSERT_EQ(sh("ip link set me-a0 mtu 1500"), 0);
	st = dev.attach_link("me-a0");
	ASSERT_FALSE(st) << "1500 is below the packet size 9000";
	EXPECT_EQ(st.error().code(), std::errc::message_size);
	ASSERT_EQ(sh("ip link set me-a0 mtu 9000"), 0);
	EXPECT_TRUE(dev.attach_link("me-a0"));
}

TEST_F(LinkTest, AttachNeedsNetAdmin)
{
	ASSERT_EQ(load_module(), 0);
	int st = in_child([] {
		// An unprivileged user has no CAP_NET_ADMIN.
		if (setgid(65534) != 0 || setuid(65534) != 0)
			return 10;
		int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return 11;
		return raw_link_ioctl(fd, ME_IOC_LINK_ATTACH, "me-a0") == EPERM ? 0 : 12;
	});
	EXPECT_EQ(st, 0) << "10/11: setup failed, 12: attach was not refused";
	EXPECT_TRUE(links(open_device()).empty());
}

TEST_F(LinkTest, FollowsDownUpAndMtu)
{
	ASSERT_EQ(load_module(), 0);
	Device dev = open_device();
	ASSERT_TRUE(dev.attach_link("me-a0"));

	ASSERT_EQ(sh("ip link set me-a0 down"), 0);
	EXPECT_FALSE(links(dev).at(0).up);
	ASSERT_EQ(sh("ip link set me-a0 up"), 0);
	// veth has carrier when both ends are up.
	EXPECT_TRUE(links(dev).at(0).up);
	ASSERT_EQ(sh("ip link set me-b0 down"), 0);
	EXPECT_FALSE(links(dev).at(0).up);
	ASSERT_EQ(sh("ip link set me-b0 up"), 0);
	EXPECT_TRUE(links(dev).at(0).up);

	ASSERT_EQ(sh("ip link set me-a0 mtu 9000"), 0);
	EXPECT_EQ(links(dev).at(0).mtu, 9000u);
}

TEST_F(LinkTest, DeviceDeletedWhileAttached)
{
	ASSERT_EQ(load_module(), 0);
	Device dev = open_device();
	ASSERT_TRUE(dev.attach_link("me-a0"));
	ASSERT_TRUE(dev.attach_link("me-a1"));
	ASSERT_EQ(sh("ip link del me-a0"), 0); // would hang if a reference leaked
	auto l = links(dev);
	ASSERT_EQ(l.size(), 1u);
	EXPECT_EQ(l[0].ifname, "me-a1");
}

TEST_F(LinkTest, UnloadWithLinksAttached)
{
	ASSERT_EQ(load_module(), 0);
	{
		Device dev = open_device();
		ASSERT_TRUE(dev.attach_link("me-a0"));
		ASSERT_TRUE(dev.attach_link("me-a1"));
	}
	ASSERT_EQ(unload_module(), 0);
	// The devices must be free again: deleting them must not hang.
	EXPECT_EQ(sh("timeout 20 ip link del me-a0"), 0);
}

TEST_F(LinkTest, ModuleParameterAttaches)
{
	ASSERT_EQ(load_module("links=me-a0,me-a1"), 0);
	auto l = links(open_device());
	ASSERT_EQ(l.size(), 2u);
	EXPECT_EQ(l[0].ifname, "me-a0");
	EXPECT_EQ(l[1].ifname, "me-a1");
}

TEST_F(LinkTest, ModuleParameterWithUnknownDeviceFailsTheLoad)
{
	EXPECT_EQ(load_module("links=me-a0,me-nope"), ENODEV);
	EXPECT_FALSE(module_loaded());
	EXPECT_EQ(sh("timeout 20 ip link del me-a0"), 0); // me-a0 was released
}

TEST_F(LinkTest, NamespacesAreSeparateNodes)
{
	ASSERT_EQ(load_module(), 0);
	ASSERT_EQ(sh("ip netns add me-ns && ip link set me-b1 netns me-ns && "
		     "ip -n me-ns link set me-b1 up"),
		  0);
	Device dev = open_device();
	ASSERT_TRUE(dev.attach_link("me-a0"));

	// A child enters the namespace, opens the device there and attaches.
	int st = in_child([] {
		int ns = ::open("/run/netns/me-ns", O_RDONLY | O_CLOEXEC);
		if (ns < 0 || setns(ns, CLONE_NEWNET) != 0)
			return 10;
		auto d = Device::open();
		if (!d)
			return 11;
		if (!d->attach_link("me-b1"))
			return 12;
		if (d->attach_link("me-a0")) // lives in the other namespace
			return 13;
		auto l = d->links();
		if (!l || l->size() != 1 || l.value()[0].ifname != "me-b1")
			return 14;
		return 0;
	});
	EXPECT_EQ(st, 0);

	auto l = links(dev); // the initial namespace sees only its own
	ASSERT_EQ(l.size(), 1u);
	EXPECT_EQ(l[0].ifname, "me-a0");

	// Deleting the namespace destroys me-b1 (and its peer me-a1): its
	// link goes with it; the initial namespace's link stays.
	ASSERT_EQ(sh("ip netns del me-ns"), 0);
	for (int i = 0; i < 100 && sh("ip link show me-a1 >/dev/null 2>&1") == 0; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
	l = links(dev);
	ASSERT_EQ(l.size(), 1u);
	EXPECT_EQ(l[0].ifname, "me-a0");
}

TEST_F(LinkTest, AttachedLinkCountsFrames)
{
	ASSERT_EQ(load_module(), 0);
	Device dev = open_device();
	ASSERT_TRUE(dev.attach_link("me-b0"));
	// Frames of our ethertype sent into me-a0 arrive on me-b0.
	ASSERT_TRUE(send_frames("me-a0", ME_DEFAULT_ETHERTYPE, 4));
	ASSERT_TRUE(send_frames("me-a0", 0x88b6, 3)); // not ours
	uint64_t frames = 0;
	for (int i = 0; i < 200 && frames < 4; i++) {
		frames = links(dev).at(0).rx_frames;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	auto l = links(dev).at(0);
	EXPECT_EQ(l.rx_frames, 4u);
	EXPECT_EQ(l.rx_bytes, 4u * (64 - 14)); // skb->len after the Ethernet header
}

// HELLO names the node by the host name of the UTS namespace of the task
// that attached its first link (a container's own), never by the initial
// namespace's host name.
TEST_F(LinkTest, ContainerNodeAdvertisesItsOwnHostName)
{
	ASSERT_EQ(load_module(), 0);
	ASSERT_EQ(sh("ip netns add me-ns && ip link set me-b1 netns me-ns && "
		     "ip -n me-ns link set me-b1 up"),
		  0);
	char host[65] = {};
	ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
	const std::string ctr = std::string(host) == "me-ctr-uts" ? "me-ctr-uts2" : "me-ctr-uts";
	int st = in_child([&] {
		int ns = ::open("/run/netns/me-ns", O_RDONLY | O_CLOEXEC);
		if (ns < 0 || setns(ns, CLONE_NEWNET) != 0)
			return 10;
		if (unshare(CLONE_NEWUTS) != 0 || sethostname(ctr.data(), ctr.size()) != 0)
			return 11;
		auto d = Device::open();
		if (!d)
			return 12;
		return d->attach_link("me-b1") ? 0 : 13;
	});
	ASSERT_EQ(st, 0);
	EXPECT_EQ(hello_name_on("me-a1", 3000), ctr) << "the initial namespace's name is " << host;

	// A node of the initial namespace, attached from it, is named by it.
	Device dev = open_device();
	ASSERT_TRUE(dev.attach_link("me-a0"));
	EXPECT_EQ(hello_name_on("me-b0", 3000), std::string(host).substr(0, 31));
}
