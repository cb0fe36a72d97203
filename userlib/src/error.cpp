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

Status check_send_port(const DeviceFile &file, std::uint32_t conn, std::uint16_t port)
{
	const std::string what = "cannot post send_to on connection " + std::to_string(conn);
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
