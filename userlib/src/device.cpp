// libmultiedge: the /dev/multiedge handle.
#include "multiedge/device.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "uapi/multiedge.h"

namespace multiedge {

namespace {

Error open_error(int err, const std::string &path)
{
	Error e = Error::from_errno(err, "cannot open " + path);
	std::string hint;
	if (err == ENOENT)
		hint = " (is multiedge.ko loaded? try: sudo insmod kernel/multiedge.ko)";
	else if (err == EACCES || err == EPERM)
		hint = " (check the device's permissions)";
	return Error(e.code(), e.message() + hint);
}

} // namespace

std::string Device::default_path()
{
	return ME_DEVICE_PATH;
}

Result<Device> Device::open(const std::string &path)
{
	int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return open_error(errno, path);

	Device dev(fd, path);
	// A query proves this is a multiedge device speaking our ABI.
	auto info = dev.query();
	if (!info) {
		if (info.error().code() == std::errc::inappropriate_io_control_operation)
			return Error(info.error().code(),
				     path + " is not a multiedge device (ME_IOC_QUERY: " +
					     info.error().code().message() + ")");
		return info.error();
	}
	return dev;
}

Device::Device(Device &&other) noexcept : fd_(other.fd_), path_(std::move(other.path_))
{
	other.fd_ = -1;
}

Device &Device::operator=(Device &&other) noexcept
{
	if (this != &other) {
		if (fd_ >= 0)
			::close(fd_);
		fd_ = other.fd_;
		path_ = std::move(other.path_);
		other.fd_ = -1;
	}
	return *this;
}

Device::~Device()
{
	if (fd_ >= 0)
		::close(fd_);
}

Result<DeviceInfo> Device::query() const
{
	me_query q{};
	q.size = sizeof(q);
	if (::ioctl(fd_, ME_IOC_QUERY, &q) < 0)
		return Error::from_errno(errno, "ME_IOC_QUERY on " + path_);

	DeviceInfo info;
	info.abi_version = q.abi_version;
	info.features = q.features;
	info.ethertype = q.ethertype;
	info.rx_frames = q.rx_frames;
	info.rx_dropped = q.rx_dropped;
	return info;
}

} // namespace multiedge
