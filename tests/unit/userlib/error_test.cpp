// libmultiedge's errors and the device handle on the host (no module here).
#include <gtest/gtest.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "multiedge/multiedge.hpp"

using multiedge::Device;
using multiedge::Error;
using multiedge::Result;
using multiedge::Status;

TEST(Error, FromErrnoSaysWhatFailedAndWhy)
{
	Error e = Error::from_errno(ENOENT, "cannot open /x");
	EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
	EXPECT_EQ(e.message(), "cannot open /x: No such file or directory");
}

TEST(Result, HoldsValueOrError)
{
	Result<int> good(7);
	ASSERT_TRUE(good);
	EXPECT_EQ(good.value(), 7);

	Result<int> bad(Error::from_errno(EINVAL, "op"));
	ASSERT_FALSE(bad);
	EXPECT_EQ(bad.error().code(), std::errc::invalid_argument);
}

TEST(Status, DefaultIsSuccess)
{
	Status ok;
	EXPECT_TRUE(ok);
	Status bad(Error::from_errno(EIO, "op"));
	ASSERT_FALSE(bad);
	EXPECT_EQ(bad.error().code(), std::errc::io_error);
}

TEST(Device, OpenOfMissingDeviceExplainsHowToLoadTheModule)
{
	auto dev = Device::open("/nonexistent/multiedge");
	ASSERT_FALSE(dev);
	EXPECT_EQ(dev.error().code(), std::errc::no_such_file_or_directory);
	EXPECT_NE(dev.error().message().find("/nonexistent/multiedge"), std::string::npos);
	EXPECT_NE(dev.error().message().find("insmod"), std::string::npos);
}

TEST(Device, OpenOfAnotherDeviceIsRefused)
{
	auto dev = Device::open("/dev/null");
	ASSERT_FALSE(dev);
	EXPECT_EQ(dev.error().code(), std::errc::inappropriate_io_control_operation);
	EXPECT_NE(dev.error().message().find("not a multiedge device"), std::string::npos)
		<< dev.error().message();
}

TEST(Device, RefusedOpenLeaksNoDescriptor)
{
	int before = ::open("/dev/null", O_RDONLY);
	ASSERT_GE(before, 0);
	::close(before);
	for (int i = 0; i < 100; i++)
		(void)Device::open("/dev/null");
	int after = ::open("/dev/null", O_RDONLY);
	ASSERT_GE(after, 0);
	::close(after);
	EXPECT_EQ(before, after);
}

TEST(Version, MatchesTheMacros)
{
	EXPECT_STREQ(multiedge::version(), "0.3.1");
}
