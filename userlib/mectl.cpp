// mectl: command-line control of multiedge.
//
//   mectl info             what the loaded module is and what it has seen
//   mectl links            the attached links of this namespace, each with
//                          the peers it reaches
//   mectl peers            the nodes discovery found, with the links to each
//   mectl neighbours       every (link, peer) pair: address, state, RTT, counters
//   mectl conns            the namespace's connections and their counters
//   mectl stats            the protocol engine's counters
//   mectl counters         links, connections and engine counters in one view
//   mectl attach IFNAME    use an Ethernet device as a link (root)
//   mectl detach IFNAME    stop using it
//   mectl up [--config FILE] [--wait S]
//                          attach every NIC the boot configuration lists
//                          (default /etc/multiedge/links.conf; the systemd
//                          unit multiedge.service runs this at boot)
//   mectl down [--config FILE]
//                          detach them
//   mectl version          the library's version
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "multiedge/multiedge.hpp"
#include "uapi/multiedge.h"

namespace {

#ifndef ME_LINKS_CONF
#define ME_LINKS_CONF "/etc/multiedge/links.conf"
#endif

using ull = unsigned long long;

void usage(FILE *out)
{
	std::fputs("usage: mectl [--device PATH] <command>\n"
		   "commands:\n"
		   "  info            the module's ABI version, ethertype, this node and its accounting\n"
		   "  links           the links attached in this network namespace and the peers\n"
		   "                  each reaches\n"
		   "  peers           the nodes discovered on those links, with the links to each\n"
		   "  neighbours      every (link, peer) pair: address, state, RTT and counters\n"
		   "                  (also: nbrs)\n"
		   "  conns           the connections of this namespace with their counters\n"
		   "  stats           the protocol engine's counters\n"
		   "  counters        links, connections and engine counters in one view\n"
		   "  attach IFNAME   use Ethernet device IFNAME as a link (needs CAP_NET_ADMIN)\n"
		   "  detach IFNAME   stop using IFNAME\n"
		   "  up [--config FILE] [--wait S]\n"
		   "                  attach every NIC FILE lists (default " ME_LINKS_CONF "),\n"
		   "                  waiting up to S seconds (default 0) for each to appear;\n"
		   "                  (one already attached is left as it is)\n"
		   "  down [--config FILE]\n"
		   "                  detach every NIC FILE lists that is attached\n"
		   "  version         show the library version\n",
		   out);
}

int fail(const multiedge::Error &e)
{
	std::fprintf(stderr, "mectl: %s\n", e.message().c_str());
	return 1;
}

// " (uring_cmd rx_area ...)": the ME_FEATURE_* bits by name, unknown ones
// as bit numbers.
std::string feature_names(std::uint32_t features)
{
	static const std::pair<std::uint32_t, const char *> names[] = {
		{ME_FEATURE_URING_CMD, "uring_cmd"}, {ME_FEATURE_RX_AREA, "rx_area"},
		{ME_FEATURE_RECV_POLL, "recv_poll"}, {ME_FEATURE_PORTS, "ports"},
		{ME_FEATURE_POST_MORE, "post_more"}, {ME_FEATURE_SHARED, "shared"},
		{ME_FEATURE_ATOMIC, "atomic"},
		{ME_FEATURE_LOOPBACK, "loopback"},
		{ME_FEATURE_SEND_LARGE, "send_large"},
		{ME_FEATURE_ACK_NOW, "ack_now"},
	};
	std::string out;
	for (const auto &[bit, name] : names)
		if (features & bit) {
			out += out.empty() ? " (" : " ";
			out += name;
			features &= ~bit;
		}
	for (unsigned i = 0; i < 32; i++)
		if (features & (1u << i)) {
			out += out.empty() ? " (" : " ";
			out += "bit" + std::to_string(i);
		}
	return out.empty() ? out : out + ")";
}

int cmd_info(multiedge::Device &dev)
{
	auto info = dev.query();
	if (!info)
		return fail(info.error());
	std::printf("device        %s\n", dev.path().c_str());
	std::printf("abi           %u\n", info->abi_version);
	std::printf("features      0x%x%s\n", info->features, feature_names(info->features).c_str());
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
	if (info->abi_version >= 22)
		std::printf("staged_pages  %llu\n", static_cast<ull>(info->staged_pages));
	if (info->abi_version >= 6) {
		std::printf("area_pages    %llu\n", static_cast<ull>(info->area_pages));
		std::printf("pool_pages    %llu\n", static_cast<ull>(info->pool_pages));
		std::printf("rx_flipped    %llu\n", static_cast<ull>(info->rx_flipped));
		std::printf("rx_flip_copied %llu\n", static_cast<ull>(info->rx_flip_copied));
		std::printf("tlb_flushes   %llu\n", static_cast<ull>(info->tlb_flushes));
	}
	if (info->abi_version >= 23)
		std::printf("trains_segmented %llu\n", static_cast<ull>(info->trains_segmented));
	if (info->abi_version >= 28) {
		std::printf("heads_reused  %llu\n", static_cast<ull>(info->heads_reused));
		std::printf("heads_fresh   %llu\n", static_cast<ull>(info->heads_fresh));
	}
	return 0;
}

std::string mac_string(const std::array<std::uint8_t, 6> &mac)
{
	char buf[18];
	std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
		      mac[3], mac[4], mac[5]);
	return buf;
}

