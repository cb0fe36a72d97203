// Guest tests of memory registration: pinning and its accounting (module
// counters and the process's VmPin), every error, teardown at close and
// exit, RLIMIT_MEMLOCK, and many register/deregister cycles.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "module_util.hpp"
#include "multiedge/multiedge.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using multiedge::Access;
using multiedge::Device;
using multiedge::MemoryRegion;

namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// Anonymous memory, unmapped at scope exit.
class Mapping {
public:
	explicit Mapping(size_t len, int prot = PROT_READ | PROT_WRITE) : len_(len)
	{
		p_ = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p_ == MAP_FAILED)
			p_ = nullptr;
	}
	~Mapping()
	{
		if (p_)
			munmap(p_, len_);
	}
	char *get() const { return static_cast<char *>(p_); }

private:
	void *p_;
	size_t len_;
};

// VmPin of this process, in pages.
long vm_pin_pages()
{
	std::ifstream in("/proc/self/status");
	std::string line;
	while (std::getline(in, line))
		if (line.rfind("VmPin:", 0) == 0)
			return std::stol(line.substr(6)) * 1024 / static_cast<long>(kPage);
	return -1;
}

class MrTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_FALSE(module_loaded()) << "an earlier test left multiedge loaded";
		ASSERT_EQ(load_module(), 0);
		auto dev = Device::open();
		ASSERT_TRUE(dev) << dev.error().message();
		dev_.emplace(std::move(dev).value());
	}

	void TearDown() override
	{
		dev_.reset();
		if (module_loaded()) {
			EXPECT_EQ(unload_module(), 0) << "cannot unload multiedge";
		}
	}

	// The module's own accounting, through a fresh descriptor.
	static multiedge::DeviceInfo accounting()
	{
		auto d = Device::open();
		EXPECT_TRUE(d);
		auto info = d->query();
		EXPECT_TRUE(info);
		return info ? info.value() : multiedge::DeviceInfo{};
	}

	static int raw_reg(int fd, void *addr, uint64_t len, uint32_t access, me_mr_reg *out = nullptr)
	{
		me_mr_reg req{};
		req.size = sizeof(req);
		req.access = access;
		req.addr = reinterpret_cast<uintptr_t>(addr);
		req.length = len;
		int ret = ::ioctl(fd, ME_IOC_MR_REG, &req) == 0 ? 0 : errno;
		if (out)
			*out = req;
		return ret;
	}

	static int raw_dereg(int fd, uint32_t region)
	{
		me_mr_dereg req{};
		req.size = sizeof(req);
		req.region = region;
		return ::ioctl(fd, ME_IOC_MR_DEREG, &req) == 0 ? 0 : errno;
	}

	std::optional<Device> dev_;
};

} // namespace

TEST_F(MrTest, RegisterPinsAndDeregisterUnpins)
{
	Mapping m(256 * kPage);
	ASSERT_TRUE(m.get());
	long pin0 = vm_pin_pages();
	{
		auto mr = dev_->register_memory(m.get(), 256 * kPage, Access::RemoteReadWrite);
		ASSERT_TRUE(mr) << mr.error().message();
		EXPECT_NE(mr->id(), 0u);
		EXPECT_EQ(mr->length(), 256 * kPage);
		EXPECT_EQ(vm_pin_pages() - pin0, 256);
		auto acc = accounting();
		EXPECT_EQ(acc.pinned_pages, 256u);
		EXPECT_EQ(acc.regions, 1u);
	}
	EXPECT_EQ(vm_pin_pages(), pin0);
	auto acc = accounting();
	EXPECT_EQ(acc.pinned_pages, 0u);
	EXPECT_EQ(acc.regions, 0u);
}

TEST_F(MrTest, UnalignedRangePinsEveryPageItTouches)
{
	Mapping m(4 * kPage);
	ASSERT_TRUE(m.get());
	// 100 bytes into page 0 up to 1 byte into page 2: three pages.
	auto mr = dev_->register_memory(m.get() + 100, 2 * kPage - 99, Access::RemoteWrite);
	ASSERT_TRUE(mr) << mr.error().message();
	EXPECT_EQ(accounting().pinned_pages, 3u);
	auto one = dev_->register_memory(m.get() + kPage - 1, 1, Access::None);
	ASSERT_TRUE(one) << one.error().message();
	EXPECT_EQ(accounting().pinned_pages, 4u);
}

