// Guest tests of a receive area's life in its process (ABI 6): what mmap
// and registration refuse (private or offset mappings, ranges only partly
// an area or another device's, mremap, RLIMIT_MEMLOCK), and that peers'
// page-flipped writes stay right while the process forks, unmaps the area,
// mprotects or madvises it, runs under memory pressure, or is killed.
// area_test.cpp covers the data path itself (flip vs copy, TLB modes).
//
// Node 0 writes from pinned memory into an area of node 1 over an MTU 9000
// link, its writes staged (tx_stage_kb: by default frames over veth carry
// the writer's own pages, which no area may take), so every whole
// destination page arrives whole and is flipped.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "area_util.hpp"
#include "cluster.hpp"

using namespace metest;
using multiedge::Access;
using multiedge::Device;
using multiedge::MemoryRegion;
using multiedge::Placement;
using multiedge::ReceiveArea;
using multiedge::RemoteRegion;
using namespace std::chrono_literals;

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kLen = 1 << 20;
constexpr size_t kPages = kLen / kPage;

// errno of a failed library call, 0 if it succeeded.
template <typename R> int err_of(const R &r)
{
	return r ? 0 : r.error().code().value();
}

// A numeric field of a /proc file (-1 if absent): MemAvailable in KiB,
// VmPin in KiB, Threads.  Only system calls and no allocation: usable in a
// forked child.
long proc_field(const char *path, const char *key)
{
	char buf[8192];
	int fd = ::open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
	::close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *p = std::strstr(buf, key);
	return p ? std::strtol(p + std::strlen(key), nullptr, 10) : -1;
}

long meminfo_kb(const char *key)
{
	return proc_field("/proc/meminfo", key);
}

long status_field(const char *key)
{
	return proc_field("/proc/self/status", key);
}

long vm_pin_pages()
{
	long kb = status_field("VmPin:");
	return kb < 0 ? -1 : kb * 1024 / static_cast<long>(kPage);
}

// Whether any of [p, p + len) is mapped in this process.
bool mapped(const void *p, size_t len)
{
	return ::madvise(const_cast<void *>(p), len, MADV_NORMAL) == 0 || errno != ENOMEM;
}

// A forked child, SIGKILLed and reaped if the test leaves early.
class Child {
public:
	explicit Child(pid_t pid) : pid_(pid) {}
	~Child() { kill(); }
	Child(const Child &) = delete;
	Child &operator=(const Child &) = delete;
	pid_t pid() const { return pid_; }
	// Waits for the exit; returns the waitpid status.
	int wait()
	{
		int st = 0;
		if (pid_ > 0 && ::waitpid(pid_, &st, 0) == pid_)
			pid_ = -1;
		return st;
	}
	bool alive() const
	{
		int st;
		return pid_ > 0 && ::waitpid(pid_, &st, WNOHANG) == 0;
	}
	int kill()
	{
		if (pid_ <= 0)
			return 0;
		::kill(pid_, SIGKILL);
		return wait();
	}

private:
	pid_t pid_;
};

// Reads exactly `len` bytes from `fd` within `timeout`; false on EOF/timeout.
bool read_full(int fd, void *buf, size_t len, std::chrono::milliseconds timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	size_t got = 0;
	while (got < len) {
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
			deadline - std::chrono::steady_clock::now());
		if (left.count() <= 0)
			return false;
		pollfd p{fd, POLLIN, 0};
		if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
			continue;
		ssize_t n = ::read(fd, static_cast<char *>(buf) + got, len - got);
		if (n <= 0)
			return false;
		got += static_cast<size_t>(n);
	}
	return true;
}

// Node 0 writes src_ into an area of node 1 (area_, region mr_dst_) and
// can read the region back into back_; expect_ mirrors what the area
// should hold.
class AreaLifeTest : public ClusterTest {
protected:
	std::string module_params() const override { return "tx_stage_kb=16384"; }

	void SetUpPair(bool with_area = true, Placement placement = Placement::Default)
	{
		ASSERT_NO_FATAL_FAILURE(make_pair(1, 9000));
		src_.emplace(kLen);
		back_.emplace(kLen);
		expect_.emplace(kLen);
		ASSERT_NE(expect_->data(), nullptr);
		refill(1);
		auto s = c_->dev(0).register_memory(src_->data(), kLen, Access::RemoteRead);
		ME_ASSERT_OK(s);
		mr_src_.emplace(std::move(s).value());
		auto b = c_->dev(0).register_memory(back_->data(), kLen, Access::RemoteReadWrite);
		ME_ASSERT_OK(b);
		mr_back_.emplace(std::move(b).value());
		if (with_area) {
			auto a = c_->dev(1).map_area(kLen);
			ME_ASSERT_OK(a);
			area_.emplace(std::move(a).value());
			auto d = c_->dev(1).register_memory(area_->data(), kLen,
							    Access::RemoteReadWrite, placement);
			ME_ASSERT_OK(d);
			ASSERT_TRUE(d->is_area());
			mr_dst_.emplace(std::move(d).value());
			remote_ = multiedge::remote_of(*mr_dst_);
		}
		auto cn = c_->dev(0).connect(c_->id(1));
		ME_ASSERT_OK(cn);
		conn_.emplace(std::move(cn).value());
	}

