// me_demo: remote write and read of a large buffer between nodes, striped
// over every attached link.  Run by scripts/demo (`make demo`), one role per
// node:
//
//   me_demo mesh --nodes N
//                       every node of N (a cluster: every node reaches every
//                       other on every link) registers a region with a slot
//                       per node, writes its data into its slot at every
//                       other node, reads it back from each, compares, and
//                       checks what the others wrote into its own region;
//                       prints throughput and bytes per link and peer
//
// or, between two nodes:
//
//   me_demo server      registers a region peers may read and write, sends
//                       its id and key to the other node, waits until the
//                       client says it is done, checks what was written
//                       and prints its link counters
//   me_demo client      registers a source and a read-back buffer, writes
//                       the source into the server's region, reads it back,
//                       compares, prints throughput and per-link bytes
//
// Both sides first wait until discovery shows the other node alive on every
// attached link.  Exit status 0 only if the data arrived intact and every
// link carried a fair part of it in each direction.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "multiedge/multiedge.hpp"

namespace me = multiedge;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

struct Options {
	std::uint64_t size = 64 * kMiB;		// bytes written and read back
	std::uint32_t chunk = 1 * kMiB;		// bytes per operation
	std::uint32_t depth = 8;		// operations in flight
	seconds discover{60};			// wait for the peer this long
	seconds wait{600};			// server: wait for "done" this long
	unsigned min_share = 5;			// % of a phase's data each link must carry
	std::uint32_t nodes = 0;		// mesh: nodes in the cluster, this one included
	bool size_given = false;
};

void usage(FILE *out)
{
	std::fputs(
		"usage: me_demo server|client|mesh [options]\n"
		"\n"
		"`me_demo mesh --nodes N` on each of N nodes: every node writes SIZE bytes\n"
		"(default 16 MiB) into its slot of every other node's region, reads them\n"
		"back, verifies them and what the others wrote into its own region, and\n"
		"prints bytes per link and peer.\n"
		"\n"
		"Run `me_demo server` on one node and `me_demo client` on the other, with\n"
		"multiedge.ko loaded and the same number of links attached on both (see\n"
		"scripts/demo, run by `make demo`).  The server registers a region and sends\n"
		"its id and key to the client; the client writes SIZE bytes into it, reads\n"
		"them back, verifies them and prints throughput and per-link byte counts.\n"
		"\n"
		"options:\n"
		"  --size MIB        bytes to transfer, in MiB (default 64; same on both sides)\n"
		"  --chunk KIB       client: bytes per operation, in KiB (default 1024)\n"
		"  --depth N         client: operations in flight (default 8)\n"
		"  --discover S      wait up to S seconds for the peer on every link (default 60)\n"
		"  --wait S          server: wait up to S seconds for the client (default 600)\n"
		"  --min-share PCT   each link must carry PCT% of each phase's data (default 5)\n"
		"  --nodes N         mesh: nodes in the cluster, this one included (2..64)\n"
		"\n"
		"Exit status: 0 if the data arrived intact and every link carried traffic,\n"
		"1 on any error or mismatch, 2 on bad usage.\n",
		out);
}

// Errors as values up to main(): a step either succeeds or yields the
// sentence to print.
[[noreturn]] void die(const std::string &msg)
{
	std::fprintf(stderr, "me_demo: %s\n", msg.c_str());
	std::exit(1);
}

template <typename T>
T check(me::Result<T> r)
{
	if (!r)
		die(r.error().message());
	return std::move(r).value();
}

void check(const me::Status &s)
{
	if (!s)
		die(s.error().message());
}

void check(const me::Completion &c)
{
	if (!c.ok())
		die(c.describe());
}

// An anonymous private mapping, populated, unmapped on destruction.
class Buffer {
public:
	static std::optional<Buffer> map(std::size_t len)
	{
		void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return std::nullopt;
		return Buffer(static_cast<std::byte *>(p), len);
	}
	Buffer(Buffer &&o) noexcept : p_(std::exchange(o.p_, nullptr)), len_(std::exchange(o.len_, 0)) {}
	Buffer &operator=(Buffer &&) = delete;
	Buffer(const Buffer &) = delete;
	Buffer &operator=(const Buffer &) = delete;
	~Buffer()
	{
		if (p_)
			::munmap(p_, len_);
	}
	std::byte *data() const noexcept { return p_; }
	std::size_t size() const noexcept { return len_; }
	std::span<std::byte> span() const noexcept { return {p_, len_}; }

private:
	Buffer(std::byte *p, std::size_t len) : p_(p), len_(len) {}
	std::byte *p_;
	std::size_t len_;
};

