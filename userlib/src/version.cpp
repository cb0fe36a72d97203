// libmultiedge: version string.
#include "multiedge/version.hpp"

#define ME_STR2(x) #x
#define ME_STR(x) ME_STR2(x)

namespace multiedge {

const char *version() noexcept
{
	return ME_STR(MULTIEDGE_VERSION_MAJOR) "." ME_STR(MULTIEDGE_VERSION_MINOR) "." ME_STR(
		MULTIEDGE_VERSION_PATCH);
}

} // namespace multiedge
