// libmultiedge: the /dev/multiedge handle.
#include "multiedge/device.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.hpp"
#include "uapi/multiedge.h"

namespace multiedge {

namespace {

Error open_error(int err, const std::string &path)
{
	Error e = Error::from_errno(err, "cannot open " + path);
	std::string hint;
	if (err == ENOENT)
		hint = " (is multiedge.ko loaded? try: sudo insmod kernel/multiedge.ko)";
	else if (err == EACCES || err == EPERM)
		hint = " (check the device's permissions)";
	return Error(e.code(), e.message() + hint);
}

Status link_request(int fd, unsigned long cmd, const std::string &ifname)
{
	const char *what = cmd == ME_IOC_LINK_ATTACH ? "attach" : "detach";
	if (ifname.empty() || ifname.size() >= ME_IFNAMSIZ)
		return Error(std::make_error_code(std::errc::invalid_argument),
			     std::string("cannot ") + what + " link '" + ifname +
				     "': an interface name has 1 to " +
				     std::to_string(ME_IFNAMSIZ - 1) + " characters");
	me_link_req req{};
	req.size = sizeof(req);
	std::memcpy(req.ifname, ifname.c_str(), ifname.size() + 1);
	if (::ioctl(fd, cmd, &req) == 0)
		return {};

	int err = errno;
	Error e = Error::from_errno(err, std::string("cannot ") + what + " link " + ifname);
	std::string hint;
	switch (err) {
	case EPERM:
		hint = " (needs CAP_NET_ADMIN: run as root)";
		break;
	case ENODEV:
		hint = " (no such network device in this namespace)";
		break;
	case EINVAL:
		hint = " (not an Ethernet device)";
		break;
	case EEXIST:
		hint = " (already attached)";
		break;
	case ENOENT:
		hint = " (not attached)";
		break;
	case ENOSPC:
		hint = " (at most " + std::to_string(ME_MAX_LINKS) + " links per namespace)";
		break;
	case EMSGSIZE:
		hint = " (its MTU is below 1280, or below the packet size the namespace's "
		       "first link fixed: see `mectl info`; raise the MTU)";
		break;
	}
	return Error(e.code(), e.message() + hint);
}

} // namespace

std::string Device::default_path()
{
	return ME_DEVICE_PATH;
}

Result<Device> Device::open(const std::string &path)
{
	int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return open_error(errno, path);

	Device dev(fd, path);
	// A query proves this is a multiedge device speaking our ABI.
	auto info = dev.query();
	if (!info) {
		if (info.error().code() == std::errc::inappropriate_io_control_operation)
			return Error(info.error().code(),
				     path + " is not a multiedge device (ME_IOC_QUERY: " +
					     info.error().code().message() + ")");
		return info.error();
	}
	dev.file_->abi = info->abi_version;
	dev.file_->features = info->features;
	return dev;
}

detail::DeviceFile::~DeviceFile()
{
	::close(fd);
}

Result<DeviceInfo> Device::query() const
{
	if (!file_)
		return detail::empty_error("ME_IOC_QUERY", "Device");
	me_query q{};
	q.size = sizeof(q);
	if (::ioctl(fd(), ME_IOC_QUERY, &q) < 0)
		return Error::from_errno(errno, "ME_IOC_QUERY on " + path_);

	// A module older than ABI 4 writes only what it knows: the rest
	// stays zero.
	DeviceInfo info;
	info.abi_version = q.abi_version;
	info.features = q.features;
	info.ethertype = q.ethertype;
	info.rx_frames = q.rx_frames;
	info.rx_dropped = q.rx_dropped;
	info.pinned_pages = q.pinned_pages;
	info.regions = q.regions;
	info.node_id = q.node_id;
	info.incarnation = q.incarnation;
	info.packet_size = q.packet_size;
	info.rx_queued = q.rx_queued;
	info.conns = q.conns;
	info.ops_inflight = q.ops_inflight;
	info.zc_skbs = q.zc_skbs;
	info.staged_pages = q.staged_pages;
	info.area_pages = q.area_pages;
	info.trains_segmented = q.trains_segmented;
	info.heads_reused = q.heads_reused;
	info.heads_fresh = q.heads_fresh;
	info.pool_pages = q.pool_pages;
	info.rx_flipped = q.rx_flipped;
	info.rx_flip_copied = q.rx_flip_copied;
	info.tlb_flushes = q.tlb_flushes;
	return info;
}

Status Device::attach_link(const std::string &ifname)
{
	if (!file_)
		return detail::empty_error("cannot attach link " + ifname, "Device");
	return link_request(fd(), ME_IOC_LINK_ATTACH, ifname);
}

Status Device::detach_link(const std::string &ifname)
{
	if (!file_)
		return detail::empty_error("cannot detach link " + ifname, "Device");
	return link_request(fd(), ME_IOC_LINK_DETACH, ifname);
}

Result<std::vector<LinkInfo>> Device::links() const
{
	if (!file_)
		return detail::empty_error("ME_IOC_LINK_LIST", "Device");
	auto raw = detail::list_ioctl<me_link_list, me_link_info>(
		fd(), ME_IOC_LINK_LIST, "ME_IOC_LINK_LIST on " + path_, ME_MAX_LINKS,
		path_ + " is not a multiedge device",
		[](me_link_list &req, std::uint64_t p) { req.links = p; });
	if (!raw)
		return raw.error();

	std::vector<LinkInfo> out;
	out.reserve(raw->size());
	for (const me_link_info &r : raw.value()) {
		LinkInfo li;
		li.ifname.assign(r.ifname, strnlen(r.ifname, sizeof(r.ifname)));
		li.ifindex = r.ifindex;
		li.mtu = r.mtu;
		li.up = r.flags & ME_LINK_F_UP;
		li.rx_frames = r.rx_frames;
		li.rx_bytes = r.rx_bytes;
		li.index = r.index;
		li.alive = r.flags & ME_LINK_F_ALIVE;
		li.peer_node = r.peer_node;
		li.rate_mbps = r.rate_mbps;
		li.tx_frames = r.tx_frames;
		li.tx_bytes = r.tx_bytes;
		li.rx_dropped = r.rx_dropped;
		li.tx_errors = r.tx_errors;
		li.rx_copied = r.rx_copied;
		li.tx_zc_frames = r.tx_zc_frames;
		li.nbrs = r.nbrs;
		li.nbrs_alive = r.nbrs_alive;
		li.rx_direct = r.rx_direct;
		li.tx_trains = r.tx_trains;
		li.rx_trains = r.rx_trains;
		out.push_back(std::move(li));
	}
	return out;
}

Result<std::vector<PeerInfo>> Device::peers() const
{
	if (!file_)
		return detail::empty_error("ME_IOC_PEER_LIST", "Device");
	auto raw = detail::list_ioctl<me_peer_list, me_peer_info>(
		fd(), ME_IOC_PEER_LIST, "ME_IOC_PEER_LIST on " + path_, 16, detail::abi4_hint(),
		[](me_peer_list &req, std::uint64_t p) { req.peers = p; });
	if (!raw)
		return raw.error();

	std::vector<PeerInfo> out;
	out.reserve(raw->size());
	for (const me_peer_info &r : raw.value()) {
		PeerInfo pi;
		pi.node_id = r.node_id;
		pi.incarnation = r.incarnation;
		pi.links = r.links;
		pi.alive_links = r.alive_links;
		pi.alive = r.flags & ME_PEER_F_ALIVE;
		pi.name.assign(r.name, strnlen(r.name, sizeof(r.name)));
		pi.conns = r.conns;
		out.push_back(pi);
	}
	return out;
}

Result<std::vector<NeighbourInfo>> Device::neighbours() const
{
	if (!file_)
		return detail::empty_error("ME_IOC_NBR_LIST", "Device");
	auto raw = detail::list_ioctl<me_nbr_list, me_nbr_info>(
		fd(), ME_IOC_NBR_LIST, "ME_IOC_NBR_LIST on " + path_, 32,
		"the loaded module does not know this command: its ABI is older than 9 "
		"(see mectl info); load the multiedge.ko built with this library",
		[](me_nbr_list &req, std::uint64_t p) { req.nbrs = p; });
	if (!raw)
		return raw.error();
	std::vector<NeighbourInfo> out;
	out.reserve(raw->size());
	for (const me_nbr_info &r : raw.value()) {
		NeighbourInfo n;
		n.link = r.link;
		n.node_id = r.node_id;
		n.incarnation = r.incarnation;
		std::copy_n(r.mac, n.mac.size(), n.mac.begin());
		n.alive = r.flags & ME_NBR_F_ALIVE;
		n.rx = r.flags & ME_NBR_F_RX;
		n.heard = r.flags & ME_NBR_F_HEARD;
		n.rtt_us = r.rtt_us;
		n.rate_mbps = r.rate_mbps;
		n.inflight = r.inflight;
		n.rx_age_ms = r.rx_age_ms;
		n.tx_pkts = r.tx_pkts;
		n.rx_pkts = r.rx_pkts;
		n.lost_pkts = r.lost_pkts;
		n.tx_bytes = r.tx_bytes;
		n.rx_bytes = r.rx_bytes;
		n.cwnd = r.cwnd;
		n.data_rtt_us = r.data_rtt_us;
		n.data_delay_us = r.data_delay_us;
		n.base_us = r.base_us;
		n.target_us = r.target_us;
		n.noise_us = r.noise_us;
		out.push_back(n);
	}
	return out;
}

namespace {

std::string conn_state_name(std::uint32_t state)
{
	switch (state) {
	case ME_CONN_S_CONNECTING:
		return "connecting";
	case ME_CONN_S_ESTABLISHED:
		return "established";
	case ME_CONN_S_CLOSING:
		return "closing";
	case ME_CONN_S_CLOSED:
		return "closed";
	case ME_CONN_S_DEAD:
		return "dead";
	}
	return "state_" + std::to_string(state);
}

// The names of enum me_stat_index, in its order.
constexpr const char *stat_names[] = {
	"rx_pkts",     "rx_short",    "rx_version",  "rx_type",	   "rx_field",	  "rx_notme",
	"rx_stale",    "rx_dup",      "rx_window",   "rx_closed",  "rx_nores",	  "rx_badack",
	"rx_badop",    "tx_data",     "tx_rtx_loss", "tx_rtx_rto", "tx_rtx_fail", "tx_ack",
	"tx_nack",     "tx_fail",     "rto_fired",   "link_down",  "link_up",	  "credit_stall",
	"conn_refused", "key_rejected", "conn_aborted",
	"rx_hello_held", "peer_restart", "rx_cookie", "peer_abort",
	"peer_table_full", "peer_evicted", "peer_forgotten", "rx_addr", "path_stalled",
	"path_told_down", "rtx_spurious", "tx_packs", "tx_packed", "ack_held", "ack_carried", "ack_hold_expired",
	"cc_loss_queue", "cc_loss_random", "shared_lost", "timer_late",
	"cc_queue_delay", "cc_queue_burst", "cc_queue_full", "cc_cut_loss", "cc_cut_delay",
	"cc_cut_rto", "cc_reset", "cc_undo", "cc_calm", "ack_now", "cc_idle",
};
static_assert(std::size(stat_names) == ME_STAT_COUNT,
	      "a name for every enum me_stat_index entry, in order");

} // namespace

Result<std::vector<ConnectionInfo>> Device::connections() const
{
	if (!file_)
		return detail::empty_error("ME_IOC_CONN_LIST", "Device");
	auto raw = detail::list_ioctl<me_conn_list, me_conn_info>(
		fd(), ME_IOC_CONN_LIST, "ME_IOC_CONN_LIST on " + path_, 32, detail::abi4_hint(),
		[](me_conn_list &req, std::uint64_t p) { req.conns = p; });
	if (!raw)
		return raw.error();

	std::vector<ConnectionInfo> out;
	out.reserve(raw->size());
	for (const me_conn_info &r : raw.value()) {
		ConnectionInfo ci;
		ci.conn = r.conn;
		ci.peer = r.peer;
		ci.state = conn_state_name(r.state);
		ci.ordered = r.flags & ME_CONN_I_ORDERED;
		ci.active = r.flags & ME_CONN_I_ACTIVE;
		ci.tx_packets = r.tx_packets;
		ci.tx_bytes = r.tx_bytes;
		ci.retransmits = r.retransmits;
		ci.rx_packets = r.rx_packets;
		ci.rx_bytes = r.rx_bytes;
		ci.rx_dropped = r.rx_dropped;
		ci.errors = r.errors;
		ci.copies = r.copies;
		ci.port = static_cast<std::uint16_t>(r.port);
		ci.shared = r.flags & ME_CONN_I_SHARED;
		out.push_back(std::move(ci));
	}
	return out;
}

Result<std::vector<std::pair<std::string, std::uint64_t>>> Device::stats() const
{
	if (!file_)
		return detail::empty_error("ME_IOC_STATS", "Device");
	std::vector<std::uint64_t> values(ME_STAT_COUNT);
	for (;;) {
		me_stats req{};
		req.size = sizeof(req);
		req.count = static_cast<std::uint32_t>(values.size());
		req.values = reinterpret_cast<std::uintptr_t>(values.data());
		if (::ioctl(fd(), ME_IOC_STATS, &req) < 0) {
			int err = errno;
			return detail::errno_error(err, "ME_IOC_STATS on " + path_,
						   err == ENOTTY ? detail::abi4_hint() : std::string());
		}
		bool complete = req.count <= values.size();
		values.resize(req.count);
		if (complete)
			break;
	}

	std::vector<std::pair<std::string, std::uint64_t>> out;
	out.reserve(values.size());
	for (std::size_t i = 0; i < values.size(); i++)
		out.emplace_back(i < std::size(stat_names) ? std::string(stat_names[i])
							   : "stat_" + std::to_string(i),
				 values[i]);
	return out;
}

Result<Connection> Device::accept(const Message &m) const
{
	if (!file_)
		return detail::empty_error("cannot accept a connection", "Device");
	if (!m.conn || !m.peer)
		return Error(std::make_error_code(std::errc::invalid_argument),
			     "cannot accept the connection of a message without one");
	// A shared connection is not this Device's to close: leaving it here
	// would end a connect_shared() Connection's join.  Only its messages
	// carry a port; one from a sender without a port is told by the
	// connection list.
	bool shared = m.port != 0;
	if (!shared && (file_->features & ME_FEATURE_SHARED)) {
		auto conns = connections();
		if (!conns)
			return conns.error();
		shared = std::any_of(conns->begin(), conns->end(), [&m](const ConnectionInfo &c) {
			return c.conn == m.conn && c.shared;
		});
	}
	return Connection(file_, m.conn, m.peer,
			  shared ? Connection::Hold::Borrowed : Connection::Hold::Own);
}

Result<Connection> Device::loopback() const
{
	if (!file_)
		return detail::empty_error("cannot use this node's loopback", "Device");
	if (!(file_->features & ME_FEATURE_LOOPBACK))
		return detail::errno_error(EOPNOTSUPP, "cannot use this node's loopback",
					   "the loaded module (ABI " + std::to_string(file_->abi) +
						   ") has none: load multiedge.ko of ABI 20 or newer "
						   "(mectl info)");
	auto info = query();
	if (!info)
		return info.error();
	return Connection(file_, ME_CONN_LOOPBACK, info->node_id, Connection::Hold::Loopback);
}

Result<Connection> Device::connect(std::uint32_t peer, Ordering ordering,
				   std::chrono::milliseconds timeout) const
{
	return connect(peer, 0, ordering, timeout);
}

namespace {

// The error of a failed ME_IOC_CONNECT, with what to check.
Error connect_error(int err, const std::string &what, std::uint32_t peer, std::uint16_t port,
		    std::uint32_t timeout_ms, bool shared)
{
	std::string n = std::to_string(peer);
	std::string hint;
	switch (err) {
	case EHOSTUNREACH:
		hint = "no link reaches node " + n +
		       " yet: is the peer's module loaded and its links attached? (mectl peers)";
		break;
	case ENETDOWN:
		hint = "no link is attached in this network namespace: attach one first "
		       "(mectl attach IFNAME)";
		break;
	case ETIMEDOUT:
		hint = "node " + n + " did not accept within " + std::to_string(timeout_ms) +
		       " ms: check that its links are alive (mectl peers, mectl links)";
		break;
	case EINVAL:
		hint = "the node id must not be 0, the broadcast id or this node's own id "
		       "(mectl info shows it)";
		break;
	case ECONNRESET:
		hint = "node " + n + " restarted while connecting: try again";
		break;
	case ECONNREFUSED:
		hint = "no program on node " + n + " is bound to port " + std::to_string(port);
		break;
	case ENOSPC:
		hint = "at most " + std::to_string(ME_CONN_MAX_PER_FILE) +
		       (shared ? " shared connections joined" : " connections") +
		       " per open device, or the namespace used up its connection "
		       "ids (module parameter max_conns), or node " + n +
		       " has no room for another connection from this node";
		break;
	case EINTR:
		hint = "a signal arrived; the connection was abandoned";
		break;
	case EOPNOTSUPP:
		hint = "the module does not know a flag the library set: is it older than the "
		       "library? (mectl info)";
		break;
	case ENOTTY:
		hint = detail::abi4_hint();
		break;
	}
	return detail::errno_error(err, what, hint);
}

} // namespace

Result<Connection> Device::connect(std::uint32_t peer, std::uint16_t port, Ordering ordering,
				   std::chrono::milliseconds timeout) const
{
	std::string what = "cannot connect to node " + std::to_string(peer);
	if (port)
		what += " port " + std::to_string(port);
	if (!file_)
		return detail::empty_error(what, "Device");
	me_connect req{};
	req.size = sizeof(req);
	req.flags = ordering == Ordering::Ordered ? ME_CONNECT_F_ORDERED : 0;
	req.peer = peer;
	req.timeout_ms = detail::ms_arg(timeout);
	req.port = port;
	if (::ioctl(fd(), ME_IOC_CONNECT, &req) == 0)
		return Connection(file_, req.conn, peer);
	return connect_error(errno, what, peer, port, req.timeout_ms, false);
}

Result<Connection> Device::connect_shared(std::uint32_t peer,
					  std::chrono::milliseconds timeout) const
{
	std::string what = "cannot join the shared connection to node " + std::to_string(peer);
	if (!file_)
		return detail::empty_error(what, "Device");
	if (!(file_->features & ME_FEATURE_SHARED))
		return detail::errno_error(EOPNOTSUPP, what,
					   "the loaded module (ABI " + std::to_string(file_->abi) +
						   ") has no shared connections: load multiedge.ko "
						   "of ABI 18 or newer (mectl info)");
	{
		// Reserved before the call, so that two threads cannot both
		// join (one join per file: the first to leave would leave for
		// both).
		std::lock_guard lk(file_->shared_mu);
		auto [it, fresh] = file_->shared.try_emplace(peer, 0);
		if (!fresh)
			return detail::errno_error(
				EISCONN, what,
				it->second ? "this Device holds it already as connection " +
						     std::to_string(it->second) +
						     ": post on that Connection (one per peer per "
						     "Device), or close it first"
					   : "another thread of this Device is joining it");
	}
	me_connect req{};
	req.size = sizeof(req);
	req.flags = ME_CONNECT_F_SHARED;
	req.peer = peer;
	req.timeout_ms = detail::ms_arg(timeout);
	int ret = ::ioctl(fd(), ME_IOC_CONNECT, &req);
	int err = errno;
	std::lock_guard lk(file_->shared_mu);
	if (ret < 0) {
		file_->shared.erase(peer);
		return connect_error(err, what, peer, 0, req.timeout_ms, true);
	}
	file_->shared[peer] = req.conn;
	return Connection(file_, req.conn, peer, Connection::Hold::Joined);
}

Result<std::uint16_t> Device::bind(std::uint16_t port) const
{
	std::string what = port ? "cannot bind port " + std::to_string(port) : "cannot bind a port";
	if (!file_)
		return detail::empty_error(what, "Device");
	me_bind req{};
	req.size = sizeof(req);
	req.port = port;
	if (::ioctl(fd(), ME_IOC_BIND, &req) == 0)
		return static_cast<std::uint16_t>(req.port);
	int err = errno;
	std::string hint;
	switch (err) {
	case EADDRINUSE:
		hint = "another open device of this network namespace is bound to it";
		break;
	case EISCONN:
		hint = "this device is bound to a port already (one per open device)";
		break;
	case EADDRNOTAVAIL:
		hint = "every port from " + std::to_string(ME_PORT_EPHEMERAL) + " up is taken";
		break;
	case ENOTTY:
		hint = "the loaded module predates ports (ABI 11): load the matching multiedge.ko";
		break;
	}
	return detail::errno_error(err, what, hint);
}

Result<MemoryRegion> Device::register_memory(void *addr, std::size_t length, Access access) const
{
	return register_memory(addr, length, access, Placement::Default);
}

Result<MemoryRegion> Device::register_memory(void *addr, std::size_t length, Access access,
					     Placement placement) const
{
	if (!file_)
		return detail::empty_error("cannot register memory", "Device");
	me_mr_reg req{};
	req.size = sizeof(req);
	req.access = static_cast<std::uint32_t>(access);
	req.addr = reinterpret_cast<std::uintptr_t>(addr);
	req.length = length;
	req.flags = static_cast<std::uint32_t>(placement);
	if (::ioctl(fd(), ME_IOC_MR_REG, &req) < 0) {
		int err = errno;
		Error e = Error::from_errno(err, "cannot register " + std::to_string(length) +
							 " bytes of memory");
		std::string hint;
		if (err == ENOMEM)
			hint = " (over RLIMIT_MEMLOCK? see ulimit -l)";
		else if (err == EFAULT)
			hint = " (the range must be mapped and writable)";
		else if (err == EINVAL)
			hint = " (length must be 1 byte to 1 GiB, and a range touching a receive "
			       "area must lie within one area of this device)";
		else if (err == EOPNOTSUPP && placement != Placement::Default)
			hint = " (placement needs a module with ABI 6)";
		return Error(e.code(), e.message() + hint);
	}
	return MemoryRegion(file_, req.region, std::uint64_t{req.key_hi} << 32 | req.key, addr,
			    length, access,
			    req.info & ME_MR_INFO_AREA);
}

Result<ReceiveArea> Device::map_area(std::size_t length) const
{
	if (!file_)
		return detail::empty_error("cannot map a receive area", "Device");
	if (!length || length > ME_MR_MAX_LENGTH)
		return Error(std::make_error_code(std::errc::invalid_argument),
			     "cannot map a receive area of " + std::to_string(length) +
					     " bytes (1 byte to 1 GiB)");
	long page = ::sysconf(_SC_PAGESIZE);
	std::size_t len = (length + page - 1) / page * page;
	void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd(), 0);
	if (p == MAP_FAILED) {
		int err = errno;
		std::string hint;
		if (err == ENOMEM || err == EAGAIN)
			hint = " (over RLIMIT_MEMLOCK? see ulimit -l)";
		else if (err == ENODEV)
			hint = " (the loaded module predates receive areas, ABI 6)";
		return Error::from_errno(err, "cannot map a receive area of " +
						      std::to_string(len) + " bytes from " + path_ +
						      hint);
	}
	return ReceiveArea(p, len);
}

