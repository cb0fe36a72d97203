// Guest tests: the kernel log as part of every verdict.
//
// A KmsgReader reads /dev/kmsg from a chosen point on; kernel_trouble() picks
// out the records that make a test fail (WARNING, BUG, Oops, leak).  The
// GoogleTest listener in guest_main.cpp marks the log before each test and
// fails the test if trouble appears after the mark.
#pragma once

#include <string>
#include <vector>

namespace metest {

// Prefix of the marker records tests write; never counted as trouble (test
// names may well contain "Leak").
inline constexpr const char *kMarkPrefix = "multiedge-test: ";

// The records among `records` (message text only) that show a kernel problem.
std::vector<std::string> kernel_trouble(const std::vector<std::string> &records);

class KmsgReader {
public:
	KmsgReader();	// positioned at the end of the log
	~KmsgReader();
	KmsgReader(const KmsgReader &) = delete;
	KmsgReader &operator=(const KmsgReader &) = delete;

	bool ok() const { return fd_ >= 0; }
	// Forget everything logged so far.
	void skip_to_end();
	// Message text of every record logged since construction or the last
	// call to read_new()/skip_to_end().
	std::vector<std::string> read_new();

private:
	int fd_ = -1;
};

// Writes "multiedge-test: <text>" into the kernel log.
void kmsg_mark(const std::string &text);
// Writes `line` into the kernel log as it is.
void kmsg_write(const std::string &line);

} // namespace metest