TEST_F(MrTest, IdsAreDistinctAndKeysVary)
{
	Mapping m(kPage);
	std::vector<MemoryRegion> mrs;
	for (int i = 0; i < 32; i++) {
		auto mr = dev_->register_memory(m.get(), kPage, Access::RemoteRead);
		ASSERT_TRUE(mr) << mr.error().message();
		mrs.push_back(std::move(mr).value());
	}
	std::set<uint32_t> ids, highs;
	std::set<uint64_t> keys;
	for (auto &mr : mrs) {
		ids.insert(mr.id());
		keys.insert(mr.key());
		highs.insert(static_cast<uint32_t>(mr.key() >> 32));
	}
	EXPECT_EQ(ids.size(), mrs.size());
	EXPECT_EQ(keys.size(), mrs.size()); // random, 64 bits
	EXPECT_GT(highs.size(), mrs.size() / 2) << "the high half is random too";
}

// A caller built before ABI 8 passes the 40-byte struct: it cannot see
// key_hi, so its region's key has a zero high half (the whole key is what
// it got).  The current struct's padding must be zero.
TEST_F(MrTest, OlderCallersGetKeysTheyCanName)
{
	Mapping m(kPage);
	int fd = dev_->fd();
	for (int i = 0; i < 4; i++) {
		me_mr_reg r{};
		r.size = ME_MR_REG_SIZE_VER1;
		r.key_hi = 0xdeadbeef;	// beyond the caller's size: not written
		r.addr = reinterpret_cast<uintptr_t>(m.get());
		r.length = kPage;
		r.access = ME_ACCESS_REMOTE_READ;
		ASSERT_EQ(::ioctl(fd, ME_IOC_MR_REG, &r), 0) << std::strerror(errno);
		EXPECT_EQ(r.key_hi, 0xdeadbeefu) << "written past the caller's struct";
		me_mr_dereg d{};
		d.size = sizeof(d);
		d.region = r.region;
		ASSERT_EQ(::ioctl(fd, ME_IOC_MR_DEREG, &d), 0) << std::strerror(errno);
	}
	me_mr_reg r{};
	r.size = sizeof(r);
	r.addr = reinterpret_cast<uintptr_t>(m.get());
	r.length = kPage;
	r.__reserved = 1;
	EXPECT_EQ(::ioctl(fd, ME_IOC_MR_REG, &r), -1);
	EXPECT_EQ(errno, EINVAL);
}

