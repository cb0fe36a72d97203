// Guest tests of the example programs: me_filecopy run as two processes in
// two nodes' namespaces copies files of awkward sizes intact.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.hpp"

using namespace metest;

namespace {

const std::string kFilecopy = std::string(ME_BIN_DIR) + "/me_filecopy";

// Runs me_filecopy `role` `path` in node n's namespace; returns its pid.
pid_t spawn(Cluster &c, int n, const char *role, const std::string &path,
	    const std::string &log)
{
	pid_t pid = ::fork();
	if (pid == 0) {
		Cluster::Enter in(c.ns(n));
		int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (!in.ok() || fd < 0)
			::_exit(120);
		::dup2(fd, 1);
		::dup2(fd, 2);
		::execl(kFilecopy.c_str(), "me_filecopy", role, path.c_str(), nullptr);
		::_exit(121);
	}
	return pid;
}

std::string slurp(const std::string &path)
{
	std::string s;
	int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return s;
	char buf[65536];
	ssize_t n;
	while ((n = ::read(fd, buf, sizeof(buf))) > 0)
		s.append(buf, static_cast<size_t>(n));
	::close(fd);
	return s;
}

int wait_status(pid_t pid)
{
	int st = 0;
	if (::waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

class ExamplesTest : public ClusterTest, public ::testing::WithParamInterface<size_t> {};

} // namespace

TEST_P(ExamplesTest, FilecopyCopiesAFileIntact)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(2));
	const size_t size = GetParam();
	const std::string in = "/tmp/me_fc_in", out = "/tmp/me_fc_out";
	{
		std::string data(size, '\0');
		fill_random(reinterpret_cast<std::uint8_t *>(data.data()), size, size + 1);
		int fd = ::open(in.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(::write(fd, data.data(), size), static_cast<ssize_t>(size));
		::close(fd);
	}
	::unlink(out.c_str());
	pid_t r = spawn(*c_, 1, "recv", out, "/tmp/me_fc_recv.log");
	pid_t s = spawn(*c_, 0, "send", in, "/tmp/me_fc_send.log");
	ASSERT_GT(r, 0);
	ASSERT_GT(s, 0);
	int ss = wait_status(s), rs = wait_status(r);
	EXPECT_EQ(ss, 0) << "sender:\n" << slurp("/tmp/me_fc_send.log");
	EXPECT_EQ(rs, 0) << "receiver:\n" << slurp("/tmp/me_fc_recv.log");
	EXPECT_NE(slurp("/tmp/me_fc_recv.log").find("checksum ok"), std::string::npos);
	std::string a = slurp(in), b = slurp(out);
	EXPECT_EQ(a.size(), b.size());
	EXPECT_TRUE(a == b) << "the copy differs from the original";
}

// Empty, one byte, a chunk (256 KiB) +- 1, more chunks than buffers.
INSTANTIATE_TEST_SUITE_P(Sizes, ExamplesTest,
			 ::testing::Values(0, 1, 262143, 262145, 3u * 1024 * 1024 + 7));
