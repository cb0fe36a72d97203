#include "control.hpp"
#include "options.hpp"

#include <cstdio>
#include <cstring>
#include <thread>

namespace bench {

namespace {
constexpr char kMagic[8] = {'m', 'e', '-', 'b', 'e', 'n', 'c', '2'};
}

const char *test_name(Test t)
{
	switch (t) {
	case Test::OneWay:
		return "oneway";
	case Test::TwoWay:
		return "twoway";
	case Test::PingPong:
		return "pingpong";
	case Test::OpRate:
		return "oprate";
	case Test::Read:
		return "read";
	}
	return "?";
}

const char *door_name(Door d)
{
	switch (d) {
	case Door::Ioctl:
		return "ioctl";
	case Door::Uring:
		return "uring";
	}
	return "?";
}

const char *target_name(Target t)
{
	switch (t) {
	case Target::Pinned:
		return "pinned";
	case Target::AreaCopy:
		return "area-copy";
	case Target::AreaLazy:
		return "area-lazy";
	case Target::AreaEager:
		return "area-eager";
	}
	return "?";
}

Msg make_msg(Kind kind, std::uint64_t session)
{
	Msg m;
	std::memset(&m, 0, sizeof(m));
	std::memcpy(m.magic, kMagic, sizeof(kMagic));
	m.kind = kind;
	m.session = session;
	return m;
}

void set_text(Msg &m, const std::string &s)
{
	std::snprintf(m.text, sizeof(m.text), "%s", s.c_str());
}

std::string text_of(const Msg &m)
{
	return std::string(m.text, strnlen(m.text, sizeof(m.text)));
}

me::Result<me::PeerInfo> wait_for_peer(const me::Device &dev, std::chrono::seconds limit,
				       std::uint32_t want_peer)
{
	auto links = dev.links();
	if (!links)
		return links.error();
	if (links->empty())
		return failure("no link attached in this namespace (attach some first: "
			       "mectl attach eth0)");
	std::uint32_t want = 0;
	for (const auto &l : links.value())
		want |= 1u << l.index;
	auto deadline = Clock::now() + limit;
	for (;;) {
		auto peers = dev.peers();
		if (!peers)
			return peers.error();
		for (const auto &p : peers.value())
			if (p.alive && (!want_peer || p.node_id == want_peer) &&
			    (p.alive_links & want) == want)
				return p;
		if (Clock::now() >= deadline)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
	return failure("no peer became alive on all " + std::to_string(links->size()) +
		       " attached links within " + std::to_string(limit.count()) +
		       " s (is the other side running, with its links attached?)");
}

bool still_there(const me::Device &dev, const me::PeerInfo &peer, int &absent)
{
	auto peers = dev.peers();
	if (!peers)
		return false;
	bool alive = false;
	for (const auto &p : peers.value())
		if (p.node_id == peer.node_id) {
			if (p.incarnation != peer.incarnation)
				return false;
			alive = p.alive;
		}
	absent = alive ? 0 : absent + 1;
	return absent < kAbsentChecks;
}

me::Result<Channel> Channel::open(const me::Device &dev, std::uint32_t peer)
{
	auto buf = Buffer::map(4096, "control messages");
	if (!buf)
		return buf.error();
	auto mr = dev.register_memory(buf->data(), buf->size(), me::Access::None);
	if (!mr)
		return mr.error();
	auto conn = dev.connect(peer);
	if (!conn)
		return conn.error();
	return Channel(dev, std::move(buf).value(), std::move(mr).value(),
		       std::move(conn).value());
}

me::Status Channel::send(const Msg &m)
{
	std::memcpy(buf_.data(), &m, sizeof(m));
	const std::uint64_t cookie = cookie_++;
	if (auto st = conn_.send(mr_, 0, sizeof(m), cookie); !st)
		return st;
	auto c = dev_->wait_for(cookie, std::chrono::seconds(30));
	if (!c)
		return c.error();
	if (!c->ok())
		return failure(c->describe());
	return {};
}

me::Result<std::optional<Received>> receive(const me::Device &dev, std::uint32_t from,
					    std::chrono::milliseconds timeout)
{
	auto deadline = Clock::now() + timeout;
	for (;;) {
		auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
										 Clock::now());
		if (left.count() <= 0)
			return std::optional<Received>{};
		auto m = dev.recv(from, left);
		if (!m) {
			if (m.error().code() == std::errc::timed_out)
				return std::optional<Received>{};
			return m.error();
		}
		Msg msg;
		if (m->data.size() == sizeof(msg)) {
			std::memcpy(&msg, m->data.data(), sizeof(msg));
			if (std::memcmp(msg.magic, kMagic, sizeof(kMagic)) == 0)
				return std::optional<Received>{Received{msg, m->peer}};
		}
		std::fprintf(stderr, "me_bench: ignoring a %zu-byte message from node %u\n",
			     m->data.size(), m->peer);
	}
}

me::Result<Started> start_role(const Options &o, const char *role, const char *waiting_for)
{
	if (auto st = bind_numa(o); !st)
		return st.error();
	auto dev = me::Device::open();
	if (!dev)
		return dev.error();
	auto info = dev->query();
	if (!info)
		return info.error();
	std::printf("me_bench %s: node %u; waiting for %s on every link (up to %llds)\n", role,
		    info->node_id, waiting_for, static_cast<long long>(o.discover.count()));
	std::fflush(stdout);
	auto peer = wait_for_peer(dev.value(), o.discover, o.peer);
	if (!peer)
		return peer.error();
	return Started{std::move(dev).value(), peer.value()};
}

} // namespace bench
