// mectl: command-line control of multiedge.
//
//   mectl info             what the loaded module is and what it has seen
//   mectl links            the attached links of this namespace
//   mectl peers            the nodes discovery found on them
//   mectl conns            the namespace's connections and their counters
//   mectl stats            the protocol engine's counters
//   mectl counters         links, connections and engine counters in one view
//   mectl attach IFNAME    use an Ethernet device as a link (root)
//   mectl detach IFNAME    stop using it
//   mectl version          the library's version
#include <cstdio>
#include <cstring>
#include <string>

#include "multiedge/multiedge.hpp"

namespace {

using ull = unsigned long long;

void usage(FILE *out)
{
	std::fputs("usage: mectl [--device PATH] <command>\n"
		   "commands:\n"
		   "  info            the module's ABI version, ethertype, this node and its accounting\n"
		   "  links           the links attached in this network namespace\n"
		   "  peers           the nodes discovered on those links\n"
		   "  conns           the connections of this namespace with their counters\n"
		   "  stats           the protocol engine's counters\n"
		   "  counters        links, connections and engine counters in one view\n"
		   "  attach IFNAME   use Ethernet device IFNAME as a link (needs CAP_NET_ADMIN)\n"
		   "  detach IFNAME   stop using IFNAME\n"
		   "  version         show the library version\n",
		   out);
}

int fail(const multiedge::Error &e)
{
	std::fprintf(stderr, "mectl: %s\n", e.message().c_str());
	return 1;
}

int cmd_info(multiedge::Device &dev)
{
	auto info = dev.query();
	if (!info)
		return fail(info.error());
	std::printf("device        %s\n", dev.path().c_str());
	std::printf("abi           %u\n", info->abi_version);
	std::printf("features      0x%x\n", info->features);
	std::printf("ethertype     0x%04x\n", info->ethertype);
	std::printf("rx_frames     %llu\n", static_cast<ull>(info->rx_frames));
	std::printf("rx_dropped    %llu\n", static_cast<ull>(info->rx_dropped));
	std::printf("pinned_pages  %llu\n", static_cast<ull>(info->pinned_pages));
	std::printf("regions       %llu\n", static_cast<ull>(info->regions));
	if (info->abi_version < 4) {
		std::printf("(a module older than ABI 4 reports no node or data path accounting)\n");
		return 0;
	}
	std::printf("node          %u\n", info->node_id);
	std::printf("incarnation   0x%08x\n", info->incarnation);
	if (info->packet_size)
		std::printf("packet_size   %u\n", info->packet_size);
	else
		std::printf("packet_size   - (no link attached yet)\n");
	std::printf("rx_queued     %llu\n", static_cast<ull>(info->rx_queued));
	std::printf("conns         %llu\n", static_cast<ull>(info->conns));
	std::printf("ops_inflight  %llu\n", static_cast<ull>(info->ops_inflight));
	if (info->abi_version >= 5)
		std::printf("zc_skbs       %llu\n", static_cast<ull>(info->zc_skbs));
	if (info->abi_version >= 6) {
		std::printf("area_pages    %llu\n", static_cast<ull>(info->area_pages));
		std::printf("pool_pages    %llu\n", static_cast<ull>(info->pool_pages));
		std::printf("rx_flipped    %llu\n", static_cast<ull>(info->rx_flipped));
		std::printf("rx_flip_copied %llu\n", static_cast<ull>(info->rx_flip_copied));
		std::printf("tlb_flushes   %llu\n", static_cast<ull>(info->tlb_flushes));
	}
	return 0;
}

// "0,2,3" for the set bits of a link mask, "-" for none.
std::string slots(std::uint32_t mask)
{
	std::string s;
	for (unsigned i = 0; i < 32; i++)
		if (mask & (1u << i))
			s += (s.empty() ? "" : ",") + std::to_string(i);
	return s.empty() ? "-" : s;
}

std::string node_or_dash(std::uint32_t node)
{
	return node ? std::to_string(node) : "-";
}

int cmd_links(multiedge::Device &dev)
{
	auto links = dev.links();
	if (!links)
		return fail(links.error());
	std::printf("%5s %-16s %7s %6s %-5s %-5s %10s %9s %12s %14s\n", "index", "link", "ifindex",
		    "mtu", "state", "alive", "peer", "rate_mbps", "rx_frames", "rx_bytes");
	for (const auto &l : links.value())
		std::printf("%5u %-16s %7u %6u %-5s %-5s %10s %9u %12llu %14llu\n", l.index,
			    l.ifname.c_str(), l.ifindex, l.mtu, l.up ? "up" : "down",
			    l.alive ? "yes" : "no", node_or_dash(l.peer_node).c_str(), l.rate_mbps,
			    static_cast<ull>(l.rx_frames), static_cast<ull>(l.rx_bytes));
	if (links->empty())
		std::printf("(no link attached: mectl attach IFNAME)\n");
	return 0;
}

int cmd_peers(multiedge::Device &dev)
{
	auto peers = dev.peers();
	if (!peers)
		return fail(peers.error());
	std::printf("%10s %-11s %-5s %-16s %-16s\n", "node", "incarnation", "alive", "links",
		    "alive_links");
	for (const auto &p : peers.value())
		std::printf("%10u 0x%08x  %-5s %-16s %-16s\n", p.node_id, p.incarnation,
			    p.alive ? "yes" : "no", slots(p.links).c_str(),
			    slots(p.alive_links).c_str());
	if (peers->empty())
		std::printf("(no peer discovered yet: are links attached on both sides? mectl links)\n");
	return 0;
}

void print_conns(const std::vector<multiedge::ConnectionInfo> &conns)
{
	std::printf("%6s %10s %-11s %-9s %10s %12s %8s %10s %12s %8s %7s %8s\n", "conn", "peer",
		    "state", "flags", "tx_pkts", "tx_bytes", "rtx", "rx_pkts", "rx_bytes", "rx_drop",
		    "errors", "copies");
	for (const auto &c : conns) {
		std::string flags = std::string(c.active ? "A" : "P") + (c.ordered ? "O" : "U");
		std::printf("%6u %10u %-11s %-9s %10llu %12llu %8llu %10llu %12llu %8llu %7llu %8llu\n",
			    c.conn, c.peer, c.state.c_str(), flags.c_str(),
			    static_cast<ull>(c.tx_packets), static_cast<ull>(c.tx_bytes),
			    static_cast<ull>(c.retransmits), static_cast<ull>(c.rx_packets),
			    static_cast<ull>(c.rx_bytes), static_cast<ull>(c.rx_dropped),
			    static_cast<ull>(c.errors), static_cast<ull>(c.copies));
	}
	if (conns.empty())
		std::printf("(no connection in this namespace)\n");
	else
		std::printf("flags: A opened here, P opened by the peer; O ordered, U unordered\n");
}

int cmd_conns(multiedge::Device &dev)
{
	auto conns = dev.connections();
	if (!conns)
		return fail(conns.error());
	print_conns(conns.value());
	return 0;
}

void print_stats(const std::vector<std::pair<std::string, std::uint64_t>> &stats)
{
	for (const auto &[name, value] : stats)
		std::printf("%-14s %llu\n", name.c_str(), static_cast<ull>(value));
}

int cmd_stats(multiedge::Device &dev)
{
	auto stats = dev.stats();
	if (!stats)
		return fail(stats.error());
	print_stats(stats.value());
	return 0;
}

int cmd_counters(multiedge::Device &dev)
{
	auto links = dev.links();
	if (!links)
		return fail(links.error());
	auto conns = dev.connections();
	if (!conns)
		return fail(conns.error());
	auto stats = dev.stats();
	if (!stats)
		return fail(stats.error());

	std::printf("links\n");
	std::printf("%5s %-16s %-5s %10s %12s %14s %12s %14s %9s %9s %9s %12s\n", "index",
		    "link", "alive", "peer", "tx_frames", "tx_bytes", "rx_frames", "rx_bytes",
		    "rx_drop", "tx_err", "rx_copy", "tx_zc");
	for (const auto &l : links.value())
		std::printf("%5u %-16s %-5s %10s %12llu %14llu %12llu %14llu %9llu %9llu %9llu "
			    "%12llu\n",
			    l.index, l.ifname.c_str(), l.alive ? "yes" : "no",
			    node_or_dash(l.peer_node).c_str(), static_cast<ull>(l.tx_frames),
			    static_cast<ull>(l.tx_bytes), static_cast<ull>(l.rx_frames),
			    static_cast<ull>(l.rx_bytes), static_cast<ull>(l.rx_dropped),
			    static_cast<ull>(l.tx_errors), static_cast<ull>(l.rx_copied),
			    static_cast<ull>(l.tx_zc_frames));
	if (links->empty())
		std::printf("(no link attached)\n");
	std::printf("\nconnections\n");
	print_conns(conns.value());
	std::printf("\nengine\n");
	print_stats(stats.value());
	return 0;
}

int cmd_link(multiedge::Device &dev, bool attach, const std::string &ifname)
{
	auto st = attach ? dev.attach_link(ifname) : dev.detach_link(ifname);
	if (!st)
		return fail(st.error());
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	std::string path = multiedge::Device::default_path();
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!std::strcmp(argv[i], "--device")) {
			if (i + 1 >= argc) {
				std::fprintf(stderr, "mectl: --device needs a path\n");
				usage(stderr);
				return 2;
			}
			path = argv[++i];
		} else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			std::fprintf(stderr, "mectl: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc) {
		std::fprintf(stderr, "mectl: no command given\n");
		usage(stderr);
		return 2;
	}
	std::string cmd = argv[i];
	int nargs = argc - i - 1;

