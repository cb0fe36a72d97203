// libmultiedge: the /dev/multiedge device.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "multiedge/connection.hpp"
#include "multiedge/error.hpp"

namespace multiedge {

// What the loaded module reports about itself (ME_IOC_QUERY).
struct DeviceInfo {
	std::uint32_t abi_version = 0;
	std::uint32_t features = 0;
	std::uint16_t ethertype = 0;
	std::uint64_t rx_frames = 0;	// frames of our ethertype seen, all namespaces
	std::uint64_t rx_dropped = 0;	// of those, dropped
	std::uint64_t pinned_pages = 0;	// pages pinned by registrations, all users
	std::uint64_t regions = 0;	// registered regions, all users
	// ABI 4: this namespace's node and the data path's accounting.
	std::uint32_t node_id = 0;
	std::uint32_t incarnation = 0;
	std::uint32_t packet_size = 0;	// 0 until the first link is attached
	std::uint64_t rx_queued = 0;	// skbs queued to receive threads
	std::uint64_t conns = 0;	// engine connections, all namespaces
	std::uint64_t ops_inflight = 0;	// operations posted, not completed
	// ABI 5
	std::uint64_t zc_skbs = 0;	// tracked frames sent from pinned pages, not yet released
	// ABI 22
	std::uint64_t staged_pages = 0;	// write payload copied at post, not yet freed
	// ABI 6: receive areas and page flipping, all users.
	std::uint64_t area_pages = 0;	// pages backing receive areas
	std::uint64_t pool_pages = 0;	// free pages the module keeps for frames
	std::uint64_t rx_flipped = 0;	// payload pages placed by page flip
	std::uint64_t rx_flip_copied = 0;	// whole area pages copied: no page to flip
	std::uint64_t tlb_flushes = 0;	// page table invalidations by flips
	// ABI 23
	std::uint64_t trains_segmented = 0;	// trains cut back into frames on the way
	// ABI 28: the pages frame heads are carved from
	std::uint64_t heads_reused = 0;	// carved again, their frames gone
	std::uint64_t heads_fresh = 0;	// taken from the page allocator
};

// How payload is placed into a region of a ReceiveArea (other memory is
// always copied into).
enum class Placement : std::uint32_t {
	Default = 0,		// flip, invalidating as the module parameter flip_tlb says
	Copy = 1u << 0,		// never flip
	FlipEager = 1u << 1,	// flip; invalidate the TLB per page
	FlipLazy = 1u << 2,	// flip; invalidate once per message
};

// What peers may do with a registered region (bit set).
enum class Access : std::uint32_t {
	None = 0,
	RemoteRead = 1u << 0,
	RemoteWrite = 1u << 1,
	RemoteReadWrite = RemoteRead | RemoteWrite,
};

constexpr Access operator|(Access a, Access b)
{
	return static_cast<Access>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}

namespace detail {
// The open file; shared by a Device and the regions registered through it,
// so it is closed only when the last of them is gone.
class DeviceFile {
public:
	explicit DeviceFile(int fd) : fd(fd) {}
	DeviceFile(const DeviceFile &) = delete;
	DeviceFile &operator=(const DeviceFile &) = delete;
	~DeviceFile();
	const int fd;

	// The completion queue as the library sees it.  `backlog` holds
	// completions taken from the kernel but not handed out yet (a
	// wait_for() harvested them while looking for another cookie),
	// oldest first; poll()/wait()/wait_for() look there before asking
	// the kernel.  At most one thread at a time blocks in the kernel
	// (`harvesting` set); the others sleep on `cv`, woken when it adds to
	// the backlog or stops harvesting, so no completion waits unseen.
	std::mutex mu;
	std::condition_variable cv;
	std::deque<Completion> backlog;		// guarded by mu
	bool harvesting = false;		// guarded by mu
	std::atomic<std::uint32_t> overflow{0};	// last count the kernel reported

	// What the module said at open (ME_IOC_QUERY): calls that need a
	// newer ABI fail with EOPNOTSUPP before reaching it.
	std::uint32_t abi = 0;
	std::uint32_t features = 0;

