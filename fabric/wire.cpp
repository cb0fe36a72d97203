// What the provider's files share that touches no libfabric object: its
// addresses, its message header (built and checked here, so a host test
// can feed it anything) and the mapping of the module's errors.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fabric/mefi.hpp"

namespace mefi {

std::string addr_string(Addr a)
{
	char buf[kAddrLen];
	if (addr_port(a))
		std::snprintf(buf, sizeof(buf), "fi_me://%" PRIu32 ":%u", addr_node(a),
			      static_cast<unsigned>(addr_port(a)));
	else
		std::snprintf(buf, sizeof(buf), "fi_me://%" PRIu32, addr_node(a));
	return buf;
}

namespace {
// A decimal number of [1, max] at p (digits only), its end in *end.
std::optional<unsigned long long> number(const char *p, unsigned long long max, char **end)
{
	if (*p < '0' || *p > '9')
		return std::nullopt;
	errno = 0;
	unsigned long long v = std::strtoull(p, end, 10);
	if (errno || v == 0 || v > max)
		return std::nullopt;
	return v;
}
} // namespace

std::optional<std::uint16_t> parse_port(const char *service)
{
	char *end = nullptr;
	auto v = service ? number(service, ME_PORT_MAX, &end) : std::nullopt;
	if (!v || *end)
		return std::nullopt;
	return static_cast<std::uint16_t>(*v);
}

std::optional<Addr> parse_addr(const void *addr, std::size_t len)
{
	if (!addr || len == 0 || len > kAddrLen)
		return std::nullopt;
	char buf[kAddrLen + 1] = {};
	std::memcpy(buf, addr, len);
	const char *p = buf;
	if (!std::strncmp(p, "fi_me://", 8))
		p += 8;
	char *end = nullptr;
	auto node = number(p, 0xfffffffeULL, &end);	// 0xffffffff: broadcast
	if (!node)
		return std::nullopt;
	unsigned long long port = 0;
	if (*end == ':') {
		auto pt = number(end + 1, ME_PORT_MAX, &end);
		if (!pt)
			return std::nullopt;
		port = *pt;
	}
	if (*end)
		return std::nullopt;
	return make_addr(static_cast<std::uint32_t>(*node), static_cast<std::uint16_t>(port));
}

namespace {
void put16(std::uint8_t *p, std::uint16_t v)
{
	p[0] = static_cast<std::uint8_t>(v);
	p[1] = static_cast<std::uint8_t>(v >> 8);
}
void put32(std::uint8_t *p, std::uint32_t v)
{
	put16(p, static_cast<std::uint16_t>(v));
	put16(p + 2, static_cast<std::uint16_t>(v >> 16));
}
void put64(std::uint8_t *p, std::uint64_t v)
{
	put32(p, static_cast<std::uint32_t>(v));
	put32(p + 4, static_cast<std::uint32_t>(v >> 32));
}
std::uint32_t get32(const std::uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
std::uint64_t get64(const std::uint8_t *p)
{
	return get32(p) | static_cast<std::uint64_t>(get32(p + 4)) << 32;
}
constexpr std::uint8_t kMagic = 0xfe;	// first byte: not an application's
} // namespace

// Layout: magic, kind, flags, 0, seq, tag, data, len, region, status, key,
// id, session, port (16 bits), 2 zero bytes.
void encode(const Header &h, std::uint8_t *out)
{
	std::memset(out, 0, kHeaderSize);
	out[0] = kMagic;
	out[1] = static_cast<std::uint8_t>(h.kind);
	out[2] = h.flags;
	put32(out + 4, h.seq);
	put64(out + 8, h.tag);
	put64(out + 16, h.data);
	put64(out + 24, h.len);
	put32(out + 32, h.region);
	put32(out + 36, static_cast<std::uint32_t>(h.status));
	put64(out + 40, h.key);
	put64(out + 48, h.id);
	put32(out + 56, h.session);
	put16(out + 60, h.port);
}

std::optional<Header> decode(const std::uint8_t *in, std::size_t len)
{
	if (len < kHeaderSize || in[0] != kMagic || in[3])
		return std::nullopt;
	Header h;
	h.kind = static_cast<Kind>(in[1]);
	h.flags = in[2];
	h.seq = get32(in + 4);
	h.tag = get64(in + 8);
	h.data = get64(in + 16);
	h.len = get64(in + 24);
	h.region = get32(in + 32);
	h.status = static_cast<std::int32_t>(get32(in + 36));
	h.key = get64(in + 40);
	h.id = get64(in + 48);
	h.session = get32(in + 56);
	h.port = static_cast<std::uint16_t>(in[60] | in[61] << 8);
	if (h.flags & ~(kFlagTagged | kFlagData) || !h.port)
		return std::nullopt;
	for (std::size_t i = 62; i < kHeaderSize; i++)
		if (in[i])
			return std::nullopt;
	switch (h.kind) {
	case Kind::Eager:
		if (h.len != len - kHeaderSize || h.region || h.key || h.id || h.status)
			return std::nullopt;
		break;
	case Kind::Rts:
		if (len != kHeaderSize || h.len <= kEagerMax || h.len > ME_OP_MAX_LEN ||
		    !h.region || !h.id || h.status)
			return std::nullopt;
		break;
	case Kind::Fin:
		if (len != kHeaderSize || !h.id || h.flags || h.tag || h.data || h.len ||
		    h.region || h.key || h.status < 0 || h.status > 4095)
			return std::nullopt;
		break;
	case Kind::Frag:
		// A piece within its message, which is too big for one send and
		// small enough not to need a rendezvous.
		if (len <= kHeaderSize || h.len <= kEagerMax || h.len > kFragMax || h.region ||
		    h.id || h.status || h.key >= h.len || len - kHeaderSize > h.len - h.key)
			return std::nullopt;
		break;
	case Kind::Probe:
		if (len != kHeaderSize || !h.id || h.flags || h.tag || h.data || h.len ||
		    h.region || h.key || h.status)
			return std::nullopt;
		break;
	case Kind::Shm:
		if (len != kHeaderSize || !h.len || h.len > ME_OP_MAX_LEN || h.region || h.key ||
		    h.id || h.status)
			return std::nullopt;
		break;
	default:
		return std::nullopt;
	}
	return h;
}

void encode_raw_key(std::uint32_t region, std::uint64_t key, std::uint8_t *out)
{
	std::memset(out, 0, kRawKeySize);
	put32(out, region);
	put64(out + 8, key);
}

std::optional<std::pair<std::uint32_t, std::uint64_t>> decode_raw_key(const std::uint8_t *in,
								       std::size_t len)
{
	if (!in || len != kRawKeySize || get32(in + 4))
		return std::nullopt;
	std::uint32_t region = get32(in);
	if (!region)
		return std::nullopt;
	return std::pair{region, get64(in + 8)};
}

int fi_error_of(int err)
{
	switch (err) {
	case 0:
		return 0;
	case ETIMEDOUT:
	case ECONNRESET:
	case ENOTCONN:
	case EHOSTUNREACH:
	case ENETDOWN:
	case ECANCELED:
	case EACCES:
	case ERANGE:
	case ENOMEM:
	case EFAULT:
	case EINVAL:
	case EMSGSIZE:
	case ECONNREFUSED:
	case ENOSPC:
	case EADDRINUSE:
	case EADDRNOTAVAIL:
		return err;
	default:
		return FI_EIO;
	}
}

} // namespace mefi
