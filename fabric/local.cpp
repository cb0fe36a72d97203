// The same-node path.  The module connects nodes, never a node to itself,
// so endpoints of one node (MPI ranks sharing it) exchange their messages
// through datagram sockets: each endpoint binds "multiedge-fi/<node>/<port>"
// in the abstract namespace of its network namespace (the port is the one
// its domain's file holds in the module, so the name is unique there).
// A message of up to kLocalInlineMax bytes travels inline; a larger one is
// written to a memory file whose descriptor the datagram passes (Kind::Shm),
// and the receiver reads it out.  Datagrams of one socket to another keep
// their order; a full receiver (EAGAIN) is tried again from progress.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include "fabric/mefi.hpp"

namespace mefi {

Fd &Fd::operator=(Fd &&o) noexcept
{
	if (this != &o) {
		if (fd_ >= 0)
			::close(fd_);
		fd_ = std::exchange(o.fd_, -1);
	}
	return *this;
}

Fd::~Fd()
{
	if (fd_ >= 0)
		::close(fd_);
}

std::string local_name(Addr a)
{
	return "multiedge-fi/" + std::to_string(addr_node(a)) + "/" +
	       std::to_string(addr_port(a));
}

namespace {

constexpr int kSocketBuffer = 4 << 20;	// asked for; rmem_max/wmem_max bound it
constexpr int kFilesMax = 4;		// descriptors one datagram may pass

socklen_t sockaddr_of(Addr a, sockaddr_un &sa)
{
	std::string n = local_name(a);
	std::memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	std::memcpy(sa.sun_path + 1, n.data(), n.size());	// abstract: a NUL first
	return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n.size());
}

// The endpoint a sender's socket name is, when it is one of this node's.
std::optional<Addr> addr_of_name(const sockaddr_un &sa, socklen_t len, std::uint32_t node)
{
	std::size_t base = offsetof(sockaddr_un, sun_path) + 1;
	if (sa.sun_family != AF_UNIX || len <= base || len > sizeof(sa) || sa.sun_path[0])
		return std::nullopt;
	std::string name(sa.sun_path + 1, len - base);
	std::string prefix = "multiedge-fi/" + std::to_string(node) + "/";
	if (name.compare(0, prefix.size(), prefix))
		return std::nullopt;
	std::optional<std::uint16_t> port = parse_port(name.c_str() + prefix.size());
	if (!port || name.find('\0') != std::string::npos)
		return std::nullopt;
	Addr a = make_addr(node, *port);
	return local_name(a) == name ? std::optional<Addr>(a) : std::nullopt;	// canonical
}

// Reads [0, len) of a passed file; false unless it is a regular file that
// long (a peer may pass anything).
bool read_file(int fd, std::uint8_t *out, std::size_t len)
{
	struct stat st;
	if (::fstat(fd, &st) || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) < len)
		return false;
	for (std::size_t done = 0; done < len;) {
		ssize_t n = ::pread(fd, out + done, len - done, static_cast<off_t>(done));
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		done += static_cast<std::size_t>(n);
	}
	return true;
}

// Writes the whole of [buf, +len) to a new memory file; 0 or an errno.
int write_file(const void *buf, std::size_t len, Fd &out)
{
	Fd f(::memfd_create("multiedge-fi", MFD_CLOEXEC));
	if (!f)
		return errno;
	const auto *p = static_cast<const std::uint8_t *>(buf);
	for (std::size_t done = 0; done < len;) {
		ssize_t n = ::pwrite(f.get(), p + done, len - done, static_cast<off_t>(done));
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return n < 0 ? errno : EIO;
		}
		done += static_cast<std::size_t>(n);
	}
	out = std::move(f);
	return 0;
}

} // namespace

int Domain::init_local()
{
	local = Fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (!local)
		return errno;
	sockaddr_un sa;
	socklen_t n = sockaddr_of(self, sa);
	if (::bind(local.get(), reinterpret_cast<sockaddr *>(&sa), n))
		return errno;
	// Best effort: larger buffers take bursts of inline messages.
	int size = kSocketBuffer;
	(void)::setsockopt(local.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	(void)::setsockopt(local.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	local_buf.resize(kHeaderSize + kLocalInlineMax + 1);	// + 1: a longer one shows

	wait_set = Fd(::epoll_create1(EPOLL_CLOEXEC));
	if (!wait_set)
		return errno;
	epoll_event dev{};
	dev.events = EPOLLIN | EPOLLRDBAND;
	dev.data.fd = fd;
	epoll_event sock{};
	sock.events = EPOLLIN;
	sock.data.fd = local.get();
	if (::epoll_ctl(wait_set.get(), EPOLL_CTL_ADD, fd, &dev) ||
	    ::epoll_ctl(wait_set.get(), EPOLL_CTL_ADD, local.get(), &sock))
		return errno;
	waits_for_messages = true;
	return 0;
}

void Domain::wait_for_messages(bool want)
{
	if (want == waits_for_messages || !wait_set)
		return;
	// Messages not taken (the endpoint holds its max_unexpected) would
	// keep the set readable: blocking reads would spin.
	epoll_event dev{};
	dev.events = want ? std::uint32_t{EPOLLIN | EPOLLRDBAND} : std::uint32_t{EPOLLIN};
	dev.data.fd = fd;
	epoll_event sock{};
	sock.events = want ? std::uint32_t{EPOLLIN} : 0;
	sock.data.fd = local.get();
	if (::epoll_ctl(wait_set.get(), EPOLL_CTL_MOD, fd, &dev) ||
	    ::epoll_ctl(wait_set.get(), EPOLL_CTL_MOD, local.get(), &sock)) {
		MEFI_WARN("changing what the wait set waits for: %s\n", std::strerror(errno));
		return;
	}
	waits_for_messages = want;
}

void Domain::drain_local()
{
	for (int i = 0; i < 256 && ep && !ep->unexpected_full(); i++) {
		sockaddr_un from{};
		alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kFilesMax)];
		iovec iov{local_buf.data(), local_buf.size()};
		msghdr m{};
		m.msg_name = &from;
		m.msg_namelen = sizeof(from);
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		ssize_t n = ::recvmsg(local.get(), &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				MEFI_WARN("receiving from this node's endpoints: %s\n",
					  std::strerror(errno));
			break;
		}
		// Every descriptor passed is ours to close, whatever came.
		std::vector<Fd> files;
		for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (std::size_t j = 0; j < k; j++) {
				int got;
				std::memcpy(&got, CMSG_DATA(c) + j * sizeof(int), sizeof(got));
				files.emplace_back(got);
			}
		}
		std::optional<Addr> src = addr_of_name(from, m.msg_namelen, node);
		if (!src || *src == self || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
		    static_cast<std::size_t>(n) > kHeaderSize + kLocalInlineMax) {
			ep->dropped++;
			continue;
		}
		ep->on_local_message(*src, local_buf.data(), static_cast<std::size_t>(n), files);
	}
}

