// A stand-in for multiedge.ko on the host: ioctl() calls on one temporary
// file are answered here, following uapi/multiedge.h, so the library's
// side of the ABI (what it puts in each struct, how it re-calls list
// commands, its completion backlog, recv's growing buffer) can be tested
// where no module can be loaded.  Every other descriptor goes to the real
// ioctl.  One FakeModule at a time; it is installed while it lives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "uapi/multiedge.h"

namespace fake {

class FakeModule {
public:
	FakeModule();
	~FakeModule();
	FakeModule(const FakeModule &) = delete;
	FakeModule &operator=(const FakeModule &) = delete;

	// Device::open(path()) reaches this module.
	const std::string &path() const { return path_; }

	// Answers one command; 0 or a negative errno.
	int handle(unsigned long cmd, void *arg);
	bool owns(int fd) const;

	// A completion that enters the queue `delay` from now.
	void complete_later(const me_completion &c, std::chrono::milliseconds delay);

	// All of these are guarded by mu (tests set them before use, or lock).
	std::mutex mu;
	std::uint32_t abi = ME_ABI_VERSION;	// 3: behaves as a module of ABI 3
	me_query query{};			// the answer to ME_IOC_QUERY
	std::vector<me_link_info> links;
	std::vector<me_peer_info> peers;
	std::vector<me_nbr_info> nbrs;
	std::vector<me_conn_info> conns;
	std::vector<std::uint64_t> stats;
	std::vector<me_link_list> link_calls;	// each request as received
	std::vector<me_peer_list> peer_calls;
	std::vector<me_nbr_list> nbr_calls;
	std::vector<me_conn_list> conn_calls;
	std::vector<me_stats> stats_calls;

	int connect_err = 0;		// negative errno to fail ME_IOC_CONNECT
	std::uint32_t next_conn = 1;
	std::vector<me_connect> connects;
	// ME_CONNECT_F_SHARED: the shared connection's id per peer (joining
	// again gives the same one).
	std::map<std::uint32_t, std::uint32_t> shared_ids;
	// While set, ME_IOC_CONNECT waits (outside mu), counted in connects_held.
	std::atomic<bool> hold_connects{false};
	std::atomic<int> connects_held{0};
	int bind_err = 0;		// negative errno to fail ME_IOC_BIND
	std::vector<me_bind> binds;
	int disconnect_err = 0;
	std::vector<std::uint32_t> disconnects;
	int post_err = 0;
	std::vector<me_post> posts;
	// ME_OP_ATOMIC (needs ME_FEATURE_ATOMIC in query.features, else
	// -EOPNOTSUPP as from an older module): the operand and the value
	// compared with (ME_ATOMIC_CSWAP), read from the local region at
	// posting as the module reads them, one entry per atomic taken.
	struct AtomicArgs {
		std::uint64_t operand = 0;
		std::uint64_t compare = 0;
	};
	std::vector<AtomicArgs> atomics;
	// When set, an atomic taken completes at once: this value (its low
	// len bytes, host order) lands in the local buffer and an
	// ME_CQ_ATOMIC completion with the cookie enters the queue.
	std::optional<std::uint64_t> atomic_found;

	std::deque<me_completion> cq;
	std::vector<std::pair<std::chrono::steady_clock::time_point, me_completion>> later;
	std::uint32_t overflow = 0;
	std::vector<me_poll_cq> poll_calls;

	struct Message {
		std::uint32_t peer;
		std::uint32_t conn;
		std::vector<std::byte> data;
		std::uint32_t port = 0;	// ABI 18: the sender's, on a shared connection
	};
	std::deque<Message> messages;
	std::vector<me_recv> recv_calls;

	std::uint32_t next_region = 1;
	std::vector<std::uint32_t> regions;
	std::vector<me_mr_reg> mr_regs;	// as received
	// Each region's memory: id -> (addr, length).
	std::map<std::uint32_t, std::pair<std::uintptr_t, std::uint64_t>> region_mem;
	std::uint32_t mr_info = 0;		// info the module reports back

private:
	int poll_cq(me_poll_cq &req);
	int recv(me_recv &req);
	int atomic(const me_post &req);	// mu held
	void release_due();	// moves due `later` entries into cq; mu held

	std::string path_;
	dev_t dev_ = 0;
	ino_t ino_ = 0;
};

} // namespace fake
