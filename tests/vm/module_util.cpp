// Guest tests: loading and unloading multiedge.ko.
#include "module_util.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
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
	int fd = ::open(module_path().c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int ret = static_cast<int>(::syscall(SYS_finit_module, fd, params.c_str(), 0));
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

std::string read_file(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

} // namespace metest