	void TearDown() override
	{
		conn_.reset();
		mr_src_.reset();
		mr_back_.reset();
		mr_dst_.reset();
		area_.reset();
		ClusterTest::TearDown();
	}

	// New source bytes; only while no write is in flight.
	void refill(uint64_t k) { fill_random(src_->data(), kLen, test_seed(91) * 1000 + k); }

	// Posts src[off, off + len) -> area at off (remote_: the region).
	void post(uint64_t off, uint64_t len)
	{
		uint64_t cookie = next_cookie_++;
		ME_ASSERT_OK(conn_->write(*mr_src_, off, remote_, off, static_cast<uint32_t>(len),
					  cookie));
		std::memcpy(expect_->data() + off, src_->data() + off, len);
	}

	// Waits for every posted write; each must succeed.
	void wait_all()
	{
		for (; done_cookie_ < next_cookie_; done_cookie_++) {
			auto c = c_->dev(0).wait_for(done_cookie_, 30s);
			ME_ASSERT_OK(c);
			ASSERT_TRUE(c->ok()) << c->describe();
		}
	}

	void write(uint64_t off, uint64_t len)
	{
		ASSERT_NO_FATAL_FAILURE(post(off, len));
		ASSERT_NO_FATAL_FAILURE(wait_all());
	}

	// The process sees what was written.
	void check(const std::string &what)
	{
		EXPECT_EQ(first_difference(expect_->data(), area_->data(), kLen), -1) << what;
	}

	// Node 0 reads the whole region back: the module's pages hold what
	// was written (whether or not the process still maps them).
	void check_by_read(const std::string &what)
	{
		std::memset(back_->data(), 0, kLen);
		uint64_t cookie = next_cookie_++;
		ME_ASSERT_OK(conn_->read(*mr_back_, 0, remote_, 0, kLen, cookie));
		auto c = c_->dev(0).wait_for(cookie, 30s);
		done_cookie_ = next_cookie_;
		ME_ASSERT_OK(c);
		ASSERT_TRUE(c->ok()) << c->describe();
		EXPECT_EQ(first_difference(expect_->data(), back_->data(), kLen), -1) << what;
	}

	std::optional<Buffer> src_, back_, expect_;
	std::optional<ReceiveArea> area_;
	std::optional<MemoryRegion> mr_src_, mr_back_, mr_dst_;
	RemoteRegion remote_;
	std::optional<multiedge::Connection> conn_;
	uint64_t next_cookie_ = 1, done_cookie_ = 1;
};

} // namespace

// ---- what mmap and registration refuse ----

// Only MAP_SHARED at offset 0 makes an area (a private mapping would copy
// on write and never see a flip); the library refuses length 0 itself.
TEST_F(AreaLifeTest, MmapNeedsSharedMappingAtOffsetZero)
{
	auto d = Device::open();
	ME_ASSERT_OK(d);
	const size_t len = 4 * kPage;
	const uint64_t pages0 = accounting().area_pages;

	errno = 0;
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, d->fd(), 0);
	EXPECT_EQ(p, MAP_FAILED) << "MAP_PRIVATE accepted";
	EXPECT_EQ(errno, EINVAL) << errno_name(errno);
	if (p != MAP_FAILED)
		munmap(p, len);

	errno = 0;
	p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd(), kPage);
	EXPECT_EQ(p, MAP_FAILED) << "offset 4096 accepted";
	EXPECT_EQ(errno, EINVAL) << errno_name(errno);
	if (p != MAP_FAILED)
		munmap(p, len);

	// Over 1 GiB: refused before anything is allocated.
	errno = 0;
	p = mmap(nullptr, (1ul << 30) + kPage, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd(), 0);
	EXPECT_EQ(p, MAP_FAILED) << "1 GiB + 1 page accepted";
	EXPECT_EQ(errno, EINVAL) << errno_name(errno);
	if (p != MAP_FAILED)
		munmap(p, (1ul << 30) + kPage);
	EXPECT_EQ(accounting().area_pages, pages0) << "a refused mmap left pages";

	auto z = d->map_area(0);
	EXPECT_FALSE(z) << "map_area(0) succeeded";
	EXPECT_EQ(err_of(z), EINVAL) << errno_name(err_of(z));

	// The control: shared at offset 0 is an area of zeroed pages.
	p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd(), 0);
	ASSERT_NE(p, MAP_FAILED) << errno_name(errno);
	EXPECT_EQ(accounting().area_pages, pages0 + 4);
	std::vector<uint8_t> zero(len, 0);
	EXPECT_EQ(first_difference(static_cast<uint8_t *>(p), zero.data(), len), -1);
	{
		auto r = d->register_memory(p, len, Access::RemoteWrite, Placement::Default);
		ME_ASSERT_OK(r);
		EXPECT_TRUE(r->is_area());
	}
	munmap(p, len);
	EXPECT_EQ(accounting().area_pages, pages0);
}

