// Guest tests of multiedge.ko as a module: load, unload, the device, the
// ethertype handler and ME_IOC_QUERY's argument checking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <initializer_list>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "kmsg.hpp"
#include "module_util.hpp"
#include "netns.hpp"
#include "multiedge/multiedge.hpp"
#include "uapi/multiedge.h"

using namespace metest;

namespace {

class ModuleTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_FALSE(module_loaded()) << "an earlier test left multiedge loaded";
	}

	void TearDown() override
	{
		if (module_loaded()) {
			EXPECT_EQ(unload_module(), 0) << "cannot unload multiedge";
		}
	}
};

bool device_exists()
{
	struct stat st;
	return ::stat(ME_DEVICE_PATH, &st) == 0 && S_ISCHR(st.st_mode);
}

// Does /proc/net/ptype list a handler for `ethertype` from our module?
bool handler_registered(unsigned ethertype)
{
	char type[8];
	std::snprintf(type, sizeof(type), "%04x", ethertype);
	std::string ptype = read_file("/proc/net/ptype");
	size_t pos = 0;
	while ((pos = ptype.find('\n', pos)) != std::string::npos) {
		pos++;
		std::string line = ptype.substr(pos, ptype.find('\n', pos) - pos);
		if (line.rfind(type, 0) == 0 && line.find("[multiedge]") != std::string::npos)
			return true;
	}
	return false;
}

bool any_contains(const std::vector<std::string> &lines, const std::string &s)
{
	return std::any_of(lines.begin(), lines.end(),
			   [&](const std::string &l) { return l.find(s) != std::string::npos; });
}

// Each parameter setting fails the load with EINVAL and is named in the log.
void expect_refused(std::initializer_list<const char *> settings)
{
	for (const char *bad : settings) {
		KmsgReader log;
		EXPECT_EQ(load_module(bad), EINVAL) << bad;
		EXPECT_FALSE(module_loaded()) << bad;
		EXPECT_TRUE(any_contains(log.read_new(), bad)) << bad;
	}
}

me_query query_or_fail(int fd)
{
	me_query q{};
	q.size = sizeof(q);
	EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, &q), 0) << std::strerror(errno);
	return q;
}

// Whether `ifname`'s operstate reads "up" within 5 s.  Linkwatch sets it
// when it runs for the carrier, and attaches the device's qdisc then: a
// frame sent before that meets the noop qdisc and is dropped.
bool wait_operstate_up(const std::string &ifname)
{
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	do {
		std::ifstream f("/sys/class/net/" + ifname + "/operstate");
		std::string state;
		if (f >> state && state == "up")
			return true;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	} while (std::chrono::steady_clock::now() < deadline);
	return false;
}

// A veth pair in the test's namespace, both ends up and passing frames,
// removed at scope exit.
class VethPair {
public:
	VethPair()
	{
		ok_ = modprobe("veth") == 0 && netns::add_veth("me-ta", "", "me-tb", "", 1500) &&
		      netns::set_up("", "me-ta", true) && netns::set_up("", "me-tb", true) &&
		      wait_operstate_up("me-ta") && wait_operstate_up("me-tb");
	}
	~VethPair() { netns::del_link("", "me-ta"); }
	bool ok() const { return ok_; }

private:
	bool ok_;
};

} // namespace

TEST_F(ModuleTest, LoadRegistersDeviceAndHandler)
{
	KmsgReader log;
	ASSERT_EQ(load_module(), 0);
	EXPECT_TRUE(device_exists());
	struct stat st;
	ASSERT_EQ(::stat(ME_DEVICE_PATH, &st), 0);
	EXPECT_EQ(st.st_mode & 0777, 0666u);
	EXPECT_TRUE(handler_registered(ME_DEFAULT_ETHERTYPE));
	EXPECT_TRUE(any_contains(log.read_new(),
				 "multiedge: registered /dev/multiedge, ethertype 0x88b5, abi " +
					 std::to_string(ME_ABI_VERSION)));

	ASSERT_EQ(unload_module(), 0);
	EXPECT_FALSE(device_exists());
	EXPECT_FALSE(handler_registered(ME_DEFAULT_ETHERTYPE));
	EXPECT_TRUE(any_contains(log.read_new(), "multiedge: unloaded"));
}

