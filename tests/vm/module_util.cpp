// Guest tests: loading and unloading multiedge.ko.
#include "module_util.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <linux/if_packet.h>
#include <map>
#include <mutex>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace metest {

std::string module_path()
{
	if (const char *p = std::getenv("ME_KO"))
		return p;
	return ME_KO_DEFAULT; // set by tests/vm/vm.mk
}

int load_module(const std::string &params)
{
	// ME_MODULE_PARAMS: parameters added to every load (experiments).
	std::string all = params;
	if (const char *extra = std::getenv("ME_MODULE_PARAMS"); extra && *extra)
		all += (all.empty() ? "" : " ") + std::string(extra);
	int fd = ::open(module_path().c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int ret = static_cast<int>(::syscall(SYS_finit_module, fd, all.c_str(), 0));
	int err = ret ? errno : 0;
	::close(fd);
	return err;
}

int unload_module()
{
	if (::syscall(SYS_delete_module, "multiedge", O_NONBLOCK) != 0)
		return errno;
	return 0;
}

bool module_loaded()
{
	struct stat st;
	return ::stat("/sys/module/multiedge", &st) == 0;
}

int sh(const std::string &cmd)
{
	int st = std::system(cmd.c_str());
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int modprobe(const std::string &name)
{
	static std::mutex lock;
	static std::map<std::string, int> done;
	std::lock_guard<std::mutex> hold(lock);
	auto it = done.find(name);
	if (it == done.end())
		it = done.emplace(name, sh("modprobe " + name)).first;
	return it->second;
}

bool send_frames(const char *ifname, unsigned ethertype, int count)
{
	int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	sockaddr_ll sll{};
	sll.sll_family = AF_PACKET;
	sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname));
	sll.sll_halen = ETH_ALEN;
	std::memset(sll.sll_addr, 0xff, ETH_ALEN);

	unsigned char frame[64] = {};
	std::memset(frame, 0xff, ETH_ALEN); // broadcast destination
	frame[6] = 0x02;		    // locally administered source
	frame[12] = static_cast<unsigned char>(ethertype >> 8);
	frame[13] = static_cast<unsigned char>(ethertype);
	bool ok = sll.sll_ifindex != 0;
	for (int i = 0; ok && i < count; i++)
		ok = ::sendto(fd, frame, sizeof(frame), 0, reinterpret_cast<sockaddr *>(&sll),
			      sizeof(sll)) == static_cast<ssize_t>(sizeof(frame));
	::close(fd);
	return ok;
}

std::string read_file(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

} // namespace metest