// A region touching an area must lie within one area of the same open
// device: area + ordinary memory (either order), a hole in the area, or
// another Device's area is EINVAL; each part alone registers.
TEST_F(AreaLifeTest, RegionMustLieInOneAreaOfThisDevice)
{
	auto d = Device::open();
	ME_ASSERT_OK(d);
	auto other = Device::open();
	ME_ASSERT_OK(other);
	const auto rw = Access::RemoteReadWrite;
	const auto def = Placement::Default;

	// Area [0, 4) pages, anonymous memory [4, 8) right after it.
	auto a = d->map_area(8 * kPage);
	ME_ASSERT_OK(a);
	uint8_t *p = a->data();
	ASSERT_EQ(mmap(p + 4 * kPage, 4 * kPage, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
		  p + 4 * kPage);
	auto mixed = d->register_memory(p + 2 * kPage, 4 * kPage, rw, def);
	EXPECT_EQ(err_of(mixed), EINVAL) << "area then ordinary memory: " << errno_name(err_of(mixed));
	uint64_t pinned0 = accounting().pinned_pages;
	auto area_part = d->register_memory(p, 4 * kPage, rw, def);
	ME_ASSERT_OK(area_part);
	EXPECT_TRUE(area_part->is_area());
	EXPECT_EQ(accounting().pinned_pages, pinned0) << "an area region pinned pages";
	auto anon_part = d->register_memory(p + 4 * kPage, 4 * kPage, rw, def);
	ME_ASSERT_OK(anon_part);
	EXPECT_FALSE(anon_part->is_area());
	EXPECT_EQ(accounting().pinned_pages, pinned0 + 4);

	// The same area through another open device of this namespace.
	auto foreign = other->register_memory(p, 4 * kPage, rw, def);
	EXPECT_EQ(err_of(foreign), EINVAL) << "another device's area: " << errno_name(err_of(foreign));
	auto foreign_one = other->register_memory(p + kPage, 1, rw, def);
	EXPECT_EQ(err_of(foreign_one), EINVAL) << errno_name(err_of(foreign_one));

	// Ordinary memory [0, 4), area [4, 8).
	auto b = d->map_area(8 * kPage);
	ME_ASSERT_OK(b);
	uint8_t *q = b->data();
	ASSERT_EQ(mmap(q, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		       -1, 0),
		  q);
	auto mixed2 = d->register_memory(q + 2 * kPage, 4 * kPage, rw, def);
	EXPECT_EQ(err_of(mixed2), EINVAL) << "ordinary memory then area: "
					  << errno_name(err_of(mixed2));
	auto tail = d->register_memory(q + 5 * kPage + 10, 2 * kPage, rw, def);
	ME_ASSERT_OK(tail);
	EXPECT_TRUE(tail->is_area());

	// A hole in the middle of an area.
	auto h = d->map_area(8 * kPage);
	ME_ASSERT_OK(h);
	ASSERT_EQ(munmap(h->data() + 3 * kPage, 2 * kPage), 0);
	auto holed = d->register_memory(h->data(), 8 * kPage, rw, def);
	EXPECT_EQ(err_of(holed), EINVAL) << "area with a hole: " << errno_name(err_of(holed));
	auto before_hole = d->register_memory(h->data(), 3 * kPage, rw, def);
	ME_ASSERT_OK(before_hole);
	EXPECT_TRUE(before_hole->is_area());
}

// A one-page area with nothing mapped above it: a region running past its
// end into unmapped space is EINVAL (it once registered, and every access
// past the area's page indexed its page array out of bounds).
TEST_F(AreaLifeTest, RegionPastAreaIntoUnmappedSpaceIsRefused)
{
	auto d = Device::open();
	ME_ASSERT_OK(d);
	const size_t span = 64 * kPage;

	// Reserve the span so nothing else lands there, map the area over its
	// first page, then unmap the rest: above the area is unmapped space.
	void *res = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(res, MAP_FAILED);
	auto *p = static_cast<uint8_t *>(res);
	ASSERT_EQ(mmap(p, kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, d->fd(), 0), p)
		<< strerror(errno);
	ASSERT_EQ(munmap(p + kPage, span - kPage), 0);

	for (size_t len : {kPage + 1, 2 * kPage, span, size_t(1) << 30}) {
		auto r = d->register_memory(p, len, Access::RemoteReadWrite, Placement::Default);
		EXPECT_EQ(err_of(r), EINVAL) << len << " bytes from a one-page area: "
					     << errno_name(err_of(r));
	}
	auto inside = d->register_memory(p + 10, kPage - 10, Access::RemoteReadWrite,
					 Placement::Default);
	ME_ASSERT_OK(inside);
	EXPECT_TRUE(inside->is_area());
	munmap(p, kPage);	// the region keeps the area's page until it goes
}

// mremap cannot move the area (the receive threads update its address)
// nor grow it (VM_DONTEXPAND); afterwards it still receives.
TEST_F(AreaLifeTest, MremapCannotMoveOrGrowArea)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("before mremap");
	uint8_t *at = area_->data();

	// A reserved target, so MREMAP_FIXED replaces nothing of ours.
	void *to = mmap(nullptr, kLen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(to, MAP_FAILED);
	errno = 0;
	void *r = mremap(at, kLen, kLen, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	int err = errno;
	munmap(to, kLen);
	if (r != MAP_FAILED) {
		// Put it back so the rest does not fault.
		mremap(r, kLen, kLen, MREMAP_MAYMOVE | MREMAP_FIXED, at);
		FAIL() << "mremap moved the area to " << r;
	}
	EXPECT_EQ(err, EINVAL) << "move: " << errno_name(err);

	errno = 0;
	r = mremap(at, kLen, 2 * kLen, 0);
	err = errno;
	if (r != MAP_FAILED) {
		mremap(at, 2 * kLen, kLen, 0);
		FAIL() << "mremap grew the area in place";
	}
	EXPECT_EQ(err, EFAULT) << "grow in place: " << errno_name(err);

	errno = 0;
	r = mremap(at, kLen, 2 * kLen, MREMAP_MAYMOVE);
	err = errno;
	if (r != MAP_FAILED) {
		mremap(r, 2 * kLen, kLen, MREMAP_MAYMOVE | MREMAP_FIXED, at);
		FAIL() << "mremap grew the area by moving it";
	}
	EXPECT_EQ(err, EFAULT) << "grow by moving: " << errno_name(err);

	// Still mapped where it was, with its bytes, and receiving.
	check("after the refused mremaps");
	refill(2);
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("written after the refused mremaps");
	EXPECT_EQ(accounting().area_pages, kPages);
}

// An area is charged to RLIMIT_MEMLOCK (mm->pinned_vm) like a pinned
// registration, returned at munmap; a region on it charges nothing more.
TEST_F(AreaLifeTest, AreaIsChargedToMemlockLimit)
{
	// The child uses the library (allocates): the parent must be one thread.
	ASSERT_EQ(status_field("Threads:"), 1);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		// 16 pages allowed, no CAP_IPC_LOCK (an unprivileged user).
		rlimit lim{16 * kPage, 16 * kPage};
		if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0 || setgid(65534) != 0 ||
		    setuid(65534) != 0)
			_exit(10);
		auto d = Device::open();
		if (!d)
			_exit(11);
		{
			auto a = d->map_area(16 * kPage);
			if (!a)
				_exit(12);
			auto b = d->map_area(kPage);
			if (b)
				_exit(13);
			if (err_of(b) != ENOMEM)
				_exit(err_of(b) == EAGAIN ? 14 : 15);
			// Registering the area itself pins nothing more.
			auto r = d->register_memory(a->data(), 16 * kPage, Access::RemoteWrite,
						    Placement::Default);
			if (!r || !r->is_area())
				_exit(16);
			// Ordinary memory shares the budget.
			void *m = mmap(nullptr, kPage, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				_exit(10);
			auto o = d->register_memory(m, kPage, Access::RemoteWrite);
			if (err_of(o) != ENOMEM)
				_exit(17);
		}
		// Unmapped (and its region gone): the charge is returned.
		auto c = d->map_area(16 * kPage);
		if (!c)
			_exit(18);
		_exit(0);
	}
	Child child(pid);
	int st = child.wait();
	ASSERT_TRUE(WIFEXITED(st)) << "status " << st;
	EXPECT_EQ(WEXITSTATUS(st), 0)
		<< "10/11 setup, 12 refused within the limit, 13 not refused over it, 14 EAGAIN "
		   "instead of ENOMEM, 15 another errno, 16 area region failed, 17 ordinary "
		   "registration over the limit not ENOMEM, 18 charge not returned at munmap";
	EXPECT_EQ(accounting().area_pages, 0u);
}

// ---- the area's life while peers write into it ----

// fork() while writes into the area run: the child has no mapping there
// (VM_DONTCOPY) but has the rest of the memory; the parent's writes all
// land in its own page table: flipped, or copied while fork() holds the
// parent's mmap_lock (the receive thread never waits for it).
TEST_F(AreaLifeTest, ForkDoesNotCopyAreaAndWritesComplete)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	constexpr unsigned kRounds = 4, kParts = 16;
	constexpr size_t kPart = kLen / kParts;
	Flips before = flips();
	for (unsigned round = 0; round < kRounds; round++) {
		refill(10 + round);
		for (unsigned i = 0; i < kParts; i++)
			ASSERT_NO_FATAL_FAILURE(post(i * kPart, kPart));
		// Only system calls in the child: no allocation after fork.
		pid_t pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			if (mapped(area_->data(), kLen))
				_exit(1);
			if (!mapped(src_->data(), kLen))
				_exit(2);
			_exit(0);
		}
		Child child(pid);
		ASSERT_NO_FATAL_FAILURE(wait_all());
		int st = child.wait();
		ASSERT_TRUE(WIFEXITED(st)) << "status " << st;
		EXPECT_EQ(WEXITSTATUS(st), 0)
			<< "round " << round << ": 1 the child has the area, 2 it lacks ordinary memory";
		check("round " + std::to_string(round));
	}
	Flips d = flips() - before;
	EXPECT_GT(d.flipped, 0u);
	EXPECT_EQ(d.flipped + d.copied, kRounds * kPages) << "flipped " << d.flipped;
	EXPECT_EQ(accounting().area_pages, kPages);
}

