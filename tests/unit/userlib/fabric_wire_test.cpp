// Host tests of the libfabric provider's message header and addresses
// (fabric/wire.cpp): what a peer sends is checked before anything is done
// with it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "fabric/mefi.hpp"

namespace {

using mefi::Header;
using mefi::Kind;

std::vector<std::uint8_t> frame(const Header &h, std::size_t payload = 0)
{
	std::vector<std::uint8_t> v(mefi::kHeaderSize + payload, 0x5a);
	mefi::encode(h, v.data());
	return v;
}

Header eager(std::uint64_t len)
{
	Header h;
	h.kind = Kind::Eager;
	h.flags = mefi::kFlagTagged | mefi::kFlagData;
	h.seq = 0xfffffffe;
	h.tag = 0x0123456789abcdefULL;
	h.data = 42;
	h.len = len;
	h.session = 7;
	h.port = 40001;
	return h;
}

Header rts()
{
	Header h;
	h.kind = Kind::Rts;
	h.seq = 3;
	h.len = 1u << 20;
	h.region = 9;
	h.key = 0xfeedfacecafebeefULL;
	h.id = 77;
	h.session = 1;
	h.port = 65535;
	return h;
}

Header frag(std::uint64_t len, std::uint64_t off)
{
	Header h = eager(len);
	h.kind = Kind::Frag;
	h.key = off;
	return h;
}

Header fin(int status = 0)
{
	Header h;
	h.kind = Kind::Fin;
	h.seq = 4;
	h.id = 77;
	h.status = status;
	h.session = 1;
	h.port = 65535;
	return h;
}

Header probe()
{
	Header h = fin();
	h.kind = Kind::Probe;
	return h;
}

bool same(const Header &a, const Header &b)
{
	return a.kind == b.kind && a.flags == b.flags && a.seq == b.seq && a.tag == b.tag &&
	       a.data == b.data && a.len == b.len && a.region == b.region && a.key == b.key &&
	       a.id == b.id && a.status == b.status && a.session == b.session && a.port == b.port;
}

TEST(FabricWire, EveryKindRoundTrips)
{
	for (const Header &h : {eager(0), eager(100), eager(mefi::kEagerMax), rts(), fin(), fin(5),
				 probe()}) {
		auto v = frame(h, h.kind == Kind::Eager ? h.len : 0);
		auto back = mefi::decode(v.data(), v.size());
		ASSERT_TRUE(back) << "kind " << int(h.kind) << " len " << h.len;
		EXPECT_TRUE(same(*back, h));
	}
	for (const Header &h : {frag(mefi::kEagerMax + 1, 0), frag(mefi::kFragMax, mefi::kFragMax - 1)}) {
		auto v = frame(h, 1);
		auto back = mefi::decode(v.data(), v.size());
		ASSERT_TRUE(back) << "piece at " << h.key << " of " << h.len;
		EXPECT_TRUE(same(*back, h));
	}
	// Little-endian on the wire whatever the host: the sequence number's
	// low byte first.
	auto v = frame(eager(0));
	EXPECT_EQ(v[4], 0xfe);
	EXPECT_EQ(v[7], 0xff);
	EXPECT_EQ(mefi::kHeaderSize + mefi::kEagerMax, std::size_t{ME_SEND_MAX_VER0});
	EXPECT_EQ(mefi::kHeaderSize + mefi::kLargeEagerMax, mefi::kLargeSlot);
}

TEST(FabricWire, MalformedMessagesAreRefused)
{
	auto refused = [](std::vector<std::uint8_t> v, const char *what) {
		EXPECT_FALSE(mefi::decode(v.data(), v.size())) << what;
	};
	auto good = frame(eager(10), 10);
	ASSERT_TRUE(mefi::decode(good.data(), good.size()));
	refused(std::vector<std::uint8_t>(good.begin(), good.begin() + 63), "short");
	refused({}, "empty");
	auto v = good;
	v[0] = 0;
	refused(v, "magic");
	v = good;
	v[3] = 1;
	refused(v, "reserved byte 3");
	v = good;
	v[1] = 7;
	refused(v, "unknown kind");
	v = good;
	v[1] = 0;
	refused(v, "kind 0");
	v = good;
	v[2] = 4;
	refused(v, "unknown flag");
	v = good;
	v[62] = 1;
	refused(v, "reserved tail");
	v = good;
	v[60] = v[61] = 0;
	refused(v, "no sender port");
	refused(frame(eager(11), 10), "eager length above its payload");
	refused(frame(eager(9), 10), "eager length below its payload");
	Header h = eager(10);
	h.region = 1;
	refused(frame(h, 10), "eager with a region");
	h = eager(10);
	h.id = 1;
	refused(frame(h, 10), "eager with an id");
	h = rts();
	h.len = mefi::kEagerMax;
	refused(frame(h), "rts that would fit eager");
	h = rts();
	h.len = (1ULL << 30) + 1;
	refused(frame(h), "rts over 1 GiB");
	h = rts();
	h.region = 0;
	refused(frame(h), "rts without a region");
	h = rts();
	h.id = 0;
	refused(frame(h), "rts without an id");
	refused(frame(rts(), 1), "rts with payload");
	h = fin();
	h.id = 0;
	refused(frame(h), "fin without an id");
	refused(frame(frag(4000, 0)), "piece without payload");
	refused(frame(frag(mefi::kEagerMax, 0), 10), "pieces of a message that fits one send");
	refused(frame(frag(mefi::kFragMax + 1, 0), 10), "pieces of a message for a rendezvous");
	refused(frame(frag(4000, 4000), 1), "piece at the message's end");
	refused(frame(frag(4000, 3990), 11), "piece past the message's end");
	refused(frame(frag(4000, ~0ULL), 1), "piece offset wrapping");
	h = frag(4000, 0);
	h.region = 1;
	refused(frame(h, 10), "piece with a region");
	h = frag(4000, 0);
	h.id = 1;
	refused(frame(h, 10), "piece with an id");
	refused(frame(fin(-1)), "fin with a negative status");
	refused(frame(fin(4096)), "fin with a status beyond errno");
	h = fin();
	h.tag = 1;
	refused(frame(h), "fin with a tag");
	h = fin();
	h.flags = mefi::kFlagTagged;
	refused(frame(h), "fin with flags");
	refused(frame(fin(), 8), "fin with payload");
	h = probe();
	h.id = 0;
	refused(frame(h), "probe without an id");
	h = probe();
	h.status = 1;
	refused(frame(h), "probe with a status");
	h = probe();
	h.len = 1;
	refused(frame(h), "probe with a length");
	h = probe();
	h.flags = mefi::kFlagData;
	refused(frame(h), "probe with flags");
	refused(frame(probe(), 1), "probe with payload");
}

// Whatever bytes come, decode either refuses them or returns a header that
// encodes back to the same bytes (nothing is read past the end, nothing
// accepted is ambiguous).
TEST(FabricWire, RandomBytesAreRefusedOrCanonical)
{
	std::mt19937_64 rng(12345);
	int accepted = 0;
	for (int i = 0; i < 200000; i++) {
		// Mostly what a module before ABI 26 carries, now and then more.
		std::size_t len = rng() % ((i % 256 ? ME_SEND_MAX_VER0 : ME_SEND_MAX) + 1);
		std::vector<std::uint8_t> v(len);
		for (auto &b : v)
			b = static_cast<std::uint8_t>(rng());
		if (len >= mefi::kHeaderSize && (i & 1)) {
			// Half of them start as a plausible header.
			Header h = (i & 2) ? eager(len - mefi::kHeaderSize) : fin(static_cast<int>(rng() % 50));
			mefi::encode(h, v.data());
			v[rng() % mefi::kHeaderSize] ^= static_cast<std::uint8_t>(rng() % 3 == 0 ? 1u << (rng() % 8) : 0);
		}
		auto h = mefi::decode(v.data(), v.size());
		if (!h)
			continue;
		accepted++;
		std::vector<std::uint8_t> again(mefi::kHeaderSize);
		mefi::encode(*h, again.data());
		ASSERT_EQ(std::memcmp(again.data(), v.data(), mefi::kHeaderSize), 0) << "message " << i;
	}
	EXPECT_GT(accepted, 1000) << "the generator should hit valid headers too";
}

TEST(FabricWire, RawKeys)
{
	std::uint8_t raw[mefi::kRawKeySize];
	mefi::encode_raw_key(0x01020304, 0x1122334455667788ULL, raw);
	EXPECT_EQ(raw[0], 0x04) << "little-endian";
	EXPECT_EQ(raw[8], 0x88);
	auto k = mefi::decode_raw_key(raw, sizeof(raw));
	ASSERT_TRUE(k);
	EXPECT_EQ(k->first, 0x01020304u);
	EXPECT_EQ(k->second, 0x1122334455667788ULL);
	EXPECT_FALSE(mefi::decode_raw_key(raw, 8)) << "short";
	EXPECT_FALSE(mefi::decode_raw_key(nullptr, 16));
	auto v = std::vector<std::uint8_t>(raw, raw + 16);
	v[5] = 1;
	EXPECT_FALSE(mefi::decode_raw_key(v.data(), 16)) << "padding not zero";
	mefi::encode_raw_key(0, 5, raw);
	EXPECT_FALSE(mefi::decode_raw_key(raw, 16)) << "region 0";
}

TEST(FabricWire, Addresses)
{
	using mefi::make_addr;
	EXPECT_EQ(mefi::addr_string(make_addr(17, 40000)), "fi_me://17:40000");
	EXPECT_EQ(mefi::addr_string(make_addr(17, 0)), "fi_me://17") << "a node, no endpoint";
	for (std::uint32_t n : {1u, 17u, 0xfffffffeu})
		for (std::uint16_t port : {0, 1, 32768, 65535}) {
			char buf[mefi::kAddrLen] = {};
			std::string s = mefi::addr_string(make_addr(n, port));
			ASSERT_LT(s.size(), sizeof(buf));
			std::memcpy(buf, s.c_str(), s.size());
			auto back = mefi::parse_addr(buf, sizeof(buf));
			ASSERT_TRUE(back) << s;
			EXPECT_EQ(mefi::addr_node(*back), n);
			EXPECT_EQ(mefi::addr_port(*back), port);
		}
	auto parse = [](const char *s) { return mefi::parse_addr(s, std::strlen(s) + 1); };
	EXPECT_EQ(parse("42"), make_addr(42, 0)) << "a bare node id (fi_getinfo's node)";
	EXPECT_EQ(parse("42:7"), make_addr(42, 7));
	EXPECT_FALSE(parse("fi_me://42:0")) << "port 0";
	EXPECT_FALSE(parse("fi_me://42:65536")) << "port beyond 16 bits";
	EXPECT_FALSE(parse("fi_me://42:")) << "empty port";
	EXPECT_FALSE(parse("fi_me://42:7:8"));
	EXPECT_FALSE(parse("fi_me://42:-7"));
	EXPECT_FALSE(parse("fi_me://:7")) << "no node";
	EXPECT_EQ(mefi::parse_port("5001"), std::optional<std::uint16_t>(5001));
	EXPECT_FALSE(mefi::parse_port("0"));
	EXPECT_FALSE(mefi::parse_port("65536"));
	EXPECT_FALSE(mefi::parse_port("12ab"));
	EXPECT_FALSE(mefi::parse_port(""));
	EXPECT_FALSE(mefi::parse_port(nullptr));
	EXPECT_FALSE(parse("fi_me://0")) << "node 0";
	EXPECT_FALSE(parse("fi_me://4294967295")) << "broadcast";
	EXPECT_FALSE(parse("fi_me://4294967296")) << "beyond 32 bits";
	EXPECT_FALSE(parse("fi_me://5x"));
	EXPECT_FALSE(parse("fi_me:// 5"));
	EXPECT_FALSE(parse("fi_me://-5"));
	EXPECT_FALSE(parse("fi_sockaddr_in://10.0.0.1:80"));
	EXPECT_FALSE(parse(""));
	EXPECT_FALSE(mefi::parse_addr(nullptr, 8));
	EXPECT_FALSE(mefi::parse_addr("123", 0));
	char longer[64];
	std::memset(longer, '1', sizeof(longer));
	EXPECT_FALSE(mefi::parse_addr(longer, sizeof(longer))) << "longer than an address";
	char unterminated[mefi::kAddrLen];
	std::memset(unterminated, '1', sizeof(unterminated));
	EXPECT_FALSE(mefi::parse_addr(unterminated, sizeof(unterminated))) << "no terminator";
}

} // namespace
