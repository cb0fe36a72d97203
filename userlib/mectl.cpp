// mectl: command-line control of multiedge.
//
//   mectl info      what the loaded module is and what it has seen
//   mectl version   the library's version
#include <cstdio>
#include <cstring>
#include <string>

#include "multiedge/multiedge.hpp"

namespace {

void usage(FILE *out)
{
	std::fputs("usage: mectl [--device PATH] <command>\n"
		   "commands:\n"
		   "  info      show the module's ABI version, ethertype and counters\n"
		   "  version   show the library version\n",
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
	if (i + 1 < argc) {
		std::fprintf(stderr, "mectl: '%s' takes no arguments\n", cmd.c_str());
		return 2;
	}
	if (cmd == "info")
		return cmd_info(path);
	if (cmd == "version") {
		std::printf("%s\n", multiedge::version());
		return 0;
	}
	std::fprintf(stderr, "mectl: unknown command '%s'\n", cmd.c_str());
	usage(stderr);
	return 2;
}