Buffer map_or_die(std::size_t len, const char *what)
{
	auto b = Buffer::map(len);
	if (!b)
		die(std::string("cannot map ") + std::to_string(len) + " bytes for the " + what +
		    ": " + std::strerror(errno));
	return std::move(*b);
}

// The data: 64-bit words that depend on their offset, so a misplaced chunk
// shows up as well as a corrupted one.
std::uint64_t pattern_word(std::uint64_t index)
{
	std::uint64_t z = index + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// `writer` tells the data of the mesh's nodes apart (0 for the pair).
void fill_pattern(std::span<std::byte> buf, std::uint64_t writer = 0)
{
	for (std::size_t i = 0; i + 8 <= buf.size(); i += 8) {
		std::uint64_t w = pattern_word(i / 8 + (writer << 40));
		std::memcpy(buf.data() + i, &w, 8);
	}
}

// Offset of the first byte of `buf` that differs from the pattern, if any.
std::optional<std::size_t> check_pattern(std::span<const std::byte> buf, std::uint64_t writer = 0)
{
	for (std::size_t i = 0; i + 8 <= buf.size(); i += 8) {
		std::uint64_t w = pattern_word(i / 8 + (writer << 40)), got;
		std::memcpy(&got, buf.data() + i, 8);
		if (got != w)
			return i;
	}
	return std::nullopt;
}

// What the nodes tell each other with send/recv.
constexpr char kMagic[8] = {'m', 'e', '-', 'd', 'e', 'm', 'o', '2'};
enum class Kind : std::uint32_t { Region = 1, Done = 2 };
// mesh: whose slot a node writes is its rank, its place among the node ids.

struct Wire {
	char magic[8];
	Kind kind;
	std::uint32_t status;	// Done: 0 if the client succeeded
	std::uint32_t id;	// Region: the server's region
	std::uint32_t reserved;
	std::uint64_t key;
	std::uint64_t length;
};
static_assert(sizeof(Wire) == 40);

std::optional<Wire> parse(const me::Message &m)
{
	Wire w;
	if (m.data.size() != sizeof(w))
		return std::nullopt;
	std::memcpy(&w, m.data.data(), sizeof(w));
	if (std::memcmp(w.magic, kMagic, sizeof(kMagic)) != 0)
		return std::nullopt;
	return w;
}

// Sends one Wire message on `conn` and waits until it is in the peer's
// receive queue.
void send_wire(const me::Device &dev, me::Connection &conn, const Wire &w, std::uint64_t cookie)
{
	auto buf = map_or_die(4096, "message");
	std::memcpy(buf.data(), &w, sizeof(w));
	auto mr = check(dev.register_memory(buf.data(), buf.size(), me::Access::None));
	check(conn.send(mr, 0, sizeof(w), cookie));
	check(check(dev.wait_for(cookie, seconds(30))));
}

// Sizes in MiB; rates are printed in MB/s (10^6 bytes per second).
std::string mib(std::uint64_t bytes)
{
	char s[32];
	if (bytes % kMiB == 0)
		std::snprintf(s, sizeof(s), "%" PRIu64 " MiB", bytes / kMiB);
	else
		std::snprintf(s, sizeof(s), "%.2f MiB", static_cast<double>(bytes) / kMiB);
	return s;
}

void print_peers(const std::vector<me::PeerInfo> &peers)
{
	std::printf("  %10s %-11s %-8s %-8s %s\n", "node", "incarnation", "links", "alive", "state");
	for (const auto &p : peers)
		std::printf("  %10u 0x%08x  0x%-6x 0x%-6x %s\n", p.node_id, p.incarnation, p.links,
			    p.alive_links, p.alive ? "alive" : "gone");
}

// Waits until exactly the links we have attached all reach one alive peer;
// returns that peer.
me::PeerInfo wait_for_peer(const me::Device &dev, seconds limit)
{
	auto links = check(dev.links());
	if (links.empty())
		die("no link attached in this namespace (attach some first: mectl attach eth0)");
	std::uint32_t want = 0;
	for (const auto &l : links)
		want |= 1u << l.index;
	std::printf("waiting for the peer on %zu link%s (discovery, up to %llds) ...\n",
		    links.size(), links.size() == 1 ? "" : "s",
		    static_cast<long long>(limit.count()));
	std::fflush(stdout);
	auto deadline = Clock::now() + limit;
	std::vector<me::PeerInfo> peers;
	for (;;) {
		peers = check(dev.peers());
		for (const auto &p : peers) {
			if (p.alive && (p.alive_links & want) == want) {
				std::printf("peer %u is alive on every link:\n", p.node_id);
				print_peers(peers);
				return p;
			}
		}
		if (Clock::now() >= deadline)
			break;
		std::this_thread::sleep_for(milliseconds(100));
	}
	std::printf("peers seen so far:\n");
	print_peers(peers);
	die("no peer became alive on all " + std::to_string(links.size()) + " links within " +
	    std::to_string(limit.count()) + " s (is the other node running and cabled?)");
}

// Whether `peer` is still alive and the same incarnation (a client that
// failed unloads its module, so its HELLOs stop).
bool still_there(const me::Device &dev, const me::PeerInfo &peer)
{
	for (const auto &p : check(dev.peers()))
		if (p.node_id == peer.node_id)
			return p.alive && p.incarnation == peer.incarnation;
	return false;
}

struct LinkSnap {
	std::string ifname;
	std::uint32_t index = 0;
	std::uint64_t tx = 0, rx = 0;
};

std::vector<LinkSnap> snap_links(const me::Device &dev)
{
	std::vector<LinkSnap> out;
	for (const auto &l : check(dev.links()))
		out.push_back({l.ifname, l.index, l.tx_bytes, l.rx_bytes});
	return out;
}

struct LinkDelta {
	std::string ifname;
	std::uint64_t tx = 0, rx = 0;
};

std::vector<LinkDelta> delta(const std::vector<LinkSnap> &before, const std::vector<LinkSnap> &after)
{
	std::vector<LinkDelta> out;
	for (const auto &a : after) {
		LinkDelta d{a.ifname, a.tx, a.rx};
		for (const auto &b : before)
			if (b.ifname == a.ifname && b.index == a.index) {
				d.tx -= b.tx;
				d.rx -= b.rx;
			}
		out.push_back(d);
	}
	return out;
}

double pct(std::uint64_t part, std::uint64_t whole)
{
	return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// One table row per link, with each link's share of the bytes.
void print_link_table(const char *title, const std::vector<LinkDelta> &d)
{
	std::uint64_t ttx = 0, trx = 0;
	for (const auto &l : d) {
		ttx += l.tx;
		trx += l.rx;
	}
	std::printf("%s\n", title);
	std::printf("  %-10s %16s %7s %16s %7s\n", "link", "tx bytes", "tx %", "rx bytes", "rx %");
	for (const auto &l : d)
		std::printf("  %-10s %16" PRIu64 " %6.1f%% %16" PRIu64 " %6.1f%%\n", l.ifname.c_str(),
			    l.tx, pct(l.tx, ttx), l.rx, pct(l.rx, trx));
	std::printf("  %-10s %16" PRIu64 " %7s %16" PRIu64 "\n", "total", ttx, "", trx);
}

// Every link must have carried at least min_share % of `payload` in the
// phase's data direction; returns the names of those that did not.
std::vector<std::string> idle_links(const std::vector<LinkDelta> &d, bool data_is_tx,
				    std::uint64_t payload, unsigned min_share)
{
	std::vector<std::string> idle;
	for (const auto &l : d) {
		std::uint64_t bytes = data_is_tx ? l.tx : l.rx;
		if (bytes * 100 < payload * min_share)
			idle.push_back(l.ifname);
	}
	return idle;
}

void print_node(const me::Device &dev, const char *role)
{
	auto info = check(dev.query());
	std::printf("%s: node %u (incarnation 0x%08x), abi %u, ethertype 0x%04x, packet size %u\n",
		    role, info.node_id, info.incarnation, info.abi_version, info.ethertype,
		    info.packet_size);
}

// Prints this node's side of the connection (retransmits and the like);
// informational only.
void print_connection(const me::Device &dev, std::uint32_t conn)
{
	auto conns = dev.connections();
	if (!conns) {
		std::printf("(connection counters unavailable: %s)\n", conns.error().message().c_str());
		return;
	}
	for (const auto &c : conns.value())
		if (c.conn == conn)
			std::printf("connection %u to %u (%s): tx %" PRIu64 " packets, %" PRIu64
				    " retransmitted; rx %" PRIu64 " packets, %" PRIu64
				    " dropped; %" PRIu64 " errors\n",
				    c.conn, c.peer, c.state.c_str(), c.tx_packets, c.retransmits,
				    c.rx_packets, c.rx_dropped, c.errors);
}

// Posts len bytes as chunk-sized operations, at most depth in flight, and
// waits for all of them; returns the elapsed seconds.
template <typename PostFn>
double run_phase(const me::Device &dev, std::uint64_t size, const Options &o,
		 std::uint64_t first_cookie, PostFn post)
{
	const std::uint64_t n = (size + o.chunk - 1) / o.chunk;
	auto t0 = Clock::now();
	for (std::uint64_t i = 0; i < n; i++) {
		if (i >= o.depth)
			check(check(dev.wait_for(first_cookie + i - o.depth)));
		std::uint64_t off = i * o.chunk;
		auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.chunk, size - off));
		check(post(off, len, first_cookie + i));
	}
	for (std::uint64_t i = n > o.depth ? n - o.depth : 0; i < n; i++)
		check(check(dev.wait_for(first_cookie + i)));
	return std::chrono::duration<double>(Clock::now() - t0).count();
}