ReceiveArea::ReceiveArea(ReceiveArea &&other) noexcept
	: addr_(other.addr_), length_(other.length_)
{
	other.addr_ = nullptr;
	other.length_ = 0;
}

ReceiveArea &ReceiveArea::operator=(ReceiveArea &&other) noexcept
{
	if (this != &other) {
		reset();
		addr_ = other.addr_;
		length_ = other.length_;
		other.addr_ = nullptr;
		other.length_ = 0;
	}
	return *this;
}

ReceiveArea::~ReceiveArea()
{
	reset();
}

void ReceiveArea::reset() noexcept
{
	if (addr_)
		::munmap(addr_, length_);
	addr_ = nullptr;
	length_ = 0;
}

MemoryRegion::MemoryRegion(MemoryRegion &&other) noexcept
	: file_(std::move(other.file_)), id_(other.id_), key_(other.key_), addr_(other.addr_),
	  length_(other.length_), access_(other.access_), area_(other.area_)
{
	other.id_ = 0;
}

MemoryRegion &MemoryRegion::operator=(MemoryRegion &&other) noexcept
{
	if (this != &other) {
		(void)deregister();
		file_ = std::move(other.file_);
		id_ = other.id_;
		key_ = other.key_;
		addr_ = other.addr_;
		length_ = other.length_;
		access_ = other.access_;
		area_ = other.area_;
		other.id_ = 0;
	}
	return *this;
}

MemoryRegion::~MemoryRegion()
{
	(void)deregister();
}

Status MemoryRegion::deregister()
{
	if (!file_ || !id_)
		return {};
	me_mr_dereg req{};
	req.size = sizeof(req);
	req.region = id_;
	int ret = ::ioctl(file_->fd, ME_IOC_MR_DEREG, &req);
	int err = errno;
	std::uint32_t id = id_;
	id_ = 0;
	file_.reset();
	if (ret < 0)
		return Error::from_errno(err, "cannot deregister region " + std::to_string(id));
	return {};
}

} // namespace multiedge