// munmap of the area while its region lives and writes keep arriving:
// they complete and land in the area's pages (read back by the peer);
// the pages and the RLIMIT_MEMLOCK charge stay until the region goes.
TEST_F(AreaLifeTest, MunmapWhileRegisteredKeepsPagesUntilDeregistered)
{
	const uint64_t pages0 = accounting().area_pages;
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	EXPECT_EQ(accounting().area_pages, pages0 + kPages);
	long pin = vm_pin_pages();
	ASSERT_GE(pin, static_cast<long>(2 * kPages)) << "the area and src_ are charged to VmPin";

	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("before munmap");
	// Unmapped while two writes are on their way.
	refill(2);
	ASSERT_NO_FATAL_FAILURE(post(0, kLen / 2));
	ASSERT_NO_FATAL_FAILURE(post(kLen / 2, kLen / 2));
	uint8_t *at = area_->data();
	area_.reset();
	ASSERT_FALSE(mapped(at, kLen));
	ASSERT_NO_FATAL_FAILURE(wait_all());
	Flips before = flips();
	for (uint64_t k = 3; k < 9; k++) {
		refill(k);
		// Unaligned too: partial pages are copied into the same pages.
		uint64_t off = (k * 12345) % (kLen / 4);
		ASSERT_NO_FATAL_FAILURE(write(off, kLen - off - k));
		ASSERT_NO_FATAL_FAILURE(check_by_read("after munmap, write " + std::to_string(k)));
		EXPECT_EQ(accounting().area_pages, pages0 + kPages) << "write " << k;
	}
	EXPECT_GT((flips() - before).flipped, 0u) << "flips stopped after munmap";
	EXPECT_EQ(vm_pin_pages(), pin) << "the charge went with the mapping";
	ASSERT_FALSE(mapped(at, kLen)) << "a flip mapped the unmapped area again";

	ASSERT_TRUE(mr_dst_->deregister());
	mr_dst_.reset();
	EXPECT_EQ(accounting().area_pages, pages0);
	EXPECT_EQ(vm_pin_pages(), pin - static_cast<long>(kPages));
}