	// The shared connections this file joined through connect_shared(),
	// peer -> connection id (0 while the join is under way).  The module
	// keeps one join per file, so one Connection per peer may hold it:
	// otherwise the first to leave would leave for both.  ME_IOC_DISCONNECT
	// of a joined id happens under shared_mu, so a join cannot slip
	// between the check and the leave.
	std::mutex shared_mu;
	std::map<std::uint32_t, std::uint32_t> shared;	// guarded by shared_mu
};
} // namespace detail

class MemoryRegion;
class ReceiveArea;

// An Ethernet device attached as a multiedge link (ME_IOC_LINK_LIST).
struct LinkInfo {
	std::string ifname;
	std::uint32_t ifindex = 0;
	std::uint32_t mtu = 0;
	bool up = false;		// running with carrier
	std::uint64_t rx_frames = 0;	// multiedge frames received on it
	std::uint64_t rx_bytes = 0;
	// ABI 4
	std::uint32_t index = 0;	// link slot (bit in PeerInfo::links)
	bool alive = false;		// a peer answers on it
	std::uint32_t peer_node = 0;	// its peer when it has exactly one, else 0
	std::uint32_t rate_mbps = 0;
	std::uint64_t tx_frames = 0;
	std::uint64_t tx_bytes = 0;
	std::uint64_t rx_dropped = 0;
	std::uint64_t tx_errors = 0;
	std::uint64_t rx_copied = 0;
	// ABI 5
	std::uint64_t tx_zc_frames = 0;	// frames whose payload went by reference
	// ABI 9
	std::uint32_t nbrs = 0;		// peers known on it (Device::neighbours())
	std::uint32_t nbrs_alive = 0;	// ... alive both ways
	// ABI 14
	std::uint64_t rx_direct = 0;	// handled in the NIC's softirq, not a thread
	// ABI 23
	std::uint64_t tx_trains = 0;	// skbs that carried several of tx_frames
	std::uint64_t rx_trains = 0;	// ... of rx_frames
};

// An open handle on /dev/multiedge.  It acts in the network namespace of
// the process that opened it.  Owns the file descriptor: movable,
// not copyable, closed on destruction.
class Device {
public:
	// Opens the device.  Fails with ENOENT when the module is not loaded
	// (the message says how to load it), EACCES without permission, or
	// ENOTTY when `path` is not a multiedge device.
	static Result<Device> open(const std::string &path = default_path());

	Device(Device &&other) noexcept = default;
	Device &operator=(Device &&other) noexcept = default;
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;

	// Queries the module.  Fails only if the module misbehaves or the
	// device went away (EFAULT, ENOTTY, ...).
	Result<DeviceInfo> query() const;

	// Starts using Ethernet device `ifname` as a link.  Fails with EPERM
	// (needs CAP_NET_ADMIN), ENODEV (no such device), EINVAL (not
	// Ethernet, or a bad name), EEXIST (already attached), ENOSPC (too
	// many links).
	Status attach_link(const std::string &ifname);
	// Stops using it.  Fails with EPERM or ENOENT (not attached).
	Status detach_link(const std::string &ifname);
	// The attached links, in attach order.
	Result<std::vector<LinkInfo>> links() const;

	// Registers [addr, addr + length) (any alignment) for remote access
	// as `access` allows; the pages stay pinned until the region is
	// destroyed.  Fails with EINVAL (length 0 or over 1 GiB, or the
	// range wraps), EFAULT (not all mapped and writable), ENOMEM
	// (RLIMIT_MEMLOCK: see `ulimit -l`), ENOSPC (4096 regions per open
	// device).
	Result<MemoryRegion> register_memory(void *addr, std::size_t length,
					     Access access) const;
	// The same with a placement for a range of a ReceiveArea of this
	// device (then nothing is pinned: the area's pages are the module's).
	// EINVAL also if the range is only partly an area, or another
	// device's.
	Result<MemoryRegion> register_memory(void *addr, std::size_t length, Access access,
					     Placement placement) const;

	// Maps `length` bytes (rounded up to pages) of zeroed module memory
	// a peer's writes can be placed into by page flip: whole pages that
	// arrive as whole pages replace the area's pages in this process's
	// page table instead of being copied (Documentation/api.md).  Not
	// inherited by fork(); cannot be moved by mremap().  Charged to
	// RLIMIT_MEMLOCK.  Fails with EINVAL (length 0 or over 1 GiB),
	// ENOMEM, ENODEV (the module predates ABI 6).
	Result<ReceiveArea> map_area(std::size_t length) const;