int run_client(const Options &o)
{
	auto dev = check(me::Device::open());
	print_node(dev, "client");
	auto peer = wait_for_peer(dev, o.discover);

	auto src = map_or_die(o.size, "source");
	auto back = map_or_die(o.size, "read-back buffer");
	fill_pattern(src.span());
	auto src_mr = check(dev.register_memory(src.data(), src.size(), me::Access::None));
	auto back_mr = check(dev.register_memory(back.data(), back.size(), me::Access::None));
	std::printf("registered a %s source (region %u) and a %s read-back buffer (region %u)\n",
		    mib(o.size).c_str(), src_mr.id(), mib(o.size).c_str(), back_mr.id());

	std::printf("waiting for the server's region ...\n");
	std::fflush(stdout);
	std::optional<Wire> w;
	me::Message msg;
	auto deadline = Clock::now() + o.discover;
	while (!w) {
		auto m = dev.recv(peer.node_id, seconds(1));
		if (!m) {
			if (m.error().code() == std::errc::timed_out && Clock::now() < deadline)
				continue;
			die(m.error().message());
		}
		msg = std::move(m).value();
		w = parse(msg);
		if (!w || w->kind != Kind::Region) {
			std::printf("ignoring an unexpected %zu-byte message from %u\n",
				    msg.data.size(), msg.peer);
			w.reset();
		}
	}
	me::RemoteRegion remote{w->id, w->key, w->length};
	std::printf("server %u offers region %u (key %016llx, %s)\n", msg.peer, remote.id,
		    static_cast<unsigned long long>(remote.key), mib(remote.length).c_str());
	if (remote.length < o.size)
		die("the server's region (" + std::to_string(remote.length) +
		    " bytes) is smaller than --size (" + std::to_string(o.size) + " bytes)");

	auto conn = check(dev.connect(msg.peer));
	std::printf("connected: connection %u to %u\n", conn.id(), conn.peer());
	std::printf("transfer: %s in %u KiB operations, %u in flight\n", mib(o.size).c_str(),
		    o.chunk / 1024, o.depth);

	auto s0 = snap_links(dev);
	std::printf("writing ...\n");
	std::fflush(stdout);
	double tw = run_phase(dev, o.size, o, 1, [&](std::uint64_t off, std::uint32_t len,
						     std::uint64_t cookie) {
		return conn.write(src_mr, off, remote, off, len, cookie);
	});
	auto s1 = snap_links(dev);
	std::printf("write: %s in %.2f s = %.1f MB/s\n", mib(o.size).c_str(), tw,
		    static_cast<double>(o.size) / 1e6 / tw);
	std::printf("reading back ...\n");
	std::fflush(stdout);
	double tr = run_phase(dev, o.size, o, 1'000'000, [&](std::uint64_t off, std::uint32_t len,
							    std::uint64_t cookie) {
		return conn.read(back_mr, off, remote, off, len, cookie);
	});
	auto s2 = snap_links(dev);
	std::printf("read:  %s in %.2f s = %.1f MB/s\n", mib(o.size).c_str(), tr,
		    static_cast<double>(o.size) / 1e6 / tr);

	int status = 0;
	if (std::memcmp(src.data(), back.data(), o.size) == 0) {
		std::printf("verify: the %s read back are identical to the source\n",
			    mib(o.size).c_str());
	} else {
		std::size_t i = 0;
		while (src.data()[i] == back.data()[i])
			i++;
		std::printf("verify: MISMATCH at byte %zu (chunk %zu): wrote 0x%02x, read 0x%02x\n",
			    i, i / o.chunk, static_cast<unsigned>(src.data()[i]),
			    static_cast<unsigned>(back.data()[i]));
		status = 1;
	}

	auto dw = delta(s0, s1), dr = delta(s1, s2);
	print_link_table("per-link bytes on the client while writing (data goes out: tx):", dw);
	print_link_table("per-link bytes on the client while reading (data comes in: rx):", dr);
	print_connection(dev, conn.id());
	std::printf("peers now:\n");
	print_peers(check(dev.peers()));
	for (const auto &name : idle_links(dw, true, o.size, o.min_share)) {
		std::printf("FAIL: link %s sent less than %u%% of the written data\n",
			    name.c_str(), o.min_share);
		status = 1;
	}
	for (const auto &name : idle_links(dr, false, o.size, o.min_share)) {
		std::printf("FAIL: link %s received less than %u%% of the data read\n",
			    name.c_str(), o.min_share);
		status = 1;
	}

	Wire done{};
	std::memcpy(done.magic, kMagic, sizeof(kMagic));
	done.kind = Kind::Done;
	done.status = static_cast<std::uint32_t>(status);
	send_wire(dev, conn, done, 2'000'000);
	std::printf("told the server we are done\n");
	check(conn.close());
	std::printf("client: %s\n", status ? "FAILED" : "OK: data intact, every link carried traffic");
	return status;
}

