// me_filecopy: copies a file to another node with remote writes, each side
// running one io_uring event loop that mixes remote memory with file I/O.
//
//   me_filecopy recv OUT    on one node: receives into OUT
//   me_filecopy send IN     on the other: sends IN
//
// The sender's loop reads the file in chunks (IORING_OP_READ) into a few
// registered buffers and, as each read completes, writes the chunk into the
// receiver's region with a notification (UringQueue::write_notify on the
// same ring); a buffer is read into again once its write has completed.
// The receiver's loop waits for the device to become readable
// (IORING_OP_POLL_ADD on the device descriptor), harvests the notifications
// and writes each chunk from its region to the output file
// (IORING_OP_WRITE).  The receiver's region holds the whole file (at most
// 1 GiB); the nodes exchange the size and the region's id and key with
// send/recv first.
//
// Exit status 0 when the whole file arrived (the receiver compares its
// length and a checksum the sender sends along), 1 on error, 2 on bad usage.
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "multiedge/multiedge.hpp"

namespace me = multiedge;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint32_t kChunk = 256 * 1024;	// bytes per read and remote write
constexpr unsigned kBuffers = 8;		// sender: reads/writes in flight
constexpr std::uint64_t kMaxSize = 1ull << 30;	// one region holds the file
constexpr std::uint64_t kDevicePoll = ~0ull;	// user_data of the poll SQE

[[noreturn]] void die(const std::string &msg)
{
	std::fprintf(stderr, "me_filecopy: %s\n", msg.c_str());
	std::exit(1);
}

template <typename T>
T check(me::Result<T> r)
{
	if (!r)
		die(r.error().message());
	return std::move(r).value();
}

void check(const me::Status &s)
{
	if (!s)
		die(s.error().message());
}

