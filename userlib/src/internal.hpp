// libmultiedge: helpers shared by the library's sources (not installed).
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <sys/ioctl.h>
#include <vector>

#include "multiedge/device.hpp"
#include "multiedge/error.hpp"

namespace multiedge::detail {

// An error for `err`: "<what>: <strerror>" plus " (<hint>)" when one helps.
Error errno_error(int err, const std::string &what, const std::string &hint = {});

// The hint for ENOTTY from a command added in ABI 4: the module is older.
std::string abi4_hint();

// A connection id as messages name it: its number, or "loopback" for
// ME_CONN_LOOPBACK (this node itself).
std::string conn_label(std::uint32_t conn);

// The error every call on an empty object (moved from, closed) returns.
Error empty_error(const std::string &what, const char *object);

// The checks of a send naming a port (ABI 18) only the library can make:
// port 0 names nobody (EDESTADDRREQ), and a module before ABI 18 would
// take the port for a nonzero unknown field (EOPNOTSUPP instead).
Status check_send_port(const DeviceFile &file, std::uint32_t conn, std::uint16_t port);

// An atomic's values (ABI 19) as the module reads them from the local
// buffer at posting: `operand` at local_off, and for CompareSwap
// `compare` in the `size` bytes after it.
struct AtomicArgs {
	AtomicOp op;
	std::uint32_t size;
	std::uint64_t operand;
	std::uint64_t compare;
};

// The checks of an atomic only the library can make, before anything is
// written into `local` (a region of `file`): the module has atomics
// (EOPNOTSUPP), the op is one it knows and the size 4 or 8 (EINVAL), the
// local range holds the values and the value found (ERANGE).  `call`
// names the call for the message.
Status check_atomic(const DeviceFile &file, const char *call, std::uint32_t conn,
		    const MemoryRegion &local, std::uint64_t local_off, const AtomicArgs &a);

// Writes a's values where the module reads them (after check_atomic()).
void put_atomic_args(const MemoryRegion &local, std::uint64_t local_off,
		     const AtomicArgs &a) noexcept;

// A timeout as the ABI's __u32 milliseconds: rounded up, at least 1 (0 means
// "forever" or "the default" to the kernel), at most what fits.
std::uint32_t ms_arg(std::chrono::steady_clock::duration d);

// now + timeout without overflowing for very long timeouts.
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout);

// Calls a list command (ME_IOC_LINK_LIST, ME_IOC_PEER_LIST, ME_IOC_CONN_LIST):
// asks for `guess` entries, then again with the count the kernel reported
// while that was larger (the list may grow between calls).  `set` points
// the request at the array; `enotty_hint` explains ENOTTY.  Returns the
// entries written.
template <typename Req, typename Info, typename Set>
Result<std::vector<Info>> list_ioctl(int fd, unsigned long cmd, const std::string &what,
				     std::uint32_t guess, const std::string &enotty_hint, Set set)
{
	std::vector<Info> raw(guess ? guess : 1);
	for (;;) {
		Req req{};
		req.size = sizeof(req);
		req.count = static_cast<std::uint32_t>(raw.size());
		set(req, reinterpret_cast<std::uintptr_t>(raw.data()));
		req.info_size = sizeof(Info);
		if (::ioctl(fd, cmd, &req) < 0) {
			int err = errno;
			return errno_error(err, what, err == ENOTTY ? enotty_hint : std::string());
		}
		if (req.count <= raw.size()) {
			raw.resize(req.count);
			return raw;
		}
		raw.resize(req.count);
	}
}

} // namespace multiedge::detail
