// Guest tests: reading and scanning the kernel log.
#include "kmsg.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace metest {

std::vector<std::string> kernel_trouble(const std::vector<std::string> &records)
{
	static const char *const patterns[] = {"WARNING", "BUG", "Oops", "leak"};
	std::vector<std::string> bad;

	for (const auto &r : records) {
		if (r.rfind(kMarkPrefix, 0) == 0)
			continue;
		for (const char *p : patterns) {
			if (r.find(p) != std::string::npos) {
				bad.push_back(r);
				break;
			}
		}
	}
	return bad;
}

KmsgReader::KmsgReader()
{
	fd_ = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	skip_to_end();
}

KmsgReader::~KmsgReader()
{
	if (fd_ >= 0)
		::close(fd_);
}

void KmsgReader::skip_to_end()
{
	if (fd_ >= 0)
		::lseek(fd_, 0, SEEK_END);
}

std::vector<std::string> KmsgReader::read_new()
{
	std::vector<std::string> out;
	char buf[8192];

	if (fd_ < 0)
		return out;
	for (;;) {
		ssize_t n = ::read(fd_, buf, sizeof(buf) - 1);
		if (n < 0) {
			if (errno == EPIPE) // records overwritten: go on
				continue;
			if (errno == EINTR)
				continue;
			break; // EAGAIN: no more records
		}
		// "prio,seq,usec,flags;message\n[ continuation lines]"
		std::string rec(buf, static_cast<size_t>(n));
		auto semi = rec.find(';');
		auto nl = rec.find('\n');
		if (semi == std::string::npos)
			continue;
		out.push_back(rec.substr(semi + 1, nl == std::string::npos ? std::string::npos
									    : nl - semi - 1));
	}
	return out;
}

void kmsg_write(const std::string &line)
{
	int fd = ::open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	std::string rec = line + "\n";
	ssize_t n = ::write(fd, rec.data(), rec.size());
	(void)n;
	::close(fd);
}

void kmsg_mark(const std::string &text)
{
	kmsg_write(std::string(kMarkPrefix) + text);
}

} // namespace metest