// "alive", or which direction is missing: "rx-only" (we hear it, it does not
// hear us), "tx-only" (it hears us, we no longer hear it), "silent".
const char *nbr_state(const multiedge::NeighbourInfo &n)
{
	if (n.alive)
		return "alive";
	if (n.rx && !n.heard)
		return "rx-only";
	if (n.heard && !n.rx)
		return "tx-only";
	return n.rx ? "down" : "silent";
}

std::string rtt_string(std::uint32_t rtt_us)
{
	return rtt_us ? std::to_string(rtt_us) : "-";
}

void print_nbr_header(const char *indent)
{
	std::printf("%s%10s %-17s %-7s %8s %8s %8s %8s %8s %8s %9s %10s %10s %12s %12s %9s %8s\n",
		    indent, "node", "mac", "state", "rtt_us", "data_rtt", "delay", "base", "noise",
		    "target", "rate_mbps", "cwnd",
		    "inflight", "tx_pkts", "rx_pkts", "lost", "rx_age");
}

void print_nbr(const char *indent, const multiedge::NeighbourInfo &n)
{
	std::printf("%s%10u %-17s %-7s %8s %8s %8s %8s %8s %8s %9u %10u %10u %12llu %12llu %9llu %6ums\n",
		    indent, n.node_id, mac_string(n.mac).c_str(), nbr_state(n),
		    rtt_string(n.rtt_us).c_str(), rtt_string(n.data_rtt_us).c_str(),
		    rtt_string(n.data_delay_us).c_str(), rtt_string(n.base_us).c_str(),
		    rtt_string(n.noise_us).c_str(), rtt_string(n.target_us).c_str(), n.rate_mbps,
		    n.cwnd, n.inflight, static_cast<ull>(n.tx_pkts),
		    static_cast<ull>(n.rx_pkts), static_cast<ull>(n.lost_pkts), n.rx_age_ms);
}

int cmd_links(multiedge::Device &dev)
{
	auto links = dev.links();
	if (!links)
		return fail(links.error());
	auto nbrs = dev.neighbours();
	if (!nbrs)
		return fail(nbrs.error());
	for (const auto &l : links.value()) {
		std::printf("link %u: %s (ifindex %u, mtu %u, %s), %u peer%s, %u alive, %u Mbit/s, "
			    "rx %llu frames %llu bytes, tx %llu frames %llu bytes\n",
			    l.index, l.ifname.c_str(), l.ifindex, l.mtu, l.up ? "up" : "down",
			    l.nbrs, l.nbrs == 1 ? "" : "s", l.nbrs_alive, l.rate_mbps,
			    static_cast<ull>(l.rx_frames), static_cast<ull>(l.rx_bytes),
			    static_cast<ull>(l.tx_frames), static_cast<ull>(l.tx_bytes));
		bool any = false;
		for (const auto &n : nbrs.value()) {
			if (n.link != l.index)
				continue;
			if (!any)
				print_nbr_header("    ");
			any = true;
			print_nbr("    ", n);
		}
		if (!any)
			std::printf("    (no peer heard on it yet)\n");
	}
	if (links->empty())
		std::printf("(no link attached: mectl attach IFNAME)\n");
	return 0;
}

using LinkNames = std::map<std::uint32_t, std::string>;

// The attached links' names by slot; false (after saying why) on error.
bool link_names_of(multiedge::Device &dev, LinkNames &names)
{
	auto links = dev.links();
	if (!links) {
		fail(links.error());
		return false;
	}
	for (const auto &l : links.value())
		names[l.index] = l.ifname;
	return true;
}

// A link slot's name, or its number when no attached link has it.
std::string link_name(const LinkNames &names, std::uint32_t slot)
{
	auto it = names.find(slot);
	return it != names.end() ? it->second : std::to_string(slot);
}