// mprotect(PROT_READ) while writes stream in: flips keep mapping the new
// pages, now read-only, and the process reads the right bytes.
TEST_F(AreaLifeTest, MprotectReadOnlyDuringWrites)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	for (uint64_t k = 1; k <= 8; k++) {
		refill(20 + k);
		ASSERT_NO_FATAL_FAILURE(post(0, kLen / 2));
		ASSERT_NO_FATAL_FAILURE(post(kLen / 2, kLen / 2));
		if (k == 3) {
			ASSERT_EQ(mprotect(area_->data(), kLen, PROT_READ), 0) << errno_name(errno);
		}
		ASSERT_NO_FATAL_FAILURE(wait_all());
		check("write " + std::to_string(k));
	}
	ASSERT_EQ(mprotect(area_->data(), kLen, PROT_READ | PROT_WRITE), 0);
	// Writable again: the process's own stores reach the module's pages.
	std::memset(area_->data() + 5 * kPage, 0x5a, kPage);
	std::memset(expect_->data() + 5 * kPage, 0x5a, kPage);
	ASSERT_NO_FATAL_FAILURE(check_by_read("after PROT_READ|PROT_WRITE"));
}

// PROT_NONE between writes: the writes land while nothing may read the
// area; once readable again it shows them.
TEST_F(AreaLifeTest, MprotectNoneBetweenWrites)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("before PROT_NONE");
	ASSERT_EQ(mprotect(area_->data(), kLen, PROT_NONE), 0) << errno_name(errno);
	refill(31);
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	refill(32);
	ASSERT_NO_FATAL_FAILURE(write(kLen / 4 + 100, kLen / 3));
	ASSERT_NO_FATAL_FAILURE(check_by_read("under PROT_NONE"));
	ASSERT_EQ(mprotect(area_->data(), kLen, PROT_READ | PROT_WRITE), 0);
	check("after PROT_NONE");
	refill(33);
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("written after PROT_NONE");
}

// mprotect of the middle pages only splits the mapping in three: writes
// across the pieces land in each, and the pieces still register as one
// area.
TEST_F(AreaLifeTest, PartialMprotectSplitsArea)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	uint8_t *mid = area_->data() + 64 * kPage;
	ASSERT_EQ(mprotect(mid, 128 * kPage, PROT_READ), 0) << errno_name(errno);
	refill(41);
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("whole area across the pieces");
	refill(42);
	// Across each boundary, unaligned.
	ASSERT_NO_FATAL_FAILURE(post(64 * kPage - 5000, 20000));
	ASSERT_NO_FATAL_FAILURE(post(192 * kPage - 3 * kPage - 7, 6 * kPage + 14));
	ASSERT_NO_FATAL_FAILURE(wait_all());
	check("across the boundaries");

	// The three pieces are still one area of this device.
	auto whole = c_->dev(1).register_memory(area_->data(), kLen, Access::RemoteReadWrite,
						Placement::FlipEager);
	ME_ASSERT_OK(whole);
	EXPECT_TRUE(whole->is_area());
	refill(43);
	remote_ = multiedge::remote_of(whole.value());
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("through a region over the pieces, eager");
	EXPECT_EQ((flips() - before).flipped, kPages);

	ASSERT_EQ(mprotect(mid, 128 * kPage, PROT_READ | PROT_WRITE), 0);
	refill(44);
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("after restoring the protection");
}