int run_server(const Options &o)
{
	auto dev = check(me::Device::open());
	print_node(dev, "server");
	auto peer = wait_for_peer(dev, o.discover);

	auto region = map_or_die(o.size, "region");
	auto mr = check(dev.register_memory(region.data(), region.size(),
					    me::Access::RemoteRead | me::Access::RemoteWrite));
	std::printf("registered a %s region for remote read and write: id %u, key %016llx\n",
		    mib(o.size).c_str(), mr.id(), static_cast<unsigned long long>(mr.key()));

	auto s0 = snap_links(dev);
	auto conn = check(dev.connect(peer.node_id));
	std::printf("connected: connection %u to %u\n", conn.id(), conn.peer());
	auto remote = me::remote_of(mr);
	Wire w{};
	std::memcpy(w.magic, kMagic, sizeof(kMagic));
	w.kind = Kind::Region;
	w.id = remote.id;
	w.key = remote.key;
	w.length = mr.length();
	send_wire(dev, conn, w, 1);
	std::printf("sent {id %u, key %016llx, length %zu} to %u; waiting for the client "
		    "(up to %llds) ...\n",
		    w.id, static_cast<unsigned long long>(w.key), mr.length(), peer.node_id, static_cast<long long>(o.wait.count()));
	std::fflush(stdout);

	auto deadline = Clock::now() + o.wait;
	std::optional<Wire> done;
	while (!done) {
		auto m = dev.recv(peer.node_id, seconds(1));
		if (!m) {
			if (m.error().code() != std::errc::timed_out)
				die(m.error().message());
			if (Clock::now() >= deadline)
				die("the client did not finish within " +
				    std::to_string(o.wait.count()) + " s");
			if (!still_there(dev, peer))
				die("the client node went away without saying it was done");
			continue;
		}
		done = parse(m.value());
		if (!done || done->kind != Kind::Done) {
			std::printf("ignoring an unexpected %zu-byte message from %u\n",
				    m->data.size(), m->peer);
			done.reset();
		}
	}
	auto s1 = snap_links(dev);
	std::printf("the client is done (%s)\n", done->status ? "it reported a failure" : "it succeeded");

	int status = done->status ? 1 : 0;
	if (auto bad = check_pattern(region.span().first(o.size))) {
		std::printf("verify: the region differs from the client's data at byte %zu\n", *bad);
		status = 1;
	} else {
		std::printf("verify: the region holds exactly the %s the client wrote\n",
			    mib(o.size).c_str());
	}

	print_link_table("per-link bytes on the server during the transfer (write data in: rx, "
			 "read data out: tx):",
			 delta(s0, s1));
	print_connection(dev, conn.id());
	std::printf("peers now:\n");
	print_peers(check(dev.peers()));
	check(conn.close());
	std::printf("server: %s\n", status ? "FAILED" : "OK");
	return status;
}

