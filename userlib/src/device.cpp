// libmultiedge: the /dev/multiedge handle.
#include "multiedge/device.hpp"

#include <cerrno>
#include <cstring>
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

Status link_request(int fd, unsigned long cmd, const std::string &ifname)
{
	const char *what = cmd == ME_IOC_LINK_ATTACH ? "attach" : "detach";
	if (ifname.empty() || ifname.size() >= ME_IFNAMSIZ)
		return Error(std::make_error_code(std::errc::invalid_argument),
			     std::string("cannot ") + what + " link '" + ifname +
				     "': an interface name has 1 to " +
				     std::to_string(ME_IFNAMSIZ - 1) + " characters");
	me_link_req req{};
	req.size = sizeof(req);
	std::memcpy(req.ifname, ifname.c_str(), ifname.size() + 1);
	if (::ioctl(fd, cmd, &req) == 0)
		return {};

	int err = errno;
	Error e = Error::from_errno(err, std::string("cannot ") + what + " link " + ifname);
	std::string hint;
	switch (err) {
	case EPERM:
		hint = " (needs CAP_NET_ADMIN: run as root)";
		break;
	case ENODEV:
		hint = " (no such network device in this namespace)";
		break;
	case EINVAL:
		hint = " (not an Ethernet device)";
		break;
	case EEXIST:
		hint = " (already attached)";
		break;
	case ENOENT:
		hint = " (not attached)";
		break;
	case ENOSPC:
		hint = " (at most " + std::to_string(ME_MAX_LINKS) + " links per namespace)";
		break;
	}
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

detail::DeviceFile::~DeviceFile()
{
	::close(fd);
}

Result<DeviceInfo> Device::query() const
{
	me_query q{};
	q.size = sizeof(q);
	if (::ioctl(fd(), ME_IOC_QUERY, &q) < 0)
		return Error::from_errno(errno, "ME_IOC_QUERY on " + path_);

	DeviceInfo info;
	info.abi_version = q.abi_version;
	info.features = q.features;
	info.ethertype = q.ethertype;
	info.rx_frames = q.rx_frames;
	info.rx_dropped = q.rx_dropped;
	info.pinned_pages = q.pinned_pages;
	info.regions = q.regions;
	return info;
}

Status Device::attach_link(const std::string &ifname)
{
	return link_request(fd(), ME_IOC_LINK_ATTACH, ifname);
}

Status Device::detach_link(const std::string &ifname)
{
	return link_request(fd(), ME_IOC_LINK_DETACH, ifname);
}

Result<std::vector<LinkInfo>> Device::links() const
{
	std::vector<me_link_info> raw(ME_MAX_LINKS);
	me_link_list req{};
	req.size = sizeof(req);
	req.count = static_cast<std::uint32_t>(raw.size());
	req.links = reinterpret_cast<std::uintptr_t>(raw.data());
	req.info_size = sizeof(me_link_info);
	if (::ioctl(fd(), ME_IOC_LINK_LIST, &req) < 0)
		return Error::from_errno(errno, "ME_IOC_LINK_LIST on " + path_);

	std::vector<LinkInfo> out;
	for (std::uint32_t i = 0; i < req.count && i < raw.size(); i++) {
		const me_link_info &r = raw[i];
		LinkInfo li;
		li.ifname.assign(r.ifname, strnlen(r.ifname, sizeof(r.ifname)));
		li.ifindex = r.ifindex;
		li.mtu = r.mtu;
		li.up = r.flags & ME_LINK_F_UP;
		li.rx_frames = r.rx_frames;
		li.rx_bytes = r.rx_bytes;
		out.push_back(std::move(li));
	}
	return out;
}

Result<MemoryRegion> Device::register_memory(void *addr, std::size_t length, Access access) const
{
	me_mr_reg req{};
	req.size = sizeof(req);
	req.access = static_cast<std::uint32_t>(access);
	req.addr = reinterpret_cast<std::uintptr_t>(addr);
	req.length = length;
	if (::ioctl(fd(), ME_IOC_MR_REG, &req) < 0) {
		int err = errno;
		Error e = Error::from_errno(err, "cannot register " + std::to_string(length) +
							 " bytes of memory");
		std::string hint;
		if (err == ENOMEM)
			hint = " (over RLIMIT_MEMLOCK? see ulimit -l)";
		else if (err == EFAULT)
			hint = " (the range must be mapped and writable)";
		else if (err == EINVAL)
			hint = " (length must be 1 byte to 1 GiB)";
		return Error(e.code(), e.message() + hint);
	}
	return MemoryRegion(file_, req.region, req.key, addr, length, access);
}

MemoryRegion::MemoryRegion(MemoryRegion &&other) noexcept
	: file_(std::move(other.file_)), id_(other.id_), key_(other.key_), addr_(other.addr_),
	  length_(other.length_), access_(other.access_)
{
	other.id_ = 0;
}

MemoryRegion &MemoryRegion::operator=(MemoryRegion &&other) noexcept
{
	if (this != &other) {
		(void)deregister();
		file_ = std::move(other.file_);
		id_ = other.id_;
		key_ = other.key_;
		addr_ = other.addr_;
		length_ = other.length_;
		access_ = other.access_;
		other.id_ = 0;
	}
	return *this;
}

MemoryRegion::~MemoryRegion()
{
	(void)deregister();
}

Status MemoryRegion::deregister()
{
	if (!file_ || !id_)
		return {};
	me_mr_dereg req{};
	req.size = sizeof(req);
	req.region = id_;
	int ret = ::ioctl(file_->fd, ME_IOC_MR_DEREG, &req);
	int err = errno;
	std::uint32_t id = id_;
	id_ = 0;
	file_.reset();
	if (ret < 0)
		return Error::from_errno(err, "cannot deregister region " + std::to_string(id));
	return {};
}

} // namespace multiedge