// MADV_DONTNEED drops the translations, not the data: the fault handler
// maps the area's current pages back (it is not anonymous memory), and
// the process's stores after it reach the pages peers read.
TEST_F(AreaLifeTest, MadviseDontneedKeepsData)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	ASSERT_EQ(madvise(area_->data(), kLen, MADV_DONTNEED), 0) << errno_name(errno);
	check("read after MADV_DONTNEED");

	// Dropped again, then written by a peer while unmapped.
	ASSERT_EQ(madvise(area_->data(), kLen, MADV_DONTNEED), 0);
	refill(51);
	ASSERT_NO_FATAL_FAILURE(write(0, kLen));
	check("written while dropped");

	// Dropped, then the process writes part of it (write faults).
	ASSERT_EQ(madvise(area_->data() + 8 * kPage, 16 * kPage, MADV_DONTNEED), 0);
	std::memset(area_->data() + 8 * kPage, 0xa5, 16 * kPage);
	std::memset(expect_->data() + 8 * kPage, 0xa5, 16 * kPage);
	ASSERT_NO_FATAL_FAILURE(check_by_read("process stores after MADV_DONTNEED"));
	EXPECT_EQ(accounting().area_pages, kPages);
}

// Memory pressure: a child takes most of the guest's memory while 1 MiB
// writes are flipped into the area; every write completes with the right
// bytes.
TEST_F(AreaLifeTest, WritesCompleteUnderMemoryPressure)
{
	constexpr long kLeaveMiB = 64, kChurnMiB = 16;
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	ASSERT_GT(meminfo_kb("MemAvailable:"), 0);
	int ready[2];
	ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		// Only system calls: the OOM killer takes this one first.
		int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)!::write(fd, "1000", 4);
			::close(fd);
		}
		uint64_t held = 0;
		for (;;) {
			long spare = meminfo_kb("MemAvailable:") / 1024 - kLeaveMiB;
			if (spare < 8)
				break;
			size_t chunk = static_cast<size_t>(std::min(spare, 64l)) << 20;
			void *m = mmap(nullptr, chunk, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (m == MAP_FAILED)
				break;
			held += chunk >> 20;
		}
		(void)!::write(ready[1], &held, sizeof(held));
		// Keep the allocator busy near the limit.
		for (;;) {
			void *m = mmap(nullptr, kChurnMiB << 20, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (m != MAP_FAILED)
				munmap(m, kChurnMiB << 20);
			usleep(20000);
		}
	}
	Child child(pid);
	::close(ready[1]);
	uint64_t held = 0;
	bool got = read_full(ready[0], &held, sizeof(held), 300s);
	::close(ready[0]);
	ASSERT_TRUE(got) << "the memory hog died before reporting (OOM killer?)";
	long avail_min = meminfo_kb("MemAvailable:");

	Flips before = flips();
	for (uint64_t k = 1; k <= 20; k++) {
		refill(60 + k);
		ASSERT_NO_FATAL_FAILURE(write(0, kLen)) << "write " << k;
		check("write " + std::to_string(k));
		avail_min = std::min(avail_min, meminfo_kb("MemAvailable:"));
	}
	Flips d = flips() - before;
	EXPECT_TRUE(child.alive()) << "the memory hog died during the writes (OOM killer?)";
	child.kill();
	std::printf("[ pressure ] hog held %llu MiB, MemAvailable down to %ld MiB; "
		    "flipped %llu, copied %llu, tlb %llu\n",
		    static_cast<unsigned long long>(held), avail_min / 1024,
		    static_cast<unsigned long long>(d.flipped),
		    static_cast<unsigned long long>(d.copied), static_cast<unsigned long long>(d.tlb));
	EXPECT_GT(held, 0u);
	EXPECT_GT(d.flipped, 0u);
	EXPECT_EQ(d.flipped + d.copied, 20 * kPages) << "every whole page flipped or counted copied";
	EXPECT_EQ(accounting().area_pages, kPages);
}