// FNV-1a over the file's bytes: the receiver compares it.
std::uint64_t fnv1a(const unsigned char *p, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull)
{
	for (std::size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

// Anonymous memory, unmapped on destruction.
class Mapping {
public:
	explicit Mapping(std::size_t len) : len_(len ? len : 1)
	{
		void *p = ::mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				 -1, 0);
		if (p == MAP_FAILED)
			die("cannot map " + std::to_string(len_) + " bytes: " + std::strerror(errno));
		p_ = static_cast<unsigned char *>(p);
	}
	~Mapping() { ::munmap(p_, len_); }
	Mapping(const Mapping &) = delete;
	Mapping &operator=(const Mapping &) = delete;
	unsigned char *data() const { return p_; }
	std::size_t size() const { return len_; }

private:
	unsigned char *p_ = nullptr;
	std::size_t len_;
};

// An io_uring of the program's own (the application's ring).
class Ring {
public:
	Ring()
	{
		if (int r = io_uring_queue_init(64, &ring_, 0); r < 0)
			die(std::string("io_uring_queue_init: ") + std::strerror(-r) +
			    " (io_uring unavailable? me_demo uses the ioctl path instead)");
	}
	~Ring() { io_uring_queue_exit(&ring_); }
	Ring(const Ring &) = delete;
	Ring &operator=(const Ring &) = delete;
	io_uring *get() { return &ring_; }
	io_uring_sqe *sqe()
	{
		io_uring_sqe *s = io_uring_get_sqe(&ring_);
		if (!s) {
			io_uring_submit(&ring_);
			s = io_uring_get_sqe(&ring_);
		}
		if (!s)
			die("the submission ring is full");
		return s;
	}

private:
	io_uring ring_{};
};

// What the nodes tell each other with send/recv.
struct Offer {
	char magic[8];		// "me-fcp2"
	std::uint64_t size;	// sender -> receiver: the file's size
	std::uint64_t sum;	// ... and its checksum
	std::uint32_t region;	// receiver -> sender: where to write
	std::uint32_t reserved;
	std::uint64_t key;
};
constexpr char kMagic[8] = {'m', 'e', '-', 'f', 'c', 'p', '2', 0};

void send_offer(const me::Device &dev, me::Connection &conn, const Offer &o)
{
	Mapping buf(4096);
	std::memcpy(buf.data(), &o, sizeof(o));
	auto mr = check(dev.register_memory(buf.data(), buf.size(), me::Access::None));
	check(conn.send(mr, 0, sizeof(o), /*cookie=*/1));
	auto c = check(dev.wait_for(1, std::chrono::seconds(30)));
	if (!c.ok())
		die(c.describe());
}

Offer recv_offer(const me::Device &dev, std::uint32_t peer)
{
	auto m = check(dev.recv(peer, std::chrono::seconds(60)));
	Offer o{};
	if (m.data.size() != sizeof(o))
		die("unexpected message of " + std::to_string(m.data.size()) + " bytes");
	std::memcpy(&o, m.data.data(), sizeof(o));
	if (std::memcmp(o.magic, kMagic, sizeof(kMagic)) != 0)
		die("unexpected message (not me_filecopy's)");
	return o;
}

// The first node discovery shows alive (waits up to a minute).
std::uint32_t wait_for_peer(const me::Device &dev)
{
	auto deadline = Clock::now() + std::chrono::seconds(60);
	while (Clock::now() < deadline) {
		for (const auto &p : check(dev.peers()))
			if (p.alive)
				return p.node_id;
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
	die("no peer alive within 60 s (multiedge.ko loaded and links attached on both nodes?)");
}

// Submits what is prepared and waits for a completion; a minute without one
// means the other side is gone.
void wait_progress(io_uring *ring)
{
	if (int r = io_uring_submit(ring); r < 0)
		die(std::string("io_uring_submit: ") + std::strerror(-r));
	for (;;) {
		__kernel_timespec ts{};
		ts.tv_sec = 60;
		io_uring_cqe *cqe;
		int r = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
		if (r == 0)
			return;
		if (r == -ETIME)
			die("nothing completed for 60 s: is the other side still running?");
		if (r != -EINTR)
			die(std::string("io_uring_wait_cqe_timeout: ") + std::strerror(-r));
	}
}

double mbps(std::uint64_t bytes, Clock::duration d)
{
	double s = std::chrono::duration<double>(d).count();
	return s > 0 ? static_cast<double>(bytes) / s / 1e6 : 0;
}

int run_send(const char *path)
{
	int fd = ::open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(std::string("cannot open ") + path + ": " + std::strerror(errno));
	struct stat st{};
	if (::fstat(fd, &st) < 0)
		die(std::string("cannot stat ") + path + ": " + std::strerror(errno));
	auto size = static_cast<std::uint64_t>(st.st_size);
	if (size > kMaxSize)
		die(std::string(path) + " is larger than 1 GiB, the largest region");

	// The checksum needs the bytes once before the copy: a plain read.
	std::uint64_t sum = 0xcbf29ce484222325ull;
	{
		Mapping tmp(kChunk);
		ssize_t n;
		while ((n = ::read(fd, tmp.data(), kChunk)) > 0)
			sum = fnv1a(tmp.data(), static_cast<std::size_t>(n), sum);
		if (n < 0)
			die(std::string("cannot read ") + path + ": " + std::strerror(errno));
	}

	auto dev = check(me::Device::open());
	std::uint32_t peer = wait_for_peer(dev);
	auto conn = check(dev.connect(peer));
	Offer offer{};
	std::memcpy(offer.magic, kMagic, sizeof(kMagic));
	offer.size = size;
	offer.sum = sum;
	send_offer(dev, conn, offer);
	Offer where = recv_offer(dev, peer);
	me::RemoteRegion remote{where.region, where.key, size};
	std::printf("sending %" PRIu64 " bytes to node %u, region %u\n", size, peer, where.region);

	Mapping bufs(static_cast<std::size_t>(kBuffers) * kChunk);
	auto mr = check(dev.register_memory(bufs.data(), bufs.size(), me::Access::None));
	Ring ring;
	auto q = check(me::UringQueue::attach(dev, ring.get()));

	// One loop: a file read into buffer b completes -> remote write of
	// buffer b; the remote write completes -> the next read into b.
	std::uint64_t next = 0, written = 0;
	unsigned reads = 0;
	auto start_read = [&](unsigned b) {
		if (next >= size)
			return;
		auto len = static_cast<unsigned>(std::min<std::uint64_t>(kChunk, size - next));
		io_uring_sqe *s = ring.sqe();
		io_uring_prep_read(s, fd, bufs.data() + b * kChunk, len, next);
		// The file read's user_data: buffer, offset (chunk-aligned).
		io_uring_sqe_set_data64(s, next | b);
		next += len;
		reads++;
	};
	auto t0 = Clock::now();
	for (unsigned b = 0; b < kBuffers; b++)
		start_read(b);
	while (written < size) {
		wait_progress(ring.get());
		io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(ring.get(), head, cqe) {
			seen++;
			if (auto c = q.take(cqe)) {	// a remote write
				if (!c->ok())
					die(c->describe());
				written += c->len;
				start_read(static_cast<unsigned>(c->cookie % kBuffers));
				continue;
			}
			// A file read.
			std::uint64_t ud = io_uring_cqe_get_data64(cqe);
			unsigned b = static_cast<unsigned>(ud % kChunk);
			std::uint64_t off = ud - b;
			reads--;
			if (cqe->res <= 0)
				die(std::string("reading ") + path + ": " +
				    (cqe->res ? std::strerror(-cqe->res) : "unexpected end of file"));
			auto len = static_cast<std::uint32_t>(cqe->res);
			if (len != std::min<std::uint64_t>(kChunk, size - off))
				die(std::string("short read of ") + path);
			// Chunk index as imm; the cookie says which buffer to reuse.
			check(q.write_notify(conn, mr, b * kChunk, remote, off, len,
					     static_cast<std::uint32_t>(off / kChunk),
					     off / kChunk * kBuffers + b));
		}
		io_uring_cq_advance(ring.get(), seen);
	}
	auto dt = Clock::now() - t0;
	std::printf("sent %" PRIu64 " bytes in %.2f s (%.1f MB/s)\n", size,
		    std::chrono::duration<double>(dt).count(), mbps(size, dt));
	::close(fd);
	return 0;
}

int run_recv(const char *path)
{
	int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die(std::string("cannot create ") + path + ": " + std::strerror(errno));

	auto dev = check(me::Device::open());
	std::uint32_t peer = wait_for_peer(dev);
	Offer offer = recv_offer(dev, peer);
	if (offer.size > kMaxSize)
		die("the offered file is larger than 1 GiB");
	Mapping region(offer.size);
	auto mr = check(dev.register_memory(region.data(), region.size(),
					    me::Access::RemoteWrite));
	auto conn = check(dev.connect(peer));
	Offer where{};
	std::memcpy(where.magic, kMagic, sizeof(kMagic));
	where.region = mr.id();
	where.key = mr.key();
	send_offer(dev, conn, where);
	std::printf("receiving %" PRIu64 " bytes from node %u into %s\n", offer.size, peer, path);

	Ring ring;
	// One loop: the device readable -> harvest notifications -> a file
	// write per chunk; re-arm the poll while chunks are missing.
	auto arm_poll = [&] {
		io_uring_sqe *s = ring.sqe();
		io_uring_prep_poll_add(s, dev.fd(), POLLIN);
		io_uring_sqe_set_data64(s, kDevicePoll);
	};
	std::uint64_t chunks = (offer.size + kChunk - 1) / kChunk, arrived = 0, stored = 0;
	auto t0 = Clock::now();
	if (chunks)
		arm_poll();
	while (stored < offer.size) {
		wait_progress(ring.get());
		io_uring_cqe *cqe;
		unsigned head, seen = 0;
		bool rearm = false;
		io_uring_for_each_cqe(ring.get(), head, cqe) {
			seen++;
			if (io_uring_cqe_get_data64(cqe) == kDevicePoll) {
				for (const auto &c : check(dev.poll(256))) {
					if (c.type != me::CompletionType::Notify)
						continue;	// our own send's, connection events
					if (!c.ok())
						die(c.describe());
					io_uring_sqe *s = ring.sqe();
					io_uring_prep_write(s, fd, region.data() + c.off, c.len, c.off);
					io_uring_sqe_set_data64(s, c.len);
					arrived++;
				}
				rearm = arrived < chunks;
				continue;
			}
			if (cqe->res < 0 || static_cast<std::uint64_t>(cqe->res) != io_uring_cqe_get_data64(cqe))
				die(std::string("writing ") + path + ": " +
				    (cqe->res < 0 ? std::strerror(-cqe->res) : "short write"));
			stored += static_cast<std::uint64_t>(cqe->res);
		}
		io_uring_cq_advance(ring.get(), seen);
		if (rearm)
			arm_poll();
	}
	auto dt = Clock::now() - t0;
	if (::fsync(fd) < 0 || ::close(fd) < 0)
		die(std::string("cannot finish ") + path + ": " + std::strerror(errno));
	std::uint64_t sum = fnv1a(region.data(), offer.size);
	if (sum != offer.sum)
		die("checksum mismatch: the received bytes differ from the sender's file");
	std::printf("received %" PRIu64 " bytes in %.2f s (%.1f MB/s), checksum ok\n", offer.size,
		    std::chrono::duration<double>(dt).count(), mbps(offer.size, dt));
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc == 3 && std::strcmp(argv[1], "send") == 0)
		return run_send(argv[2]);
	if (argc == 3 && std::strcmp(argv[1], "recv") == 0)
		return run_recv(argv[2]);
	std::fprintf(argc == 2 && std::strcmp(argv[1], "--help") == 0 ? stdout : stderr,
		     "usage: me_filecopy recv OUT | send IN\n"
		     "\n"
		     "Copies IN on one node to OUT on another (multiedge.ko loaded and links\n"
		     "attached on both; start recv first or within a minute of send).  Each side\n"
		     "runs one io_uring loop: file reads and remote writes on the sender, device\n"
		     "polls and file writes on the receiver.  Files up to 1 GiB.\n");
	return argc == 2 && std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
}