// ---- mesh: every node with every other ----

// Waits until `want` peers are alive on every attached link; returns them.
std::vector<me::PeerInfo> wait_for_peers(const me::Device &dev, std::uint32_t want, seconds limit)
{
	auto links = check(dev.links());
	if (links.empty())
		die("no link attached in this namespace (attach some first: mectl attach eth0)");
	std::uint32_t mask = 0;
	for (const auto &l : links)
		mask |= 1u << l.index;
	std::printf("waiting for %u peers on %zu link%s each (discovery, up to %llds) ...\n", want,
		    links.size(), links.size() == 1 ? "" : "s", static_cast<long long>(limit.count()));
	auto deadline = Clock::now() + limit;
	std::vector<me::PeerInfo> peers, ready;
	for (;;) {
		peers = check(dev.peers());
		ready.clear();
		for (const auto &p : peers)
			if (p.alive && (p.alive_links & mask) == mask)
				ready.push_back(p);
		if (ready.size() >= want)
			break;
		if (Clock::now() >= deadline) {
			std::printf("peers seen so far:\n");
			print_peers(peers);
			die(std::to_string(ready.size()) + " of " + std::to_string(want) +
			    " peers became alive on every link within " +
			    std::to_string(limit.count()) + " s (are the other nodes running?)");
		}
		std::this_thread::sleep_for(milliseconds(100));
	}
	std::printf("%zu peers alive on every link:\n", ready.size());
	print_peers(peers);
	if (ready.size() > want)
		die("more peers than --nodes says (" + std::to_string(ready.size()) + " > " +
		    std::to_string(want) + "): which nodes take part is ambiguous");
	return ready;
}

