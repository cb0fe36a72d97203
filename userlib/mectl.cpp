// mectl: command-line control of multiedge.
//
//   mectl info             what the loaded module is and what it has seen
//   mectl links            the attached links of this namespace
//   mectl attach IFNAME    use an Ethernet device as a link (root)
//   mectl detach IFNAME    stop using it
//   mectl version          the library's version
#include <cstdio>
#include <cstring>
#include <string>

#include "multiedge/multiedge.hpp"

namespace {

void usage(FILE *out)
{
	std::fputs("usage: mectl [--device PATH] <command>\n"
		   "commands:\n"
		   "  info            show the module's ABI version, ethertype and counters\n"
		   "  links           list the links attached in this network namespace\n"
		   "  attach IFNAME   use Ethernet device IFNAME as a link (needs CAP_NET_ADMIN)\n"
		   "  detach IFNAME   stop using IFNAME\n"
		   "  version         show the library version\n",
		   out);
}

int cmd_info(const std::string &path)
{
	auto dev = multiedge::Device::open(path);
	if (!dev) {
		std::fprintf(stderr, "mectl: %s\n", dev.error().message().c_str());
		return 1;
	}
	auto info = dev->query();
	if (!info) {
		std::fprintf(stderr, "mectl: %s\n", info.error().message().c_str());
		return 1;
	}
	std::printf("device      %s\n", dev->path().c_str());
	std::printf("abi         %u\n", info->abi_version);
	std::printf("features    0x%x\n", info->features);
	std::printf("ethertype   0x%04x\n", info->ethertype);
	std::printf("rx_frames   %llu\n", static_cast<unsigned long long>(info->rx_frames));
	std::printf("rx_dropped  %llu\n", static_cast<unsigned long long>(info->rx_dropped));
	return 0;
}

int cmd_links(const std::string &path)
{
	auto dev = multiedge::Device::open(path);
	if (!dev) {
		std::fprintf(stderr, "mectl: %s\n", dev.error().message().c_str());
		return 1;
	}
	auto links = dev->links();
	if (!links) {
		std::fprintf(stderr, "mectl: %s\n", links.error().message().c_str());
		return 1;
	}
	std::printf("%-16s %7s %6s %-5s %12s %14s\n", "link", "ifindex", "mtu", "state",
		    "rx_frames", "rx_bytes");
	for (const auto &l : links.value())
		std::printf("%-16s %7u %6u %-5s %12llu %14llu\n", l.ifname.c_str(), l.ifindex,
			    l.mtu, l.up ? "up" : "down",
			    static_cast<unsigned long long>(l.rx_frames),
			    static_cast<unsigned long long>(l.rx_bytes));
	return 0;
}

int cmd_link(const std::string &path, bool attach, const std::string &ifname)
{
	auto dev = multiedge::Device::open(path);
	if (!dev) {
		std::fprintf(stderr, "mectl: %s\n", dev.error().message().c_str());
		return 1;
	}
	auto st = attach ? dev->attach_link(ifname) : dev->detach_link(ifname);
	if (!st) {
		std::fprintf(stderr, "mectl: %s\n", st.error().message().c_str());
		return 1;
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	std::string path = multiedge::Device::default_path();
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!std::strcmp(argv[i], "--device") && i + 1 < argc) {
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
		usage(stderr);
		return 2;
	}
	std::string cmd = argv[i];
	int nargs = argc - i - 1;
	bool takes_name = cmd == "attach" || cmd == "detach";
	if (nargs != (takes_name ? 1 : 0)) {
		std::fprintf(stderr, "mectl: '%s' takes %s\n", cmd.c_str(),
			     takes_name ? "one interface name" : "no arguments");
		return 2;
	}
	if (cmd == "info")
		return cmd_info(path);
	if (cmd == "links")
		return cmd_links(path);
	if (takes_name)
		return cmd_link(path, cmd == "attach", argv[i + 1]);
	if (cmd == "version") {
		std::printf("%s\n", multiedge::version());
		return 0;
	}
	std::fprintf(stderr, "mectl: unknown command '%s'\n", cmd.c_str());
	usage(stderr);
	return 2;
}