// A process owning an area and a region on it is SIGKILLed while a peer's
// writes into it are in flight: every write completes (well or not), and
// the area's pages and the region go back to the module.
TEST_F(AreaLifeTest, OwnerKilledDuringWritesReleasesArea)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(false));
	const auto acc0 = accounting();
	// The child uses the library (allocates): the parent must be one thread.
	ASSERT_EQ(status_field("Threads:"), 1);
	int ready[2];
	ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		auto d = c_->open_in(1);
		if (!d)
			_exit(1);
		auto a = d->map_area(kLen);
		if (!a)
			_exit(2);
		auto r = d->register_memory(a->data(), kLen, Access::RemoteReadWrite,
					    Placement::Default);
		if (!r || !r->is_area())
			_exit(3);
		RemoteRegion rr = multiedge::remote_of(r.value());
		if (::write(ready[1], &rr, sizeof(rr)) != sizeof(rr))
			_exit(4);
		// Drop and fault the pages back while flips replace them.
		volatile uint8_t sink = 0;
		for (;;) {
			madvise(a->data(), kLen, MADV_DONTNEED);
			for (size_t i = 0; i < kLen; i += kPage)
				sink = sink + a->data()[i];
			usleep(1000);
		}
	}
	Child child(pid);
	::close(ready[1]);
	bool got = read_full(ready[0], &remote_, sizeof(remote_), 30s);
	::close(ready[0]);
	ASSERT_TRUE(got) << "the child did not set up its area";
	EXPECT_EQ(accounting().area_pages, acc0.area_pages + kPages);

	constexpr uint64_t kWrites = 12;
	for (uint64_t k = 0; k < kWrites; k++)
		ASSERT_NO_FATAL_FAILURE(post(0, kLen));
	// The first lands; the rest are in flight when the owner dies.
	auto first = c_->dev(0).wait_for(done_cookie_++, 30s);
	ME_ASSERT_OK(first);
	ASSERT_TRUE(first->ok()) << first->describe();
	int st = child.kill();
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;
	unsigned ok = 1, failed = 0;
	for (; done_cookie_ < next_cookie_; done_cookie_++) {
		auto c = c_->dev(0).wait_for(done_cookie_, 30s);
		ASSERT_TRUE(c) << "write " << done_cookie_ << ": " << c.error().message();
		(c->ok() ? ok : failed)++;
	}
	std::printf("[ killed   ] %u writes completed, %u failed after the owner died\n", ok, failed);

	auto deadline = std::chrono::steady_clock::now() + 10s;
	multiedge::DeviceInfo i;
	for (;;) {
		i = accounting();
		if (i.area_pages == acc0.area_pages && i.regions == acc0.regions)
			break;
		if (std::chrono::steady_clock::now() > deadline)
			break;
		std::this_thread::sleep_for(50ms);
	}
	EXPECT_EQ(i.area_pages, acc0.area_pages) << "the dead owner's area pages stay";
	EXPECT_EQ(i.regions, acc0.regions) << "the dead owner's region stays";

	// Its region is gone for peers too.
	uint64_t cookie = next_cookie_++;
	done_cookie_ = next_cookie_;
	ME_ASSERT_OK(conn_->write(*mr_src_, 0, remote_, 0, kPage, cookie));
	auto c = c_->dev(0).wait_for(cookie, 30s);
	ME_ASSERT_OK(c);
	EXPECT_FALSE(c->ok()) << "a write into the dead owner's region succeeded";
}

// ---- the owner's mmap_lock never stalls the link ----

namespace {

// Keeps this process's mmap_lock busy, as any process may: one thread
// flips the protection of a populated anonymous mapping (`mb` MiB of small
// pages) back and forth, holding the lock for writing through every page
// table walk; another maps and unmaps `mb` MiB of /dev/multiedge (`fd`),
// holding it while the module allocates and zeroes the pages.  Returns once
// both are in their loops; they run until the process dies.
void hammer_mmap_lock(int fd, size_t mb)
{
	static std::atomic<int> busy{0};
	const size_t len = mb << 20;
	std::thread([len] {
		void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				 -1, 0);
		if (p == MAP_FAILED)
			_exit(20);
		::madvise(p, len, MADV_NOHUGEPAGE);
		for (size_t i = 0; i < len; i += kPage)
			static_cast<volatile uint8_t *>(p)[i] = 1;
		for (int n = 0;; n++) {
			::mprotect(p, len, n % 2 ? PROT_READ | PROT_WRITE : PROT_READ);
			if (n == 4)
				busy++;
		}
	}).detach();
	std::thread([fd, len] {
		for (int n = 0;; n++) {
			void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (p == MAP_FAILED)
				_exit(21);
			::munmap(p, len);
			if (n == 2)
				busy++;
		}
	}).detach();
	while (busy.load() < 2)
		::usleep(1000);
}

} // namespace

// A process whose mmap_lock is kept busy (a thread mprotecting a large
// mapping in a loop) owns an area that a peer writes into with page flips.
// The link's receive thread, shared by every connection, must not wait
// for that lock: an unrelated connection on the same link (another
// process's pinned region) keeps moving, and detaching the link is prompt.
// The busy owner still sees every byte of each write once it completes
// (flips fall back to copies: counted in rx_flip_copied).
//
// Before the fix the receive thread slept in mmap_read_lock() for every
// eagerly flipped page, and the unrelated transfer crawled behind it.
class AreaMmapLockTest : public AreaLifeTest,
			 public ::testing::WithParamInterface<Placement> {};

