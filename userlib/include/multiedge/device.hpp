// libmultiedge: the /dev/multiedge device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// An Ethernet device attached as a multiedge link (ME_IOC_LINK_LIST).
struct LinkInfo {
	std::string ifname;
	std::uint32_t ifindex = 0;
	std::uint32_t mtu = 0;
	bool up = false;		// running with carrier
	std::uint64_t rx_frames = 0;	// multiedge frames received on it
	std::uint64_t rx_bytes = 0;
};

// An open handle on /dev/multiedge.  It acts in the network namespace of
// the process that opened it.  Owns the file descriptor: movable,
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

	// Starts using Ethernet device `ifname` as a link.  Fails with EPERM
	// (needs CAP_NET_ADMIN), ENODEV (no such device), EINVAL (not
	// Ethernet, or a bad name), EEXIST (already attached), ENOSPC (too
	// many links).
	Status attach_link(const std::string &ifname);
	// Stops using it.  Fails with EPERM or ENOENT (not attached).
	Status detach_link(const std::string &ifname);
	// The attached links, in attach order.
	Result<std::vector<LinkInfo>> links() const;

	int fd() const noexcept { return fd_; }
	const std::string &path() const noexcept { return path_; }

	static std::string default_path();

private:
	Device(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

	int fd_ = -1;
	std::string path_;
};

} // namespace multiedge
