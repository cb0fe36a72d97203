// main() of every guest test binary: GoogleTest plus the kernel-log verdict.
//
// Before each test the log is marked; after it, any WARNING, BUG, Oops or
// leak record logged in between fails the test, whatever the test itself
// concluded.
#include <gtest/gtest.h>

#include <string>

#include "kmsg.hpp"

namespace {

class KmsgVerdict : public ::testing::EmptyTestEventListener {
public:
	void OnTestStart(const ::testing::TestInfo &t) override
	{
		reader_.skip_to_end();
		metest::kmsg_mark(std::string("start ") + t.test_suite_name() + "." + t.name());
	}

	void OnTestEnd(const ::testing::TestInfo &t) override
	{
		auto records = reader_.read_new();
		auto bad = metest::kernel_trouble(records);
		if (!bad.empty()) {
			std::string all;
			for (const auto &r : records)
				all += "  | " + r + "\n";
			ADD_FAILURE() << "the kernel log shows trouble during " << t.name()
				      << ":\n" << all;
		}
		metest::kmsg_mark(std::string("end ") + t.test_suite_name() + "." + t.name());
	}

private:
	metest::KmsgReader reader_;
};

} // namespace

// Never run by default: tests/vm/run-suite runs it alone and expects it to
// FAIL, proving the kernel-log verdict above catches a WARNING.
TEST(KmsgVerdict, DISABLED_SelfCheckFailsOnWarning)
{
	metest::kmsg_write("multiedge-selfcheck: WARNING: injected by the harness self-check");
}

int main(int argc, char **argv)
{
	::testing::InitGoogleTest(&argc, argv);
	metest::KmsgReader probe;
	if (!probe.ok()) {
		fprintf(stderr, "guest test: cannot read /dev/kmsg (run as root in the guest)\n");
		return 1;
	}
	// Prepended: it must run before the result printer sees the test end.
	auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
	auto *printer = listeners.Release(listeners.default_result_printer());
	listeners.Append(new KmsgVerdict);
	if (printer)
		listeners.Append(printer);
	return RUN_ALL_TESTS();
}