// "eth1,eth2" for the set bits of a link mask, by the links' names.
std::string link_names(std::uint32_t mask, const LinkNames &names)
{
	std::string s;
	for (unsigned i = 0; i < 32; i++)
		if (mask & (1u << i))
			s += (s.empty() ? "" : ",") + link_name(names, i);
	return s.empty() ? "-" : s;
}

int cmd_peers(multiedge::Device &dev)
{
	auto peers = dev.peers();
	if (!peers)
		return fail(peers.error());
	LinkNames names;
	if (!link_names_of(dev, names))
		return 1;
	std::printf("%10s %-16s %-11s %-5s %5s %-24s %-24s\n", "node", "name", "incarnation",
		    "alive", "conns", "links", "alive_links");
	for (const auto &p : peers.value())
		std::printf("%10u %-16s 0x%08x  %-5s %5u %-24s %-24s\n", p.node_id,
			    p.name.empty() ? "-" : p.name.c_str(), p.incarnation,
			    p.alive ? "yes" : "no", p.conns, link_names(p.links, names).c_str(),
			    link_names(p.alive_links, names).c_str());
	if (peers->empty())
		std::printf("(no peer discovered yet: are links attached on both sides? mectl links)\n");
	return 0;
}

int cmd_neighbours(multiedge::Device &dev)
{
	auto nbrs = dev.neighbours();
	if (!nbrs)
		return fail(nbrs.error());
	LinkNames names;
	if (!link_names_of(dev, names))
		return 1;
	std::printf("%-16s ", "link");
	print_nbr_header("");
	for (const auto &n : nbrs.value()) {
		std::printf("%-16s ", link_name(names, n.link).c_str());
		print_nbr("", n);
	}
	if (nbrs->empty())
		std::printf("(no neighbour yet: are links attached on both sides? mectl links)\n");
	return 0;
}

