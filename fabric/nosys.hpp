// Entries of libfabric's operation tables that the provider does not
// offer: each answers -FI_ENOSYS (or NULL), never a null pointer that
// libfabric's inline wrappers would call.
#pragma once

#include <cstdint>
#include <type_traits>

#include <rdma/fabric.h>
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

// The generic fid operations of an object: `close`, and `control` and
// `bind` where it has them; the rest answer -FI_ENOSYS.
inline fi_ops fid_ops(int (*close)(fid *), int (*control)(fid *, int, void *) = nullptr,
		      int (*bind)(fid *, fid *, std::uint64_t) = nullptr)
{
	fi_ops o{};
	o.size = sizeof(fi_ops);
	o.close = close;
	o.bind = bind ? bind : NoSys<decltype(o.bind)>::fn;
	o.control = control ? control : NoSys<decltype(o.control)>::fn;
	o.ops_open = NoSys<decltype(o.ops_open)>::fn;
	o.tostr = NoSys<decltype(o.tostr)>::fn;
	o.ops_set = NoSys<decltype(o.ops_set)>::fn;
	return o;
}

} // namespace mefi

// ops.member = the ENOSYS function of its type.
#define MEFI_NOSYS(ops, member) ((ops).member = ::mefi::NoSys<decltype((ops).member)>::fn)
