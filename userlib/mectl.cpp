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
	std::printf("device      %s\n", dev.path().c_str());
	std::printf("abi         %u\n", info->abi_version);
	std::printf("features    0x%x\n", info->features);
	std::printf("ethertype   0x%04x\n", info->ethertype);
	std::printf("rx_frames   %llu\n", static_cast<unsigned long long>(info->rx_frames));
	std::printf("rx_dropped  %llu\n", static_cast<unsigned long long>(info->rx_dropped));
	return 0;
}

int cmd_links(multiedge::Device &dev)
{
	auto links = dev.links();
	if (!links)
		return fail(links.error());
	std::printf("%-16s %7s %6s %-5s %12s %14s\n", "link", "ifindex", "mtu", "state",
		    "rx_frames", "rx_bytes");
	for (const auto &l : links.value())
		std::printf("%-16s %7u %6u %-5s %12llu %14llu\n", l.ifname.c_str(), l.ifindex,
			    l.mtu, l.up ? "up" : "down",
			    static_cast<unsigned long long>(l.rx_frames),
			    static_cast<unsigned long long>(l.rx_bytes));
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
	if (cmd == "version") {
		std::printf("%s\n", multiedge::version());
		return 0;
	}
	if (cmd != "info" && cmd != "links" && !takes_name) {
		std::fprintf(stderr, "mectl: unknown command '%s'\n", cmd.c_str());
		usage(stderr);
		return 2;
	}

	auto dev = multiedge::Device::open(path);
	if (!dev)
		return fail(dev.error());
	if (cmd == "info")
		return cmd_info(dev.value());
	if (cmd == "links")
		return cmd_links(dev.value());
	return cmd_link(dev.value(), cmd == "attach", argv[i + 1]);
}
