// me_bench tcp-echo / tcp-pingpong: TCP's ping-pong, timed by the same
// loop (Stepper) and summarised by the same statistics as multiedge's
// pingpong, so that the two are compared median to median.  qperf's
// tcp_lat, the reference before, reports a mean only.  No module needed.
//
// The wire: the client opens one connection per size and sends the size
// as 8 bytes, little-endian (0: the server exits); then it writes SIZE
// bytes and reads them back, again and again, until it closes.  Both ends
// set TCP_NODELAY and block in read(), as qperf does.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "cpu.hpp"
#include "options.hpp"
#include "report.hpp"
#include "workers.hpp"

namespace bench {

namespace {

// No progress for this long means the server is stuck.
constexpr long kStuckSeconds = 60;
// The largest size a client may ask for (me_bench's own limit).
constexpr std::uint64_t kMaxSize = 256u << 20;

class Socket {
public:
	Socket() = default;
	explicit Socket(int fd) : fd_(fd) {}
	Socket(Socket &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
	Socket &operator=(Socket &&o) noexcept
	{
		if (this != &o) {
			reset();
			fd_ = std::exchange(o.fd_, -1);
		}
		return *this;
	}
	Socket(const Socket &) = delete;
	Socket &operator=(const Socket &) = delete;
	~Socket() { reset(); }

	int fd() const noexcept { return fd_; }

private:
	void reset()
	{
		if (fd_ >= 0)
			::close(fd_);
		fd_ = -1;
	}
	int fd_ = -1;
};

me::Error errno_error(const std::string &what)
{
	return me::Error::from_errno(errno, what);
}

me::Status no_delay(const Socket &s)
{
	int one = 1;
	if (::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return errno_error("cannot set TCP_NODELAY");
	return {};
}

// Writes all of [p, p + len).
me::Status write_full(const Socket &s, const std::byte *p, std::size_t len)
{
	while (len) {
		ssize_t n = ::send(s.fd(), p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return failure("the peer took nothing for too long (socket timeout)");
		if (n < 0)
			return errno_error("cannot send to the peer");
		p += n;
		len -= static_cast<std::size_t>(n);
	}
	return {};
}

// Both directions of `s` give up after `seconds` without progress (a
// peer that vanished without closing, or stopped reading).
me::Status set_timeouts(const Socket &s, long seconds)
{
	timeval tv{seconds, 0};
	if (::setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    ::setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return errno_error("cannot set the socket's timeouts");
	return {};
}

// Reads exactly len bytes.  *eof (when given) is set, and no error
// returned, if the peer closed before the first byte.
me::Status read_full(const Socket &s, std::byte *p, std::size_t len, bool *eof = nullptr)
{
	std::size_t got = 0;
	while (got < len) {
		ssize_t n = ::recv(s.fd(), p + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return failure("the peer sent nothing for too long (socket timeout)");
		if (n < 0)
			return errno_error("cannot receive from the peer");
		if (n == 0) {
			if (got == 0 && eof) {
				*eof = true;
				return {};
			}
			return failure("the peer closed the connection after " + std::to_string(got) +
				       " of " + std::to_string(len) + " bytes");
		}
		got += static_cast<std::size_t>(n);
	}
	return {};
}

std::array<std::byte, 8> size_hello(std::uint64_t size)
{
	std::array<std::byte, 8> b{};
	for (unsigned i = 0; i < 8; i++)
		b[i] = static_cast<std::byte>(size >> (8 * i));
	return b;
}

std::uint64_t hello_size(const std::array<std::byte, 8> &b)
{
	std::uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++)
		v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
	return v;
}

// A listening socket on every address (IPv6 with IPv4 mapped, else IPv4).
me::Result<Socket> listen_on(std::uint16_t port)
{
	Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
	bool v6 = s.fd() >= 0;
	if (!v6)
		s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (s.fd() < 0)
		return errno_error("cannot create a TCP socket");
	int one = 1, zero = 0;
	::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int ret;
	if (v6) {
		::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		sockaddr_in6 a{};
		a.sin6_family = AF_INET6;
		a.sin6_port = htons(port);
		a.sin6_addr = in6addr_any;
		ret = ::bind(s.fd(), reinterpret_cast<sockaddr *>(&a), sizeof(a));
	} else {
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_port = htons(port);
		a.sin_addr.s_addr = htonl(INADDR_ANY);
		ret = ::bind(s.fd(), reinterpret_cast<sockaddr *>(&a), sizeof(a));
	}
	if (ret)
		return errno_error("cannot bind TCP port " + std::to_string(port));
	if (::listen(s.fd(), 4))
		return errno_error("cannot listen on TCP port " + std::to_string(port));
	return s;
}

// Echoes one client's messages until it closes (or is silent for `idle`).
// Returns whether the client asked the server to exit (size 0).
me::Result<bool> echo_client(Socket c, std::chrono::seconds idle)
{
	if (auto st = no_delay(c); !st)
		return st.error();
	if (auto st = set_timeouts(c, static_cast<long>(idle.count())); !st)
		return st.error();
	std::array<std::byte, 8> hello{};
	bool eof = false;
	if (auto st = read_full(c, hello.data(), hello.size(), &eof); !st)
		return st.error();
	if (eof)
		return false;
	const std::uint64_t size = hello_size(hello);
	if (size == 0)
		return true;
	if (size > kMaxSize)
		return failure("a client asked for " + std::to_string(size) +
			       "-byte messages (at most " + std::to_string(kMaxSize) + ")");
	auto buf = Buffer::map(size, "an echo buffer");
	if (!buf)
		return buf.error();
	for (;;) {
		if (auto st = read_full(c, buf->data(), size, &eof); !st)
			return st.error();
		if (eof)
			return false;
		if (auto st = write_full(c, buf->data(), size); !st)
			return st.error();
	}
}

me::Status echo(const Options &o)
{
	auto l = listen_on(o.port);
	if (!l)
		return l.error();
	std::printf("me_bench tcp-echo: listening on TCP port %u\n", o.port);
	for (;;) {
		pollfd p{l->fd(), POLLIN, 0};
		int n = ::poll(&p, 1, static_cast<int>(o.idle.count() * 1000));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno_error("cannot wait for a client");
		if (n == 0)
			return failure("no client for " + std::to_string(o.idle.count()) + " s");
		Socket c(::accept4(l->fd(), nullptr, nullptr, SOCK_CLOEXEC));
		if (c.fd() < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return errno_error("cannot accept a client");
		}
		// A client's failure ends its connection, not the server.
		auto quit = echo_client(std::move(c), o.idle);
		if (!quit)
			std::fprintf(stderr, "me_bench tcp-echo: %s\n", quit.error().message().c_str());
		else if (quit.value())
			return {};
	}
}

// A connection to the server, retried for `patience` (the server may be
// starting), giving up after kStuckSeconds without progress.
me::Result<Socket> connect_to(const Options &o, std::chrono::seconds patience)
{
	addrinfo hints{};
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	addrinfo *res = nullptr;
	const std::string port = std::to_string(o.port);
	if (int e = ::getaddrinfo(o.connect.c_str(), port.c_str(), &hints, &res); e)
		return failure("cannot resolve " + o.connect + ": " + ::gai_strerror(e));
	std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(res, ::freeaddrinfo);
	const auto until = Clock::now() + patience;
	std::string last = "no address";
	for (;;) {
		for (addrinfo *a = res; a; a = a->ai_next) {
			Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
			if (s.fd() < 0) {
				last = std::strerror(errno);
				continue;
			}
			if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0) {
				if (auto st = set_timeouts(s, kStuckSeconds); !st)
					return st.error();
				if (auto st = no_delay(s); !st)
					return st.error();
				return s;
			}
			last = std::strerror(errno);
		}
		if (Clock::now() >= until)
			return failure("cannot connect to " + o.connect + " port " + port + " within " +
				       std::to_string(patience.count()) + " s: " + last);
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
}

// One size: SIZE bytes out, the echo back, its stamp checked, until the
// Stepper's window is over.
me::Status measure(const Options &o, std::uint64_t size, std::uint64_t salt, Sink &sink)
{
	auto s = connect_to(o, o.discover);
	if (!s)
		return s.error();
	const auto hello = size_hello(size);
	if (auto st = write_full(s.value(), hello.data(), hello.size()); !st)
		return st;
	auto src = Buffer::map(size, "a ping buffer");
	if (!src)
		return src.error();
	auto dst = Buffer::map(size, "an echo buffer");
	if (!dst)
		return dst.error();
	const std::size_t w = window_len(size);
	RunSpec spec;
	spec.size = size;
	spec.seconds = o.seconds;
	spec.warmup = o.warmup;
	spec.min_ops = o.min_iters;
	spec.salt = salt;
	Phase phase(1);
	Stepper step(spec, phase);
	ThreadResult r;
	for (std::uint64_t seq = 1;; seq++) {
		const std::uint64_t seed = op_seed(salt, 0, seq);
		stamp(src->data(), size, seed);
		const auto t = Clock::now();
		if (auto st = write_full(s.value(), src->data(), size); !st)
			return st;
		if (auto st = read_full(s.value(), dst->data(), size); !st)
			return st;
		const auto now = Clock::now();
		std::uint64_t where = 0;
		const std::byte *d = dst->data();
		if (!stamp_matches(d, d + size - w, size, seed, where))
			return failure("DATA MISMATCH: echo " + std::to_string(seq) + " of " +
				       std::to_string(size) + " bytes differs at byte " +
				       std::to_string(where) +
				       "; no result is reported for corrupted transfers");
		if (!step.completed(now, ns_between(t, now), r))
			break;
	}

	Row row;
	row.label = o.label;
	row.test = "tcp-pingpong";
	row.size = size;
	row.ops = r.ops;
	row.bytes = r.bytes;
	row.seconds = seconds_between(phase.start, phase.end);
	row.mbps = static_cast<double>(row.bytes) / 1e6 / row.seconds;
	auto l = summarize(r.lat_ns);
	row.rtt_median_us = l.median_us;
	row.rtt_p99_us = l.p99_us;
	row.lat_median_us = l.median_us / 2;
	row.lat_p99_us = l.p99_us / 2;
	row.lat_mean_us = l.mean_us / 2;
	row.ops_per_s = static_cast<double>(row.ops) / row.seconds;
	if (phase.cpu_ok) {
		row.cpu_util = cpu_util(phase.cpu_start, phase.cpu_end);
		row.cpu_us_per_mb = cpu_us_per_mb(phase.cpu_start, phase.cpu_end, row.bytes);
		row.cpu_us_per_op = cpu_us_per_op(phase.cpu_start, phase.cpu_end, row.ops);
	}
	return sink.write(row);
}

me::Status pingpong(const Options &o)
{
	if (auto st = bind_numa(o); !st)
		return st;
	auto sink = Sink::open(o.csv, o.json);
	if (!sink)
		return sink.error();
	const std::uint64_t salt = (static_cast<std::uint64_t>(std::random_device{}()) << 32) |
				   std::random_device{}();
	me::Status result;
	for (auto size : sweep_sizes(o)) {
		result = measure(o, size, salt, sink.value());
		if (!result)
			break;
	}
	if (!o.keep_server) {
		// Ask the server to exit, also after a failure (it may be fine).
		auto s = connect_to(o, std::chrono::seconds(result ? 10 : 0));
		const auto quit = size_hello(0);
		auto st = s ? write_full(s.value(), quit.data(), quit.size()) : me::Status(s.error());
		if (result && !st)
			return st;
	}
	return result;
}

int report(const char *mode, const me::Status &st)
{
	if (!st) {
		std::fprintf(stderr, "me_bench %s: %s\n", mode, st.error().message().c_str());
		return 1;
	}
	return 0;
}

} // namespace

int run_tcp_echo(const Options &opts)
{
	return report("tcp-echo", echo(opts));
}

int run_tcp_pingpong(const Options &opts)
{
	return report("tcp-pingpong", pingpong(opts));
}

} // namespace bench