TEST_F(MrTest, BadArguments)
{
	Mapping m(2 * kPage);
	int fd = dev_->fd();
	EXPECT_EQ(raw_reg(fd, m.get(), 0, 0), EINVAL);
	EXPECT_EQ(raw_reg(fd, m.get(), ME_MR_MAX_LENGTH + 1, 0), EINVAL);
	EXPECT_EQ(raw_reg(fd, reinterpret_cast<void *>(~0ull - 10), 100, 0), EINVAL); // wraps
	EXPECT_EQ(raw_reg(fd, m.get(), kPage, 1u << 5), EOPNOTSUPP);

	me_mr_reg small{};
	small.size = ME_MR_REG_SIZE_VER0 - 1;
	EXPECT_EQ(::ioctl(fd, ME_IOC_MR_REG, &small), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(::ioctl(fd, ME_IOC_MR_REG, nullptr), -1);
	EXPECT_EQ(errno, EFAULT);

	EXPECT_EQ(raw_dereg(fd, 12345), ENOENT);
	EXPECT_EQ(raw_dereg(fd, 0), ENOENT);
	EXPECT_EQ(accounting().pinned_pages, 0u);
}

TEST_F(MrTest, UnmappedOrReadOnlyMemoryIsRefused)
{
	int fd = dev_->fd();
	Mapping hole(3 * kPage);
	ASSERT_EQ(munmap(hole.get() + kPage, kPage), 0); // a hole in the middle
	EXPECT_EQ(raw_reg(fd, hole.get(), 3 * kPage, 0), EFAULT);
	Mapping ro(2 * kPage, PROT_READ);
	EXPECT_EQ(raw_reg(fd, ro.get(), 2 * kPage, ME_ACCESS_REMOTE_READ), EFAULT);
	EXPECT_EQ(raw_reg(fd, nullptr, kPage, 0), EFAULT);

	auto st = dev_->register_memory(ro.get(), kPage, Access::RemoteRead);
	ASSERT_FALSE(st);
	EXPECT_NE(st.error().message().find("mapped and writable"), std::string::npos);
	// Nothing stays pinned from the partial attempts.
	EXPECT_EQ(accounting().pinned_pages, 0u);
	EXPECT_EQ(vm_pin_pages(), 0);
}

TEST_F(MrTest, RegionsBelongToTheirFile)
{
	Mapping m(kPage);
	auto other = Device::open();
	ASSERT_TRUE(other);
	me_mr_reg r{};
	ASSERT_EQ(raw_reg(dev_->fd(), m.get(), kPage, 0, &r), 0);
	EXPECT_EQ(raw_dereg(other->fd(), r.region), ENOENT);
	EXPECT_EQ(raw_dereg(dev_->fd(), r.region), 0);
	EXPECT_EQ(raw_dereg(dev_->fd(), r.region), ENOENT); // twice
}

TEST_F(MrTest, CloseDeregistersEverything)
{
	Mapping m(64 * kPage);
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(raw_reg(fd, m.get(), 64 * kPage, ME_ACCESS_ALL), 0);
	EXPECT_EQ(accounting().pinned_pages, 8u * 64);
	EXPECT_EQ(vm_pin_pages(), 8 * 64);
	::close(fd);
	EXPECT_EQ(accounting().pinned_pages, 0u);
	EXPECT_EQ(accounting().regions, 0u);
	EXPECT_EQ(vm_pin_pages(), 0);
}

TEST_F(MrTest, ProcessExitDeregisters)
{
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Mapping m(128 * kPage);
		int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (fd < 0 || raw_reg(fd, m.get(), 128 * kPage, ME_ACCESS_ALL) != 0)
			_exit(1);
		_exit(0); // without deregistering or closing
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
	EXPECT_EQ(accounting().pinned_pages, 0u);
	EXPECT_EQ(accounting().regions, 0u);
}

TEST_F(MrTest, MemlockLimitIsEnforced)
{
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		// 16 pages allowed, no CAP_IPC_LOCK (an unprivileged user).
		rlimit lim{16 * kPage, 16 * kPage};
		if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0 || setgid(65534) != 0 ||
		    setuid(65534) != 0)
			_exit(10);
		Mapping m(64 * kPage);
		int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			_exit(11);
		if (raw_reg(fd, m.get(), 16 * kPage, 0) != 0)
			_exit(12); // within the limit
		if (raw_reg(fd, m.get(), 2 * kPage, 0) != ENOMEM)
			_exit(13); // 18 > 16
		_exit(0);
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(WEXITSTATUS(st), 0) << "10/11 setup, 12 refused within limit, 13 not refused";
	EXPECT_EQ(accounting().pinned_pages, 0u);
}

TEST_F(MrTest, UnloadRefusedWhileRegionsExist)
{
	Mapping m(kPage);
	auto mr = dev_->register_memory(m.get(), kPage, Access::RemoteRead);
	ASSERT_TRUE(mr);
	int err = unload_module();
	EXPECT_TRUE(err == EWOULDBLOCK || err == EBUSY) << std::strerror(err);
	// The region keeps the file (and so the module) alive even without
	// the Device.
	dev_.reset();
	err = unload_module();
	EXPECT_TRUE(err == EWOULDBLOCK || err == EBUSY) << std::strerror(err);
	ASSERT_TRUE(mr->deregister());
	EXPECT_EQ(unload_module(), 0);
}

TEST_F(MrTest, TenThousandCyclesLeaveNothingPinned)
{
	Mapping m(8 * kPage);
	long pin0 = vm_pin_pages();
	for (int i = 0; i < 10000; i++) {
		auto mr = dev_->register_memory(m.get() + (i % 7), 4 * kPage, Access::RemoteReadWrite);
		ASSERT_TRUE(mr) << "cycle " << i << ": " << mr.error().message();
		ASSERT_TRUE(mr->deregister()) << "cycle " << i;
	}
	EXPECT_EQ(vm_pin_pages(), pin0);
	auto acc = accounting();
	EXPECT_EQ(acc.pinned_pages, 0u);
	EXPECT_EQ(acc.regions, 0u);
}