	// Nodes found by discovery on this namespace's links.
	Result<std::vector<PeerInfo>> peers() const;
	// Every (link, peer) neighbour (ABI 9; ENOTTY from older modules).
	Result<std::vector<NeighbourInfo>> neighbours() const;
	// Every connection of the namespace with its counters.
	Result<std::vector<ConnectionInfo>> connections() const;
	// The protocol engine's counters by name ("rx_pkts", "tx_rtx_loss", ...).
	Result<std::vector<std::pair<std::string, std::uint64_t>>> stats() const;

	// Opens a connection to node `peer`; waits until it is accepted.
	// Fails with EHOSTUNREACH (no link reaches the peer yet), ENETDOWN
	// (no link attached), ETIMEDOUT, EINVAL (bad peer), ENOSPC.
	Result<Connection> connect(std::uint32_t peer, Ordering ordering = Ordering::Unordered,
				   std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;
	// The same to the Device bound to `port` on the peer (ABI 11; port 0
	// is the call above).  Also ECONNREFUSED: nobody there is bound to it.
	Result<Connection> connect(std::uint32_t peer, std::uint16_t port,
				   Ordering ordering = Ordering::Unordered,
				   std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

	// The node pair's shared connection to `peer` (ABI 18,
	// ME_CONNECT_F_SHARED): one connection between this node and the peer
	// that every Device of both nodes may post on, instead of one per
	// pair of Devices.  If it is up or being opened, from either side,
	// this Device joins it; else it is opened.  Unordered.  Sends on it
	// name the receiving Device's port (Connection::send_to), so give
	// each Device a port (bind()) for its messages to find it.  The
	// Connection's destructor or close() leaves it; the connection this
	// node opened closes when the last Device of this node that joined
	// it leaves, and every Device that joined it gets its ConnClosed or
	// ConnDead; after closing that Connection, connect_shared() again
	// opens a new one.  One Connection per peer per Device: while this
	// Device holds one (even one whose connection ended), another
	// connect_shared() to the peer fails with EISCONN (the module keeps one
	// join per open file; a second handle's leave would end the first's).
	// Errors as connect(), and EOPNOTSUPP from a module before ABI 18,
	// ENOSPC past ME_CONN_MAX_PER_FILE (256) joined connections.
	Result<Connection> connect_shared(std::uint32_t peer,
					  std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

	// Makes this Device the endpoint on `port` of its node (ABI 11): the
	// connections peers open to that port are its own from the start,
	// and it takes no message of connections opened to no port.  0: the
	// module picks a free port (from 32768).  Returns the port.  Fails
	// with EADDRINUSE (another Device has it), EISCONN (this one is bound
	// already), EADDRNOTAVAIL (no free port), ENOTTY (module before ABI 11).
	Result<std::uint16_t> bind(std::uint16_t port = 0) const;

	// Completions of operations posted through this device and events
	// for it.  poll() never blocks; wait() blocks until at least one is
	// there or the timeout passes (then the vector is empty).
	Result<std::vector<Completion>> poll(std::size_t max = 64) const;
	Result<std::vector<Completion>> wait(std::size_t max = 64,
					     std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
	// Waits for the completion carrying `cookie` and returns it (its
	// status may be an error); completions harvested meanwhile are kept
	// for later poll()/wait()/wait_for() calls.  ETIMEDOUT if it does
	// not come in time.
	Result<Completion> wait_for(std::uint64_t cookie,
				    std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
	// Events nobody posted for that were dropped because the queue was full.
	std::uint32_t overflow() const noexcept;

	// Takes the oldest message for this Device (from `peer`, or any when
	// 0): one that came on a connection it opened or accepted, or the
	// first of a peer's connection nobody holds yet (taking it makes the
	// connection this Device's: its later messages come only here), or
	// (ABI 18) one sent on a shared connection to the port this Device
	// is bound to (Message::port: the sender's port).
	// ETIMEDOUT if none comes in time.
	Result<Message> recv(std::uint32_t peer = 0,
			     std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;
	// The connection `m` (taken by this Device's recv()) came on, to
	// answer on: writes, reads and sends on it reach the peer's Device
	// that opened it and nobody else.  Its destructor or close() closes
	// it for that peer too.  EINVAL for a message without a connection.
	// Posting on it fails with ENOENT if this Device does not hold it.
	// For a message of a shared connection (ABI 18) it is that
	// connection, which any Device may post on (answer with
	// send_to(m.port, ...)); its destructor or close() tells the module
	// nothing, so it never leaves for a connect_shared() Connection.
	Result<Connection> accept(const Message &m) const;

	// This node itself as a connection (ABI 20, ME_CONN_LOOPBACK):
	// write, write_notify, read, atomic and compare_swap on it reach the
	// regions of this node (another Device's of the same node, or this
	// one's) by their RemoteRegion, with a peer's checks and errors; each
	// is done before the call returns, its completion queued (conn
	// ME_CONN_LOOPBACK, peer this node).  Needs no link.  Sends on it
	// fail with EOPNOTSUPP; close() gives nothing back.  EOPNOTSUPP from
	// a module before ABI 20.
	Result<Connection> loopback() const;

	int fd() const noexcept { return file_ ? file_->fd : -1; }
	const std::string &path() const noexcept { return path_; }

	static std::string default_path();

private:
	friend class UringQueue;	// posts on the same open file
	Device(int fd, std::string path)
		: file_(std::make_shared<detail::DeviceFile>(fd)), path_(std::move(path)) {}

	std::shared_ptr<detail::DeviceFile> file_;
	std::string path_;
};

// A registered region.  Owns the registration: movable, not copyable,
// deregistered on destruction (which waits until no operation uses it).
// Keeps the device file open for as long as it lives.
class MemoryRegion {
public:
	MemoryRegion(MemoryRegion &&other) noexcept;
	MemoryRegion &operator=(MemoryRegion &&other) noexcept;
	MemoryRegion(const MemoryRegion &) = delete;
	MemoryRegion &operator=(const MemoryRegion &) = delete;
	~MemoryRegion();

	std::uint32_t id() const noexcept { return id_; }
	std::uint64_t key() const noexcept { return key_; }
	void *addr() const noexcept { return addr_; }
	std::size_t length() const noexcept { return length_; }
	Access access() const noexcept { return access_; }
	// Whether it is a range of a ReceiveArea (payload may be flipped in).
	bool is_area() const noexcept { return area_; }

	// Deregisters now; the object is empty afterwards.  Fails only if
	// the region is no longer registered (ENOENT).
	Status deregister();

private:
	friend class Device;
	friend class Connection;	// checks that a region is of its own file
	friend class UringQueue;
	MemoryRegion(std::shared_ptr<detail::DeviceFile> file, std::uint32_t id, std::uint64_t key,
		     void *addr, std::size_t length, Access access, bool area)
		: file_(std::move(file)), id_(id), key_(key), addr_(addr), length_(length),
		  access_(access), area_(area) {}

	std::shared_ptr<detail::DeviceFile> file_;
	std::uint32_t id_ = 0;
	std::uint64_t key_ = 0;
	void *addr_ = nullptr;
	std::size_t length_ = 0;
	Access access_ = Access::None;
	bool area_ = false;
};

// Memory mapped from /dev/multiedge (Device::map_area).  Owns the mapping:
// movable, not copyable, unmapped on destruction.  Regions registered on
// it keep the pages alive; a peer's writes into them after the unmap land
// in memory nobody sees.
class ReceiveArea {
public:
	ReceiveArea(ReceiveArea &&other) noexcept;
	ReceiveArea &operator=(ReceiveArea &&other) noexcept;
	ReceiveArea(const ReceiveArea &) = delete;
	ReceiveArea &operator=(const ReceiveArea &) = delete;
	~ReceiveArea();

	std::uint8_t *data() const noexcept { return static_cast<std::uint8_t *>(addr_); }
	std::size_t size() const noexcept { return length_; }

private:
	friend class Device;
	ReceiveArea(void *addr, std::size_t length) : addr_(addr), length_(length) {}
	void reset() noexcept;

	void *addr_ = nullptr;
	std::size_t length_ = 0;
};

} // namespace multiedge