void print_conns(const std::vector<multiedge::ConnectionInfo> &conns)
{
	std::printf("%6s %10s %5s %-11s %-9s %10s %12s %8s %10s %12s %8s %7s %8s\n", "conn",
		    "peer", "port", "state", "flags", "tx_pkts", "tx_bytes", "rtx", "rx_pkts",
		    "rx_bytes", "rx_drop", "errors", "copies");
	for (const auto &c : conns) {
		std::string flags = std::string(c.active ? "A" : "P") + (c.ordered ? "O" : "U") +
				    (c.shared ? " shared" : "");
		std::string port = c.port ? std::to_string(c.port) : "-";
		std::printf("%6u %10u %5s %-11s %-9s %10llu %12llu %8llu %10llu %12llu %8llu %7llu "
			    "%8llu\n",
			    c.conn, c.peer, port.c_str(), c.state.c_str(), flags.c_str(),
			    static_cast<ull>(c.tx_packets), static_cast<ull>(c.tx_bytes),
			    static_cast<ull>(c.retransmits), static_cast<ull>(c.rx_packets),
			    static_cast<ull>(c.rx_bytes), static_cast<ull>(c.rx_dropped),
			    static_cast<ull>(c.errors), static_cast<ull>(c.copies));
	}
	if (conns.empty())
		std::printf("(no connection in this namespace)\n");
	else
		std::printf("port: the passive side's endpoint (- any); flags: A opened here, P "
			    "opened by the peer; O ordered, U unordered; shared: the node pair's "
			    "connection every open device may use\n");
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
	std::printf("%5s %-16s %-5s %10s %12s %14s %12s %14s %9s %9s %9s %12s %12s %10s %10s\n",
		    "index", "link", "alive", "peers", "tx_frames", "tx_bytes", "rx_frames",
		    "rx_bytes", "rx_drop", "tx_err", "rx_copy", "tx_zc", "rx_direct", "tx_trains",
		    "rx_trains");
	for (const auto &l : links.value())
		std::printf("%5u %-16s %-5s %10s %12llu %14llu %12llu %14llu %9llu %9llu %9llu "
			    "%12llu %12llu %10llu %10llu\n",
			    l.index, l.ifname.c_str(), l.alive ? "yes" : "no",
			    (std::to_string(l.nbrs_alive) + "/" + std::to_string(l.nbrs)).c_str(),
			    static_cast<ull>(l.tx_frames),
			    static_cast<ull>(l.tx_bytes), static_cast<ull>(l.rx_frames),
			    static_cast<ull>(l.rx_bytes), static_cast<ull>(l.rx_dropped),
			    static_cast<ull>(l.tx_errors), static_cast<ull>(l.rx_copied),
			    static_cast<ull>(l.tx_zc_frames), static_cast<ull>(l.rx_direct),
			    static_cast<ull>(l.tx_trains), static_cast<ull>(l.rx_trains));
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

// The boot configuration: one interface name per line; '#' starts a
// comment.  Returns false (after saying why) if FILE cannot be read or
// names something that cannot be an interface.
bool read_links_conf(const std::string &file, std::vector<std::string> &names)
{
	std::ifstream in(file);
	if (!in) {
		std::fprintf(stderr, "mectl: cannot read %s: %s\n", file.c_str(), std::strerror(errno));
		return false;
	}
	std::string line;
	for (int lineno = 1; std::getline(in, line); lineno++) {
		line = line.substr(0, line.find('#'));
		const char *ws = " \t\r";
		auto b = line.find_first_not_of(ws);
		if (b == std::string::npos)
			continue;
		auto e = line.find_last_not_of(ws);
		std::string name = line.substr(b, e - b + 1);
		// IFNAMSIZ is 16 with the terminating NUL.
		if (name.size() > 15 || name == "." || name == ".." ||
		    name.find_first_of(" \t/:") != std::string::npos) {
			std::fprintf(stderr, "mectl: %s:%d: '%s' is not an interface name\n",
				     file.c_str(), lineno, name.c_str());
			return false;
		}
		names.push_back(name);
	}
	return true;
}

// A NIC renamed or probed late at boot may appear after us: wait for it.
bool wait_for_netdev(const std::string &name, std::chrono::steady_clock::time_point deadline)
{
	std::string path = "/sys/class/net/" + name;
	for (;;) {
		if (::access(path.c_str(), F_OK) == 0)
			return true;
		if (std::chrono::steady_clock::now() >= deadline)
			return false;
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
}

int cmd_up_down(const std::string &path, bool up, const std::string &conf, int wait_s)
{
	std::vector<std::string> names;
	if (!read_links_conf(conf, names))
		return 1;
	auto dev = multiedge::Device::open(path);
	if (!dev)
		return fail(dev.error());
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
	int failed = 0;
	for (const auto &name : names) {
		if (up && !wait_for_netdev(name, deadline)) {
			std::fprintf(stderr, "mectl: %s: no such interface%s\n", name.c_str(),
				     wait_s ? " (waited for it)" : "");
			failed++;
			continue;
		}
		auto st = up ? dev->attach_link(name) : dev->detach_link(name);
		int err = st ? 0 : st.error().code().value();
		if (up && err == EEXIST) {
			std::printf("%s: already attached\n", name.c_str());
		} else if (!up && err == ENOENT) {
			std::printf("%s: not attached\n", name.c_str());
		} else if (err) {
			fail(st.error());
			failed++;
		} else {
			std::printf("%s: %s\n", name.c_str(), up ? "attached" : "detached");
		}
	}
	if (names.empty())
		std::printf("(%s lists no interface)\n", conf.c_str());
	return failed ? 1 : 0;
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

	if (cmd == "up" || cmd == "down") {
		std::string conf = ME_LINKS_CONF;
		int wait_s = 0;
		for (int j = i + 1; j < argc; j++) {
			std::string opt = argv[j];
			if ((opt == "--config" || (cmd == "up" && opt == "--wait")) && j + 1 < argc) {
				std::string val = argv[++j];
				if (opt == "--config") {
					conf = val;
				} else {
					char *end;
					long v = std::strtol(val.c_str(), &end, 10);
					if (val.empty() || *end || v < 0 || v > 3600) {
						std::fprintf(stderr, "mectl: --wait takes 0..3600 seconds, not '%s'\n",
							     val.c_str());
						return 2;
					}
					wait_s = static_cast<int>(v);
				}
			} else {
				std::fprintf(stderr, "mectl: %s: unexpected '%s'\n", cmd.c_str(), opt.c_str());
				usage(stderr);
				return 2;
			}
		}
		return cmd_up_down(path, cmd == "up", conf, wait_s);
	}

	using Handler = int (*)(multiedge::Device &);
	struct Command {
		const char *name;
		Handler run;
	};
	static const Command plain[] = {
		{"info", cmd_info},   {"links", cmd_links}, {"peers", cmd_peers},
		{"conns", cmd_conns}, {"stats", cmd_stats}, {"counters", cmd_counters},
		{"neighbours", cmd_neighbours}, {"nbrs", cmd_neighbours},
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
