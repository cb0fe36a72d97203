// libmultiedge: the /dev/multiedge device.
#pragma once

#include <cstdint>
#include <string>

#include "multiedge/error.hpp"

namespace multiedge {

// What the loaded module reports about itself (ME_IOC_QUERY).
struct DeviceInfo {
	std::uint32_t abi_version = 0;
	std::uint32_t features = 0;
	std::uint16_t ethertype = 0;
	std::uint64_t rx_frames = 0;	// frames of our ethertype seen, all namespaces
	std::uint64_t rx_dropped = 0;	// of those, dropped
};

// An open handle on /dev/multiedge.  Owns the file descriptor: movable,
// not copyable, closed on destruction.
class Device {
public:
	// Opens the device.  Fails with ENOENT when the module is not loaded
	// (the message says how to load it), EACCES without permission, or
	// ENOTTY when `path` is not a multiedge device.
	static Result<Device> open(const std::string &path = default_path());

	Device(Device &&other) noexcept;
	Device &operator=(Device &&other) noexcept;
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;
	~Device();

	// Queries the module.  Fails only if the module misbehaves or the
	// device went away (EFAULT, ENOTTY, ...).
	Result<DeviceInfo> query() const;

	int fd() const noexcept { return fd_; }
	const std::string &path() const noexcept { return path_; }

	static std::string default_path();

private:
	Device(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

	int fd_ = -1;
	std::string path_;
};

} // namespace multiedge
