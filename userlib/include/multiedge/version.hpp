// libmultiedge: version of the library and of the kernel ABI it speaks.
#pragma once

#define MULTIEDGE_VERSION_MAJOR 0
#define MULTIEDGE_VERSION_MINOR 3
#define MULTIEDGE_VERSION_PATCH 1

namespace multiedge {
// The library's version as "major.minor.patch".
const char *version() noexcept;
} // namespace multiedge