TEST_F(ModuleTest, LoadUnload20Times)
{
	for (int i = 0; i < 20; i++) {
		ASSERT_EQ(load_module(), 0) << "load " << i;
		ASSERT_TRUE(device_exists()) << "load " << i;
		ASSERT_TRUE(handler_registered(ME_DEFAULT_ETHERTYPE)) << "load " << i;
		ASSERT_EQ(unload_module(), 0) << "unload " << i;
		ASSERT_FALSE(device_exists()) << "unload " << i;
		ASSERT_FALSE(handler_registered(ME_DEFAULT_ETHERTYPE)) << "unload " << i;
	}
}

TEST_F(ModuleTest, RejectsEthertypeThatIsA8023Length)
{
	KmsgReader log;
	EXPECT_EQ(load_module("ethertype=0x05ff"), EINVAL);
	EXPECT_FALSE(module_loaded());
	EXPECT_FALSE(device_exists());
	EXPECT_TRUE(any_contains(log.read_new(), "ethertype 0x05ff is an 802.3 length"));
}

// A held ack must reach its sender well before the sender's timer fires
// (rto_min 5 ms): a longer hold is refused, with the reason in the log.
TEST_F(ModuleTest, RejectsAnAckHoldBeyondFourMilliseconds)
{
	KmsgReader log;
	EXPECT_EQ(load_module("ack_hold_us=4001"), EINVAL);
	EXPECT_FALSE(module_loaded());
	EXPECT_TRUE(any_contains(log.read_new(), "ack_hold_us=4001"));
	ASSERT_EQ(load_module("ack_hold_us=4000"), 0);
	ASSERT_EQ(unload_module(), 0);
}

// Pacing's parameters (protocol.md): 0 or 100..1000 percent, a burst of
// 1..4096 KiB; anything else is refused and named in the log.
TEST_F(ModuleTest, RejectsPacingOutsideItsRange)
{
	expect_refused({"pace_pct=99", "pace_pct=1001", "pace_burst_kb=0", "pace_burst_kb=4097"});
	ASSERT_EQ(load_module("pace_pct=1000 pace_burst_kb=4096"), 0);
	ASSERT_EQ(unload_module(), 0);
}

// The receive path's parameters (design.md): refused at load, not at the
// first attach, and named in the log.
TEST_F(ModuleTest, RejectsReceiveParametersOutsideTheirRange)
{
	expect_refused({"rx_threads=0", "rx_threads=9", "rx_ring=63", "rx_ring=65537",
			"rx_direct_kb=4097", "recv_kb=63", "recv_kb=1048577"});
	ASSERT_EQ(load_module("rx_threads=8 rx_ring=65536 rx_direct_kb=4096 recv_kb=1048576"), 0);
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module("recv_kb=64"), 0);
	ASSERT_EQ(unload_module(), 0);
}

TEST_F(ModuleTest, CustomEthertype)
{
	ASSERT_EQ(load_module("ethertype=0x88b6"), 0);
	EXPECT_TRUE(handler_registered(0x88b6));
	EXPECT_FALSE(handler_registered(0x88b5));
	auto dev = multiedge::Device::open();
	ASSERT_TRUE(dev) << dev.error().message();
	auto info = dev->query();
	ASSERT_TRUE(info) << info.error().message();
	EXPECT_EQ(info->ethertype, 0x88b6);
}

TEST_F(ModuleTest, UnloadRefusedWhileDeviceOpen)
{
	ASSERT_EQ(load_module(), 0);
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_GE(fd, 0) << std::strerror(errno);
	int err = unload_module();
	EXPECT_TRUE(err == EWOULDBLOCK || err == EBUSY) << std::strerror(err);
	EXPECT_TRUE(module_loaded());
	me_query q = query_or_fail(fd); // still fully working
	EXPECT_EQ(q.abi_version, static_cast<unsigned>(ME_ABI_VERSION));
	::close(fd);
	EXPECT_EQ(unload_module(), 0);
}

TEST_F(ModuleTest, LibraryExplainsMissingModule)
{
	auto dev = multiedge::Device::open();
	ASSERT_FALSE(dev);
	EXPECT_EQ(dev.error().code(), std::errc::no_such_file_or_directory);
	EXPECT_NE(dev.error().message().find("insmod"), std::string::npos)
		<< dev.error().message();
}