struct NbrBytes {
	std::uint32_t link = 0, node = 0;
	std::uint64_t tx = 0, rx = 0;
};

std::vector<NbrBytes> snap_nbrs(const me::Device &dev)
{
	std::vector<NbrBytes> out;
	for (const auto &n : check(dev.neighbours()))
		out.push_back({n.link, n.node_id, n.tx_bytes, n.rx_bytes});
	return out;
}

// Per peer, per link: the bytes sent to it and received from it between
// two snapshots; returns the (peer, link) pairs that carried less than
// min_share % of what was sent to that peer.
std::vector<std::string> print_nbr_table(const me::Device &dev, const std::vector<NbrBytes> &before,
					 const std::vector<NbrBytes> &after, unsigned min_share)
{
	std::map<std::uint32_t, std::string> ifname;
	for (const auto &l : check(dev.links()))
		ifname[l.index] = l.ifname;
	std::map<std::uint32_t, std::uint64_t> to_peer;
	std::vector<NbrBytes> d;
	for (const auto &a : after) {
		NbrBytes x = a;
		for (const auto &b : before)
			if (b.link == a.link && b.node == a.node) {
				x.tx -= b.tx;
				x.rx -= b.rx;
			}
		to_peer[x.node] += x.tx;
		d.push_back(x);
	}
	std::printf("  %10s %-10s %16s %7s %16s\n", "peer", "link", "tx bytes", "tx %", "rx bytes");
	std::vector<std::string> idle;
	for (const auto &x : d) {
		std::printf("  %10u %-10s %16" PRIu64 " %6.1f%% %16" PRIu64 "\n", x.node,
			    ifname[x.link].c_str(), x.tx, pct(x.tx, to_peer[x.node]), x.rx);
		if (x.tx * 100 < to_peer[x.node] * min_share)
			idle.push_back("peer " + std::to_string(x.node) + " on " + ifname[x.link]);
	}
	return idle;
}