	using Handler = int (*)(multiedge::Device &);
	struct Command {
		const char *name;
		Handler run;
	};
	static const Command plain[] = {
		{"info", cmd_info},   {"links", cmd_links}, {"peers", cmd_peers},
		{"conns", cmd_conns}, {"stats", cmd_stats}, {"counters", cmd_counters},
	};
	Handler run = nullptr;
	for (const auto &c : plain)
		if (cmd == c.name)
			run = c.run;
	bool takes_name = cmd == "attach" || cmd == "detach";
	if (!run && !takes_name && cmd != "version") {
		std::fprintf(stderr, "mectl: unknown command '%s'\n", cmd.c_str());
		usage(stderr);
		return 2;
	}
	if (takes_name && nargs != 1) {
		std::fprintf(stderr, "mectl: '%s' takes one interface name%s\n", cmd.c_str(),
			     nargs == 0 ? ", none given" : "");
		return 2;
	}
	if (!takes_name && nargs != 0) {
		std::fprintf(stderr, "mectl: '%s' takes no arguments (got '%s')\n", cmd.c_str(),
			     argv[i + 1]);
		return 2;
	}
	if (cmd == "version") {
		std::printf("%s\n", multiedge::version());
		return 0;
	}

	auto dev = multiedge::Device::open(path);
	if (!dev)
		return fail(dev.error());
	if (run)
		return run(dev.value());
	return cmd_link(dev.value(), cmd == "attach", argv[i + 1]);
}