TEST_F(ModuleTest, QueryReportsAbiAndEthertype)
{
	ASSERT_EQ(load_module(), 0);
	auto dev = multiedge::Device::open();
	ASSERT_TRUE(dev) << dev.error().message();
	auto info = dev->query();
	ASSERT_TRUE(info) << info.error().message();
	EXPECT_EQ(info->abi_version, static_cast<unsigned>(ME_ABI_VERSION));
	EXPECT_EQ(info->ethertype, ME_DEFAULT_ETHERTYPE);
	EXPECT_EQ(info->features, static_cast<unsigned>(ME_FEATURE_URING_CMD | ME_FEATURE_RX_AREA |
							ME_FEATURE_RECV_POLL | ME_FEATURE_PORTS |
							ME_FEATURE_POST_MORE | ME_FEATURE_SHARED |
							ME_FEATURE_ATOMIC | ME_FEATURE_LOOPBACK |
							ME_FEATURE_SEND_LARGE | ME_FEATURE_ACK_NOW));
}

TEST_F(ModuleTest, QueryValidatesItsArgument)
{
	ASSERT_EQ(load_module(), 0);
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_GE(fd, 0);

	// Sizes below the first published version are refused.
	for (unsigned size : {0u, 4u, ME_QUERY_SIZE_VER0 - 1u}) {
		me_query q{};
		q.size = size;
		errno = 0;
		EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, &q), -1) << size;
		EXPECT_EQ(errno, EINVAL) << size;
	}

	// A newer, larger struct: accepted if the unknown tail is zero,
	// refused with E2BIG otherwise; the tail is never written.
	struct {
		me_query q;
		unsigned char tail[24];
	} big{};
	big.q.size = sizeof(big);
	EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, &big), 0) << std::strerror(errno);
	EXPECT_EQ(big.q.abi_version, static_cast<unsigned>(ME_ABI_VERSION));
	for (unsigned char c : big.tail)
		EXPECT_EQ(c, 0);
	big.tail[7] = 1;
	errno = 0;
	EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, &big), -1);
	EXPECT_EQ(errno, E2BIG);
	me_query huge{};
	huge.size = 1u << 30; // far beyond any struct: refused without a scan
	errno = 0;
	EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, &huge), -1);
	EXPECT_EQ(errno, E2BIG);

	// Bad pointers.
	errno = 0;
	EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, nullptr), -1);
	EXPECT_EQ(errno, EFAULT);
	errno = 0;
	EXPECT_EQ(::ioctl(fd, ME_IOC_QUERY, reinterpret_cast<void *>(16)), -1);
	EXPECT_EQ(errno, EFAULT);

	// Unknown commands.
	errno = 0;
	EXPECT_EQ(::ioctl(fd, _IO(ME_IOC_MAGIC, 0x7f), nullptr), -1);
	EXPECT_EQ(errno, ENOTTY);
	::close(fd);
}

TEST_F(ModuleTest, HandlerSeesOnlyItsEthertype)
{
	ASSERT_EQ(load_module(), 0);
	VethPair veth;
	ASSERT_TRUE(veth.ok());
	auto dev = multiedge::Device::open();
	ASSERT_TRUE(dev) << dev.error().message();
	auto before = dev->query();
	ASSERT_TRUE(before);

	ASSERT_TRUE(send_frames("me-ta", 0x88b6, 3)); // not ours
	ASSERT_TRUE(send_frames("me-ta", ME_DEFAULT_ETHERTYPE, 5));

	// Delivery is asynchronous (veth hands frames to the backlog).
	uint64_t seen = 0;
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (std::chrono::steady_clock::now() < deadline) {
		auto now = dev->query();
		ASSERT_TRUE(now);
		seen = now->rx_frames - before->rx_frames;
		if (seen >= 5)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	auto after = dev->query();
	ASSERT_TRUE(after);
	// No link is attached yet, so every frame is counted and dropped.
	EXPECT_EQ(after->rx_frames - before->rx_frames, 5u);
	EXPECT_EQ(after->rx_dropped - before->rx_dropped, 5u);
}