bool Endpoint::is_local(Addr a) const
{
	return addr_node(a) == domain->node && a != domain->self;
}

void Endpoint::on_local_message(Addr from, const std::uint8_t *msg, std::size_t len,
				const std::vector<Fd> &files)
{
	std::optional<Header> h = decode(msg, len);
	// Its header names its socket's port; a file comes with Shm only.
	if (!h || h->port != addr_port(from) ||
	    (h->kind != Kind::Eager && h->kind != Kind::Shm) ||
	    files.size() != (h->kind == Kind::Shm ? 1u : 0u)) {
		if (!dropped++)
			MEFI_WARN("dropped a malformed message from %s\n", addr_string(from).c_str());
		return;
	}
	if (h->kind == Kind::Eager) {
		accept_in_order(from, *h, msg, len);
		return;
	}
	// Read out of its file, it goes on as the Eager message it is.
	std::vector<std::uint8_t> whole;
	try {
		whole.resize(kHeaderSize + h->len);
	} catch (const std::bad_alloc &) {
		MEFI_WARN("no memory for a message of %llu bytes from %s: dropped\n",
			  static_cast<unsigned long long>(h->len), addr_string(from).c_str());
		dropped++;
		return;
	}
	if (!read_file(files[0].get(), whole.data() + kHeaderSize, h->len)) {
		MEFI_WARN("the file of a message from %s cannot be read: dropped\n",
			  addr_string(from).c_str());
		dropped++;
		return;
	}
	Header e = *h;
	e.kind = Kind::Eager;
	encode(e, whole.data());
	accept_in_order(from, e, whole.data(), whole.size());
}

ssize_t Endpoint::local_send(std::unique_ptr<Op> op, const void *buf, std::size_t len)
{
	Header &h = op->h;
	if (len <= kLocalInlineMax) {
		h.kind = Kind::Eager;
		op->local_msg.resize(kHeaderSize + len);
		if (len)
			std::memcpy(op->local_msg.data() + kHeaderSize, buf, len);
	} else {
		if (int err = write_file(buf, len, op->local_file))
			return -(err == ENOSPC || err == EFBIG ? FI_ENOMEM : fi_error_of(err));
		h.kind = Kind::Shm;
		op->local_msg.resize(kHeaderSize);
	}
	Addr to = op->addr;
	Peer &p = peers[to];
	h.seq = p.tx_seq++;
	h.session = stream_session(p);
	h.port = addr_port(domain->self);
	encode(h, op->local_msg.data());
	p.waiting.push_back(op.release());
	flush_local(to, p);
	return 0;
}

void Endpoint::flush_local(Addr to, Peer &p)
{
	sockaddr_un sa;
	socklen_t salen = sockaddr_of(to, sa);
	while (!p.waiting.empty()) {
		Op *op = p.waiting.front();
		iovec iov{op->local_msg.data(), op->local_msg.size()};
		msghdr m{};
		m.msg_name = &sa;
		m.msg_namelen = salen;
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
		if (op->local_file) {
			m.msg_control = ctl;
			m.msg_controllen = sizeof(ctl);
			cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			int f = op->local_file.get();
			std::memcpy(CMSG_DATA(c), &f, sizeof(f));
		}
		if (::sendmsg(domain->local.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			int err = errno;
			if (err == EAGAIN || err == EINTR || err == ENOBUFS)
				return;		// its queue is full: retry() comes back
			// ECONNREFUSED: nobody has that name, the endpoint is gone
			// (a new one there gets a new stream).  Any other error:
			// its number never comes, so the stream starts again too.
			p.waiting.pop_front();
			complete_tx(op, err == ENOENT ? FI_ECONNREFUSED : fi_error_of(err));
			const std::uint32_t stream = op->h.session;
			release(op);
			restart_stream(to, stream);
			continue;
		}
		p.waiting.pop_front();
		complete_tx(op, 0);
		release(op);
	}
}

} // namespace mefi
