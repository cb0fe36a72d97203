// Entries of libfabric's operation tables that the provider does not
// offer: each answers -FI_ENOSYS (or NULL), never a null pointer that
// libfabric's inline wrappers would call.
#pragma once

#include <type_traits>

#include <rdma/fi_errno.h>

namespace mefi {

template <typename F> struct NoSys;

template <typename R, typename... A> struct NoSys<R (*)(A...)> {
	static R fn(A...)
	{
		if constexpr (std::is_pointer_v<R>)
			return nullptr;
		else
			return static_cast<R>(-FI_ENOSYS);
	}
};

} // namespace mefi

// ops.member = the ENOSYS function of its type.
#define MEFI_NOSYS(ops, member) ((ops).member = ::mefi::NoSys<decltype((ops).member)>::fn)