TEST_P(AreaMmapLockTest, BusyOwnerStallsNoOtherConnection)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(false));
	const Placement placement = GetParam();
	const uint64_t seed = test_seed(4242);
	fill_random(src_->data(), kLen, seed);
	// The unrelated target: a pinned region of this process on node 1.
	Buffer other(kLen);
	auto mo = c_->dev(1).register_memory(other.data(), kLen, Access::RemoteReadWrite);
	ME_ASSERT_OK(mo);
	const RemoteRegion other_rr = multiedge::remote_of(mo.value());

	// Unrelated transfer: kRounds writes of 1 MiB on conn_, one at a time.
	constexpr int kRounds = 8;
	auto unrelated = [&]() -> double {
		auto t0 = std::chrono::steady_clock::now();
		for (int r = 0; r < kRounds; r++) {
			uint64_t cookie = next_cookie_++;
			done_cookie_ = next_cookie_;
			auto st = conn_->write(*mr_src_, 0, other_rr, 0, kLen, cookie);
			if (!st)
				return -1;
			auto c = c_->dev(0).wait_for(cookie, 120s);
			if (!c || !c->ok())
				return -1;
		}
		return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	};
	const double base = unrelated();
	ASSERT_GT(base, 0) << "unrelated transfer failed without load";

	// The busy owner: a child in node 1 with an area region; it checks
	// its own view of the area when told (a byte on `go`) and exits 0 if
	// it holds the pattern.
	ASSERT_EQ(status_field("Threads:"), 1) << "fork from one thread only";
	int ready[2], go[2];
	ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
	ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		auto d = c_->open_in(1);
		if (!d)
			_exit(1);
		auto a = d->map_area(kLen);
		if (!a)
			_exit(2);
		auto r = d->register_memory(a->data(), kLen, Access::RemoteReadWrite, placement);
		if (!r || !r->is_area())
			_exit(3);
		RemoteRegion rr = multiedge::remote_of(r.value());
		hammer_mmap_lock(d->fd(), 128);
		if (::write(ready[1], &rr, sizeof(rr)) != sizeof(rr))
			_exit(4);
		char b;
		if (::read(go[0], &b, 1) != 1)
			_exit(5);
		Buffer want(kLen);
		fill_random(want.data(), kLen, seed);
		char verdict = first_difference(want.data(), a->data(), kLen) == -1 ? 'y' : 'n';
		if (::write(ready[1], &verdict, 1) != 1)
			_exit(6);
		for (;;)
			::pause();
	}
	Child child(pid);
	::close(ready[1]);
	::close(go[0]);
	RemoteRegion victim{};
	bool got = read_full(ready[0], &victim, sizeof(victim), 60s);
	ASSERT_TRUE(got) << "the child did not set up its area";

	// The victim's flow: kVictim writes of 1 MiB into the busy owner's
	// area on a connection of its own, all in flight at once.
	auto vc = c_->dev(0).connect(c_->id(1));
	ME_ASSERT_OK(vc);
	constexpr int kVictim = 16;
	const Flips f0 = flips();
	const uint64_t v0 = next_cookie_;
	for (int k = 0; k < kVictim; k++)
		ME_ASSERT_OK(vc->write(*mr_src_, 0, victim, 0, kLen, next_cookie_++));
	const uint64_t v1 = next_cookie_;

	const double loaded = unrelated();
	std::printf("[ mmap_lock ] unrelated %d MiB: %.2f s idle, %.2f s beside the busy owner\n",
		    kRounds, base, loaded);
	EXPECT_GT(loaded, 0) << "the unrelated transfer failed";
	EXPECT_LT(loaded, 20 * base + 1.5) << "the busy owner's mmap_lock stalled the link";

	// Every victim write completes, and the owner sees the bytes.
	int ok = 0;
	for (uint64_t ck = v0; ck < v1; ck++) {
		auto c = c_->dev(0).wait_for(ck, 120s);
		ASSERT_TRUE(c) << "victim write " << ck - v0 << ": " << c.error().message();
		ok += c->ok();
	}
	done_cookie_ = next_cookie_;
	EXPECT_EQ(ok, kVictim);
	const Flips d = flips() - f0;
	std::printf("[ mmap_lock ] victim: flipped %llu, copied %llu, tlb %llu\n",
		    static_cast<unsigned long long>(d.flipped),
		    static_cast<unsigned long long>(d.copied), static_cast<unsigned long long>(d.tlb));
	ASSERT_EQ(::write(go[1], "x", 1), 1);
	char verdict = 0;
	ASSERT_TRUE(read_full(ready[0], &verdict, 1, 60s)) << "the busy owner did not check";
	EXPECT_EQ(verdict, 'y') << "the busy owner does not see what was written";

	// Detaching the link under the same load is prompt.
	const uint64_t w0 = next_cookie_;
	for (int k = 0; k < kVictim; k++)
		ME_ASSERT_OK(vc->write(*mr_src_, 0, victim, 0, kLen, next_cookie_++));
	std::this_thread::sleep_for(200ms);
	auto t0 = std::chrono::steady_clock::now();
	ME_ASSERT_OK(c_->dev(1).detach_link(c_->node(1).ifnames.at(0)));
	const double detach = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	std::printf("[ mmap_lock ] link detached in %.2f s\n", detach);
	EXPECT_LT(detach, 5.0) << "detach waited for the busy owner";
	child.kill();
	::close(ready[0]);
	::close(go[1]);
	for (uint64_t ck = w0; ck < next_cookie_; ck++) {
		auto c = c_->dev(0).wait_for(ck, 60s);
		ASSERT_TRUE(c) << "victim write " << ck - w0 << ": " << c.error().message();
	}
	done_cookie_ = next_cookie_;
	(void)vc->close();
	(void)mo->deregister();
}

INSTANTIATE_TEST_SUITE_P(Placement, AreaMmapLockTest,
			 ::testing::Values(Placement::FlipEager, Placement::FlipLazy),
			 [](const auto &info) {
				 return info.param == Placement::FlipEager ? "Eager" : "Lazy";
			 });
