// me_bench --numa: bind to one node with libnuma.
#include <numa.h>

#include <cerrno>

#include "options.hpp"

namespace bench {

me::Status bind_numa(const Options &opts)
{
	if (opts.numa < 0)
		return {};
	if (numa_available() < 0)
		return failure("--numa " + std::to_string(opts.numa) +
			       ": this machine (kernel) offers no NUMA support");
	if (opts.numa > numa_max_node() || !numa_bitmask_isbitset(numa_all_nodes_ptr,
								  static_cast<unsigned>(opts.numa)))
		return failure("--numa " + std::to_string(opts.numa) +
			       ": no such node (nodes 0-" + std::to_string(numa_max_node()) + ")");
	// Threads created later inherit both the CPU affinity and the memory
	// policy; buffers are mapped with MAP_POPULATE after this, so they
	// land on the node.
	if (numa_run_on_node(opts.numa) != 0)
		return me::Error::from_errno(errno, "cannot run on NUMA node " +
							    std::to_string(opts.numa));
	struct bitmask *nodes = numa_allocate_nodemask();
	numa_bitmask_setbit(nodes, static_cast<unsigned>(opts.numa));
	numa_set_membind(nodes);
	numa_free_nodemask(nodes);
	return {};
}

} // namespace bench
