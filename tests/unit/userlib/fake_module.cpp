// The host stand-in for multiedge.ko (see fake_module.hpp).
#include "fake_module.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

namespace fake {

namespace {

std::atomic<FakeModule *> installed{nullptr};

// The list commands: entries `info_size` apart, count in = room, out = total.
template <typename Req, typename Info>
int answer_list(Req &req, std::uint64_t array, const std::vector<Info> &items)
{
	if (req.size != sizeof(Req) || req.__reserved || req.info_size < sizeof(Info))
		return -EINVAL;
	auto *out = reinterpret_cast<unsigned char *>(static_cast<std::uintptr_t>(array));
	std::size_t n = std::min<std::size_t>(req.count, items.size());
	for (std::size_t i = 0; i < n; i++) {
		std::memset(out + i * req.info_size, 0, req.info_size);
		std::memcpy(out + i * req.info_size, &items[i], sizeof(Info));
	}
	req.count = static_cast<std::uint32_t>(items.size());
	return 0;
}

} // namespace

FakeModule::FakeModule()
{
	char name[] = "/tmp/me-fake-XXXXXX";
	int fd = ::mkstemp(name);
	if (fd < 0)
		std::abort();
	struct stat st;
	if (::fstat(fd, &st) < 0)
		std::abort();
	::close(fd);
	path_ = name;
	dev_ = st.st_dev;
	ino_ = st.st_ino;

	query.abi_version = ME_ABI_VERSION;
	query.features = ME_FEATURE_URING_CMD;
	query.ethertype = ME_DEFAULT_ETHERTYPE;
	query.rx_frames = 11;
	query.rx_dropped = 2;
	query.pinned_pages = 3;
	query.regions = 1;
	query.node_id = 0x0a000001;
	query.incarnation = 0x5eed;
	query.packet_size = 1486;
	query.rx_queued = 4;
	query.conns = 5;
	query.ops_inflight = 6;
	query.zc_skbs = 7;
	query.staged_pages = 9;

	FakeModule *none = nullptr;
	if (!installed.compare_exchange_strong(none, this))
		std::abort();	// one at a time
}

FakeModule::~FakeModule()
{
	installed.store(nullptr);
	::unlink(path_.c_str());
}

bool FakeModule::owns(int fd) const
{
	struct stat st;
	return ::fstat(fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void FakeModule::complete_later(const me_completion &c, std::chrono::milliseconds delay)
{
	std::lock_guard lk(mu);
	later.emplace_back(std::chrono::steady_clock::now() + delay, c);
}

void FakeModule::release_due()
{
	auto now = std::chrono::steady_clock::now();
	std::stable_sort(later.begin(), later.end(),
			 [](const auto &a, const auto &b) { return a.first < b.first; });
	while (!later.empty() && later.front().first <= now) {
		cq.push_back(later.front().second);
		later.erase(later.begin());
	}
}

int FakeModule::poll_cq(me_poll_cq &req)
{
	if (req.size != sizeof(req))
		return -EINVAL;
	if (req.flags & ~ME_POLL_F_WAIT)
		return -EOPNOTSUPP;
	if (!req.count || req.entry_size < sizeof(me_completion))
		return -EINVAL;
	bool wait = req.flags & ME_POLL_F_WAIT;
	auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms);
	for (;;) {
		{
			std::lock_guard lk(mu);
			poll_calls.push_back(req);
			release_due();
			if (!cq.empty() || !wait || std::chrono::steady_clock::now() >= deadline) {
				auto *out = reinterpret_cast<unsigned char *>(
					static_cast<std::uintptr_t>(req.entries));
				std::uint32_t n = 0;
				for (; n < req.count && !cq.empty(); n++) {
					std::memcpy(out + n * req.entry_size, &cq.front(),
						    sizeof(me_completion));
					cq.pop_front();
				}
				req.count = n;
				req.overflow = overflow;
				return 0;
			}
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
}

int FakeModule::recv(me_recv &req)
{
	if (req.size != sizeof(req))
		return -EINVAL;
	if (req.flags & ~ME_RECV_F_WAIT)
		return -EOPNOTSUPP;
	bool wait = req.flags & ME_RECV_F_WAIT;
	auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms);
	for (;;) {
		{
			std::lock_guard lk(mu);
			recv_calls.push_back(req);
			auto it = std::find_if(messages.begin(), messages.end(), [&](const Message &m) {
				return !req.peer || m.peer == req.peer;
			});
			if (it != messages.end()) {
				if (it->data.size() > req.len) {
					req.len = static_cast<std::uint32_t>(it->data.size());
					return -EMSGSIZE;
				}
				std::memcpy(reinterpret_cast<void *>(static_cast<std::uintptr_t>(req.buf)),
					    it->data.data(), it->data.size());
				req.len = static_cast<std::uint32_t>(it->data.size());
				req.peer = it->peer;
				req.conn = it->conn;
				req.port = it->port;
				messages.erase(it);
				return 0;
			}
			if (!wait)
				return -EAGAIN;
			if (std::chrono::steady_clock::now() >= deadline)
				return -ETIMEDOUT;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
}

int FakeModule::atomic(const me_post &req)
{
	if (!(query.features & ME_FEATURE_ATOMIC) || req.imm < ME_ATOMIC_ADD ||
	    req.imm > ME_ATOMIC_READ)
		return -EOPNOTSUPP;
	if (req.len != 4 && req.len != 8)
		return -EINVAL;
	auto mem = region_mem.find(req.local_region);
	if (mem == region_mem.end())
		return -ENOENT;
	const auto [addr, length] = mem->second;
	const std::uint64_t need = req.imm == ME_ATOMIC_CSWAP ? 2 * req.len : req.len;
	if (req.local_off > length || need > length - req.local_off)
		return -ERANGE;
	auto *at = reinterpret_cast<unsigned char *>(addr + req.local_off);
	// A value of len bytes in host order.
	auto load = [len = req.len](const unsigned char *p) -> std::uint64_t {
		if (len == 4) {
			std::uint32_t v;
			std::memcpy(&v, p, 4);
			return v;
		}
		std::uint64_t v;
		std::memcpy(&v, p, 8);
		return v;
	};
	AtomicArgs a;
	if (req.imm != ME_ATOMIC_READ) {
		a.operand = load(at);
		if (req.imm == ME_ATOMIC_CSWAP)
			a.compare = load(at + req.len);
	}
	if (post_err)
		return post_err;
	atomics.push_back(a);
	if (atomic_found) {
		if (req.len == 4) {
			const auto v = static_cast<std::uint32_t>(*atomic_found);
			std::memcpy(at, &v, 4);
		} else {
			std::memcpy(at, &*atomic_found, 8);
		}
		me_completion c{};
		c.cookie = req.cookie;
		c.type = ME_CQ_ATOMIC;
		c.conn = req.conn;
		c.peer = 2;
		c.len = req.len;
		cq.push_back(c);
	}
	return 0;
}

int FakeModule::handle(unsigned long cmd, void *arg)
{
	if (cmd == ME_IOC_POLL_CQ)
		return poll_cq(*static_cast<me_poll_cq *>(arg));
	if (cmd == ME_IOC_RECV)
		return abi >= 4 ? recv(*static_cast<me_recv *>(arg)) : -ENOTTY;
	if (cmd == ME_IOC_CONNECT && hold_connects.load()) {
		connects_held++;
		while (hold_connects.load())
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}

	std::lock_guard lk(mu);
	if (abi < 4 && cmd != ME_IOC_QUERY && cmd != ME_IOC_LINK_LIST && cmd != ME_IOC_MR_REG &&
	    cmd != ME_IOC_MR_DEREG)
		return -ENOTTY;
	switch (cmd) {
	case ME_IOC_QUERY: {
		auto *q = static_cast<me_query *>(arg);
		if (q->size < ME_QUERY_SIZE_VER0)
			return -EINVAL;
		me_query answer = query;
		answer.size = q->size;
		std::size_t known = abi >= 5 ? ME_QUERY_SIZE_VER3 :
				    abi >= 4 ? ME_QUERY_SIZE_VER2 : ME_QUERY_SIZE_VER1;
		std::memcpy(q, &answer, std::min<std::size_t>(q->size, known));
		return 0;
	}
	case ME_IOC_LINK_LIST: {
		auto *req = static_cast<me_link_list *>(arg);
		link_calls.push_back(*req);
		return answer_list(*req, req->links, links);
	}
	case ME_IOC_PEER_LIST: {
		auto *req = static_cast<me_peer_list *>(arg);
		peer_calls.push_back(*req);
		return answer_list(*req, req->peers, peers);
	}
	case ME_IOC_NBR_LIST: {
		if (abi < 9)
			return -ENOTTY;
		auto *req = static_cast<me_nbr_list *>(arg);
		nbr_calls.push_back(*req);
		return answer_list(*req, req->nbrs, nbrs);
	}
	case ME_IOC_CONN_LIST: {
		auto *req = static_cast<me_conn_list *>(arg);
		conn_calls.push_back(*req);
		return answer_list(*req, req->conns, conns);
	}
	case ME_IOC_STATS: {
		auto *req = static_cast<me_stats *>(arg);
		stats_calls.push_back(*req);
		if (req->size != sizeof(*req))
			return -EINVAL;
		auto *out = reinterpret_cast<std::uint64_t *>(static_cast<std::uintptr_t>(req->values));
		std::size_t n = std::min<std::size_t>(req->count, stats.size());
		std::copy_n(stats.begin(), n, out);
		req->count = static_cast<std::uint32_t>(stats.size());
		return 0;
	}
	case ME_IOC_CONNECT: {
		auto *req = static_cast<me_connect *>(arg);
		connects.push_back(*req);
		if (req->size != sizeof(*req) || req->port > ME_PORT_MAX)
			return -EINVAL;
		if (req->flags & ~(ME_CONNECT_F_ORDERED | ME_CONNECT_F_SHARED) ||
		    ((req->flags & ME_CONNECT_F_SHARED) && !(query.features & ME_FEATURE_SHARED)))
			return -EOPNOTSUPP;
		const bool shared = req->flags & ME_CONNECT_F_SHARED;
		if (shared && ((req->flags & ME_CONNECT_F_ORDERED) || req->port))
			return -EINVAL;
		if (connect_err)
			return connect_err;
		if (shared) {
			auto [it, fresh] = shared_ids.try_emplace(req->peer, next_conn);
			if (fresh)
				next_conn++;
			req->conn = it->second;
			return 0;
		}
		req->conn = next_conn++;
		return 0;
	}
	case ME_IOC_BIND: {
		auto *req = static_cast<me_bind *>(arg);
		binds.push_back(*req);
		if (req->size != sizeof(*req) || req->__reserved || req->flags)
			return -EINVAL;
		if (bind_err)
			return bind_err;
		if (!req->port)
			req->port = ME_PORT_EPHEMERAL + 7;
		return 0;
	}
	case ME_IOC_DISCONNECT: {
		auto *req = static_cast<me_disconnect *>(arg);
		if (req->size != sizeof(*req))
			return -EINVAL;
		disconnects.push_back(req->conn);
		return disconnect_err;
	}
	case ME_IOC_POST: {
		auto *req = static_cast<me_post *>(arg);
		if (req->size != sizeof(*req))
			return -EINVAL;
		if (req->flags & ~(ME_POST_F_NONBLOCK | ME_POST_F_MORE | ME_POST_F_ACK_NOW) ||
		    ((req->flags & ME_POST_F_MORE) && !(query.features & ME_FEATURE_POST_MORE)) ||
		    ((req->flags & ME_POST_F_ACK_NOW) && !(query.features & ME_FEATURE_ACK_NOW)))
			return -EOPNOTSUPP;
		posts.push_back(*req);
		if (req->opcode == ME_OP_ATOMIC)
			return atomic(*req);
		return post_err;
	}
	case ME_IOC_MR_REG: {
		auto *req = static_cast<me_mr_reg *>(arg);
		mr_regs.push_back(*req);
		req->info = mr_info;
		req->region = next_region++;
		req->key = 0xabc00000u + req->region;
		req->key_hi = 0x5eed0000u + req->region;
		regions.push_back(req->region);
		region_mem[req->region] = {static_cast<std::uintptr_t>(req->addr), req->length};
		return 0;
	}
	case ME_IOC_MR_DEREG: {
		auto *req = static_cast<me_mr_dereg *>(arg);
		auto it = std::find(regions.begin(), regions.end(), req->region);
		if (it == regions.end())
			return -ENOENT;
		regions.erase(it);
		region_mem.erase(req->region);
		return 0;
	}
	}
	return -ENOTTY;
}

} // namespace fake

// Every ioctl of the test binary comes here (the library is linked in
// statically): the fake module's file is answered by it, the rest go to
// the kernel.
extern "C" int ioctl(int fd, unsigned long request, ...) noexcept
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	fake::FakeModule *m = fake::installed.load();
	if (m && m->owns(fd)) {
		int ret = m->handle(request, arg);
		if (ret < 0) {
			errno = -ret;
			return -1;
		}
		return ret;
	}
	return static_cast<int>(::syscall(SYS_ioctl, fd, request, arg));
}
