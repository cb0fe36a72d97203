// libmultiedge: building errors from errno values.
#include "multiedge/error.hpp"

#include <cstring>

#include "internal.hpp"
#include "uapi/multiedge.h"

namespace multiedge {

Error Error::from_errno(int err, std::string what)
{
	std::error_code code(err, std::generic_category());
	std::string msg = std::move(what);
	msg += ": ";
	msg += code.message();
	return Error(code, std::move(msg));
}

} // namespace multiedge

namespace multiedge::detail {

Error errno_error(int err, const std::string &what, const std::string &hint)
{
	Error e = Error::from_errno(err, what);
	if (hint.empty())
		return e;
	return Error(e.code(), e.message() + " (" + hint + ")");
}

std::string abi4_hint()
{
	return "the loaded module does not know this command: its ABI is older than 4 "
	       "(see mectl info); load the multiedge.ko built with this library";
}

std::string conn_label(std::uint32_t conn)
{
	return conn == ME_CONN_LOOPBACK ? std::string("loopback") : std::to_string(conn);
}

Status check_send_port(const DeviceFile &file, std::uint32_t conn, std::uint16_t port)
{
	const std::string what = "cannot post send_to on connection " + conn_label(conn);
	if (!port)
		return errno_error(EDESTADDRREQ, what,
				   "port 0 names no Device: a Message with port 0 came from a "
				   "Device bound to none, which no send can reach");
	if (!(file.features & ME_FEATURE_SHARED))
		return errno_error(EOPNOTSUPP, what,
				   "the loaded module (ABI " + std::to_string(file.abi) +
					   ") has no shared connections, whose sends name a port: "
					   "load multiedge.ko of ABI 18 or newer (mectl info)");
	return {};
}

Status check_atomic(const DeviceFile &file, const char *call, std::uint32_t conn,
		    const MemoryRegion &local, std::uint64_t local_off, const AtomicArgs &a)
{
	auto what = [call, conn] {
		return std::string("cannot post ") + call + " on connection " + conn_label(conn);
	};
	if (!(file.features & ME_FEATURE_ATOMIC))
		return errno_error(EOPNOTSUPP, what(),
				   "the loaded module (ABI " + std::to_string(file.abi) +
					   ") has no remote atomics: load multiedge.ko of ABI 19 "
					   "or newer (mectl info)");
	const auto op = static_cast<std::uint32_t>(a.op);
	if (op < ME_ATOMIC_ADD || op > ME_ATOMIC_READ)
		return errno_error(EINVAL, what(),
				   "unknown AtomicOp " + std::to_string(op) + ": Add .. Read");
	if (a.size != 4 && a.size != 8)
		return errno_error(EINVAL, what(),
				   "an atomic acts on 4 or 8 bytes, not " + std::to_string(a.size));
	const std::uint64_t need = a.op == AtomicOp::CompareSwap ? 2 * a.size : a.size;
	if (local_off > local.length() || need > local.length() - local_off)
		return errno_error(ERANGE, what(),
				   "[" + std::to_string(local_off) + ", +" + std::to_string(need) +
					   ") is outside local region " + std::to_string(local.id()) +
					   " of " + std::to_string(local.length()) +
					   " bytes: the operand" +
					   (a.op == AtomicOp::CompareSwap ? " and the value compared with"
									  : "") +
					   " and the value found go there");
	return {};
}

Error empty_error(const std::string &what, const char *object)
{
	return errno_error(EBADF, what,
			   std::string("this ") + object +
				   " is empty: it was moved from or already closed");
}

std::uint32_t ms_arg(std::chrono::steady_clock::duration d)
{
	using namespace std::chrono;
	if (d <= steady_clock::duration::zero())
		return 1;
	auto ms = ceil<milliseconds>(d).count();
	constexpr auto most = std::numeric_limits<std::uint32_t>::max();
	return ms >= static_cast<decltype(ms)>(most) ? most : static_cast<std::uint32_t>(ms);
}

std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout)
{
	using namespace std::chrono;
	auto now = steady_clock::now();
	if (timeout <= milliseconds::zero())
		return now;
	if (duration_cast<milliseconds>(steady_clock::time_point::max() - now) <= timeout)
		return steady_clock::time_point::max();
	return now + timeout;
}

} // namespace multiedge::detail
