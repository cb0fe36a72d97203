// libmultiedge: building errors from errno values.
#include "multiedge/error.hpp"

#include <cstring>

#include "internal.hpp"

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
