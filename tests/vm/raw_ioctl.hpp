// Guest tests: the module's ioctls called raw, on a Device's fd, for the
// checks the library would not let through (bad sizes, fields, ids).
#pragma once

#include <cerrno>
#include <cstdint>
#include <sys/ioctl.h>

#include "uapi/multiedge.h"

namespace metest {

// 0 or the errno of ioctl(fd, cmd, arg).
template <typename T>
int io(int fd, unsigned long cmd, T *arg)
{
	errno = 0;
	int r = ::ioctl(fd, cmd, arg);
	if (r < 0)
		return errno;
	return r == 0 ? 0 : -r; // a positive return is a bug too: show it
}

// A post of `len` bytes from local `region` at `off` on `conn` (cookie 77).
inline me_post post_of(std::uint32_t opcode, std::uint32_t conn, std::uint32_t region,
		       std::uint64_t off, std::uint32_t len)
{
	me_post p{};
	p.size = sizeof(p);
	p.opcode = opcode;
	p.conn = conn;
	p.local_region = region;
	p.local_off = off;
	p.len = len;
	p.cookie = 77;
	return p;
}

} // namespace metest