int run_mesh(const Options &o)
{
	auto dev = check(me::Device::open());
	print_node(dev, "mesh");
	auto self = check(dev.query()).node_id;
	auto peers = wait_for_peers(dev, o.nodes - 1, o.discover);
	std::vector<std::uint32_t> ids{self};
	for (const auto &p : peers)
		ids.push_back(p.node_id);
	std::sort(ids.begin(), ids.end());
	auto rank_of = [&](std::uint32_t id) {
		return static_cast<std::uint64_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
	};
	const std::uint64_t me_rank = rank_of(self), n = ids.size();
	std::printf("cluster of %" PRIu64 " nodes; this node has rank %" PRIu64
		    " (its slot in every region)\n", n, me_rank);

	auto region = map_or_die(n * o.size, "region");
	auto src = map_or_die(o.size, "source");
	auto back = map_or_die(n * o.size, "read-back buffer");
	fill_pattern(src.span(), me_rank + 1);
	auto mr = check(dev.register_memory(region.data(), region.size(),
					    me::Access::RemoteRead | me::Access::RemoteWrite));
	auto src_mr = check(dev.register_memory(src.data(), src.size(), me::Access::None));
	auto back_mr = check(dev.register_memory(back.data(), back.size(), me::Access::None));
	std::printf("registered a %s region (%" PRIu64 " slots of %s) for remote read and write\n",
		    mib(region.size()).c_str(), n, mib(o.size).c_str());

	// A connection to each peer; each tells the others its region on it.
	std::map<std::uint32_t, me::Connection> conns;
	auto remote = me::remote_of(mr);
	std::uint64_t cookie = 1;
	for (const auto &p : peers) {
		auto c = check(dev.connect(p.node_id));
		Wire w{};
		std::memcpy(w.magic, kMagic, sizeof(kMagic));
		w.kind = Kind::Region;
		w.id = remote.id;
		w.key = remote.key;
		w.length = mr.length();
		send_wire(dev, c, w, cookie++);
		conns.emplace(p.node_id, std::move(c));
	}
	std::map<std::uint32_t, me::RemoteRegion> regions;
	std::map<std::uint32_t, bool> done;
	auto deadline = Clock::now() + o.discover;
	auto take = [&](Kind want) {
		auto m = dev.recv(0, seconds(1));
		if (!m) {
			if (m.error().code() != std::errc::timed_out)
				die(m.error().message());
			if (Clock::now() >= deadline)
				die("the other nodes did not answer in time");
			return;
		}
		auto w = parse(m.value());
		if (!w || w->kind != want || !conns.count(m->peer)) {
			std::printf("ignoring an unexpected %zu-byte message from %u\n",
				    m->data.size(), m->peer);
			return;
		}
		if (want == Kind::Region) {
			if (w->length < n * o.size)
				die("node " + std::to_string(m->peer) + "'s region is too small for " +
				    std::to_string(n) + " slots of --size (same --size everywhere?)");
			regions[m->peer] = me::RemoteRegion{w->id, w->key, w->length};
		} else {
			done[m->peer] = w->status == 0;
		}
	};
	while (regions.size() < peers.size())
		take(Kind::Region);
	std::printf("every peer offered its region\n");

	// Writes to every peer at once: chunk i goes to peer i % (n - 1).
	auto phase = [&](bool write, std::uint64_t first) {
		std::vector<std::pair<std::uint32_t, std::uint64_t>> jobs;	// peer, offset
		for (std::uint64_t off = 0; off < o.size; off += o.chunk)
			for (const auto &p : peers)
				jobs.emplace_back(p.node_id, off);
		std::uint64_t i = 0;
		return run_phase(dev, jobs.size() * static_cast<std::uint64_t>(o.chunk), o, first,
				 [&](std::uint64_t, std::uint32_t, std::uint64_t ck) {
			auto [peer, off] = jobs[i++];
			auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.chunk, o.size - off));
			auto &r = regions[peer];
			std::uint64_t slot = me_rank * o.size + off;
			if (write)
				return conns.at(peer).write(src_mr, off, r, slot, len, ck);
			return conns.at(peer).read(back_mr, rank_of(peer) * o.size + off, r, slot,
						   len, ck);
		});
	};
	const std::uint64_t moved = (n - 1) * o.size;
	auto s0 = snap_nbrs(dev);
	std::printf("writing %s to each of %zu peers ...\n", mib(o.size).c_str(), peers.size());
	double tw = phase(true, 10'000'000);
	auto s1 = snap_nbrs(dev);
	std::printf("write: %s in %.2f s = %.1f MB/s\n", mib(moved).c_str(), tw,
		    static_cast<double>(moved) / 1e6 / tw);
	std::printf("reading it back from each ...\n");
	double tr = phase(false, 20'000'000);
	auto s2 = snap_nbrs(dev);
	std::printf("read:  %s in %.2f s = %.1f MB/s\n", mib(moved).c_str(), tr,
		    static_cast<double>(moved) / 1e6 / tr);

	int status = 0;
	for (const auto &p : peers) {
		auto r = rank_of(p.node_id);
		if (std::memcmp(back.data() + r * o.size, src.data(), o.size)) {
			std::printf("verify: what came back from node %u differs from what was written\n",
				    p.node_id);
			status = 1;
		}
	}
	if (!status)
		std::printf("verify: the %s read back from each peer are identical to the source\n",
			    mib(o.size).c_str());

	for (auto &[peer, c] : conns) {
		Wire w{};
		std::memcpy(w.magic, kMagic, sizeof(kMagic));
		w.kind = Kind::Done;
		w.status = static_cast<std::uint32_t>(status);
		send_wire(dev, c, w, cookie++);
	}
	deadline = Clock::now() + o.wait;
	while (done.size() < peers.size())
		take(Kind::Done);
	for (const auto &[peer, ok] : done)
		if (!ok) {
			std::printf("node %u reported a failure\n", peer);
			status = 1;
		}
	for (const auto &p : peers) {
		auto r = rank_of(p.node_id);
		if (auto bad = check_pattern(region.span().subspan(r * o.size, o.size), r + 1)) {
			std::printf("verify: slot %" PRIu64 " (node %u) differs from its data at byte %zu\n",
				    r, p.node_id, *bad);
			status = 1;
		}
	}
	if (!status)
		std::printf("verify: every other node's %s landed intact in its slot here\n",
			    mib(o.size).c_str());

	std::printf("bytes per peer and link while writing (data goes out: tx):\n");
	auto idle = print_nbr_table(dev, s0, s1, o.min_share);
	std::printf("bytes per peer and link while reading (requests out: tx, data in: rx):\n");
	print_nbr_table(dev, s1, s2, 0);
	for (const auto &what : idle) {
		std::printf("FAIL: %s carried less than %u%% of the data written to it\n", what.c_str(),
			    o.min_share);
		status = 1;
	}
	for (auto &[peer, c] : conns)
		check(c.close());
	std::printf("mesh: %s\n", status ? "FAILED" : "OK: every node's data intact, every link carried traffic to every peer");
	return status;
}

