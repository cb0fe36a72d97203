// libmultiedge: building errors from errno values.
#include "multiedge/error.hpp"

#include <cstring>

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
