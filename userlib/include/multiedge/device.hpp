// libmultiedge: the /dev/multiedge device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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
	std::uint64_t pinned_pages = 0;	// pages pinned by registrations, all users
	std::uint64_t regions = 0;	// registered regions, all users
};

// What peers may do with a registered region (bit set).
enum class Access : std::uint32_t {
	None = 0,
	RemoteRead = 1u << 0,
	RemoteWrite = 1u << 1,
	RemoteReadWrite = RemoteRead | RemoteWrite,
};

constexpr Access operator|(Access a, Access b)
{
	return static_cast<Access>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}

namespace detail {
// The open file; shared by a Device and the regions registered through it,
// so it is closed only when the last of them is gone.
class DeviceFile {
public:
	explicit DeviceFile(int fd) : fd(fd) {}
	DeviceFile(const DeviceFile &) = delete;
	DeviceFile &operator=(const DeviceFile &) = delete;
	~DeviceFile();
	const int fd;
};
} // namespace detail

class MemoryRegion;

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

	Device(Device &&other) noexcept = default;
	Device &operator=(Device &&other) noexcept = default;
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;

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

	// Registers [addr, addr + length) (any alignment) for remote access
	// as `access` allows; the pages stay pinned until the region is
	// destroyed.  Fails with EINVAL (length 0 or over 1 GiB, or the
	// range wraps), EFAULT (not all mapped and writable), ENOMEM
	// (RLIMIT_MEMLOCK: see `ulimit -l`), ENOSPC (4096 regions per open
	// device).
	Result<MemoryRegion> register_memory(void *addr, std::size_t length,
					     Access access) const;

	int fd() const noexcept { return file_ ? file_->fd : -1; }
	const std::string &path() const noexcept { return path_; }

	static std::string default_path();

private:
	Device(int fd, std::string path)
		: file_(std::make_shared<detail::DeviceFile>(fd)), path_(std::move(path)) {}

	std::shared_ptr<detail::DeviceFile> file_;
	std::string path_;
};

// A registered region.  Owns the registration: movable, not copyable,
// deregistered on destruction (which waits until no operation uses it).
// Keeps the device file open for as long as it lives.
class MemoryRegion {
public:
	MemoryRegion(MemoryRegion &&other) noexcept;
	MemoryRegion &operator=(MemoryRegion &&other) noexcept;
	MemoryRegion(const MemoryRegion &) = delete;
	MemoryRegion &operator=(const MemoryRegion &) = delete;
	~MemoryRegion();

	std::uint32_t id() const noexcept { return id_; }
	std::uint32_t key() const noexcept { return key_; }
	void *addr() const noexcept { return addr_; }
	std::size_t length() const noexcept { return length_; }
	Access access() const noexcept { return access_; }

	// Deregisters now; the object is empty afterwards.  Fails only if
	// the region is no longer registered (ENOENT).
	Status deregister();

private:
	friend class Device;
	MemoryRegion(std::shared_ptr<detail::DeviceFile> file, std::uint32_t id, std::uint32_t key,
		     void *addr, std::size_t length, Access access)
		: file_(std::move(file)), id_(id), key_(key), addr_(addr), length_(length),
		  access_(access) {}

	std::shared_ptr<detail::DeviceFile> file_;
	std::uint32_t id_ = 0;
	std::uint32_t key_ = 0;
	void *addr_ = nullptr;
	std::size_t length_ = 0;
	Access access_ = Access::None;
};

} // namespace multiedge