bool parse_uint(const char *s, std::uint64_t max, std::uint64_t &out)
{
	char *end = nullptr;
	errno = 0;
	unsigned long long v = std::strtoull(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > max)
		return false;
	out = v;
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	std::string_view role = argv[1];
	if (role == "-h" || role == "--help" || role == "help") {
		usage(stdout);
		return 0;
	}
	if (role != "server" && role != "client" && role != "mesh") {
		std::fprintf(stderr, "me_demo: unknown role '%s'\n\n", argv[1]);
		usage(stderr);
		return 2;
	}

	Options o;
	for (int i = 2; i < argc; i++) {
		std::string_view a = argv[i];
		std::uint64_t v = 0;
		auto value = [&](std::uint64_t max) {
			if (i + 1 >= argc || !parse_uint(argv[i + 1], max, v)) {
				std::fprintf(stderr, "me_demo: %s needs a number from 1 to %" PRIu64 "\n",
					     argv[i], max);
				std::exit(2);
			}
			i++;
			return v;
		};
		if (a == "--size") {
			o.size = value(1024) * kMiB;
			o.size_given = true;
		} else if (a == "--nodes")
			o.nodes = static_cast<std::uint32_t>(value(64));
		else if (a == "--chunk")
			o.chunk = static_cast<std::uint32_t>(value(64 * 1024) * 1024);
		else if (a == "--depth")
			o.depth = static_cast<std::uint32_t>(value(1024));
		else if (a == "--discover")
			o.discover = seconds(value(3600));
		else if (a == "--wait")
			o.wait = seconds(value(86400));
		else if (a == "--min-share")
			o.min_share = static_cast<unsigned>(value(100));
		else {
			std::fprintf(stderr, "me_demo: unknown option '%s'\n\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	if (role == "mesh") {
		if (o.nodes < 2) {
			std::fprintf(stderr, "me_demo: mesh needs --nodes N (2..64): the nodes taking part\n");
			return 2;
		}
		if (!o.size_given)
			o.size = 16 * kMiB;
		return run_mesh(o);
	}
	return role == "server" ? run_server(o) : run_client(o);
}
