// Guest tests of shared connections (ABI 18, ME_CONNECT_F_SHARED): the one
// connection between two nodes that every open file of both posts on,
// through the library where it has the call and raw ioctls for bad input.
// Many files of a node share it where a connection per pair of files
// would pass max_passive (64); a send names the port of the file that
// takes it and the receiver learns the sender's port; RMA from several
// files lands byte for byte; the connection lives while a file of the node
// that opened it is joined, every joined file is told of its end, and a
// file closed with operations in flight leaves nothing behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster.hpp"
#include "raw_ioctl.hpp"
#include "module_util.hpp"
#include "multiedge/uring.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using namespace std::chrono_literals;
using multiedge::Access;
using multiedge::Completion;
using multiedge::CompletionType;
using multiedge::Connection;
using multiedge::ConnectionInfo;
using multiedge::Device;
using multiedge::MemoryRegion;
using multiedge::Message;
using multiedge::RemoteRegion;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

namespace {

std::string text_of(const Message &m)
{
	return std::string(reinterpret_cast<const char *>(m.data.data()), m.data.size());
}

// One open file of a node: a Device bound to `port` (0: none) and a
// registered buffer whose ME_SEND_MAX-byte slots hold what it sends.
struct File {
	std::optional<Device> dev;
	std::optional<Buffer> buf;
	std::optional<MemoryRegion> mr;
	uint16_t port = 0;
	uint64_t cookie = 1;
	int post_err = 0;	// errno of the last post that failed

	AssertionResult open(Cluster &c, int node, uint16_t bind_to, size_t len = 4 * ME_SEND_MAX,
			     Access access = Access::None)
	{
		auto d = c.open_in(node);
		if (!d)
			return AssertionFailure() << d.error().message();
		dev.emplace(std::move(d).value());
		if (bind_to) {
			auto p = dev->bind(bind_to);
			if (!p)
				return AssertionFailure() << p.error().message();
			port = p.value();
		}
		buf.emplace(len);
		auto r = dev->register_memory(buf->data(), len, access);
		if (!r)
			return AssertionFailure() << r.error().message();
		mr.emplace(std::move(r).value());
		return AssertionSuccess();
	}

	// Posts `text` from slot `slot` to port `to` on `cn`; its cookie, or
	// 0 when posting failed (post_err says why).
	uint64_t post(Connection &cn, uint16_t to, const std::string &text, size_t slot = 0)
	{
		std::memcpy(buf->data() + slot * ME_SEND_MAX, text.data(), text.size());
		uint64_t ck = cookie++;
		auto st = cn.send_to(to, *mr, slot * ME_SEND_MAX, static_cast<uint32_t>(text.size()), ck);
		if (!st) {
			post_err = st.error().code().value();
			return 0;
		}
		return ck;
	}

	// The status (positive errno) of the completion of cookie `ck`, or
	// the errno of its posting (ck 0).
	int status_of(uint64_t ck)
	{
		if (!ck)
			return post_err;
		auto c = dev->wait_for(ck, 30s);
		return c ? c->status : c.error().code().value();
	}

	int send(Connection &cn, uint16_t to, const std::string &text)
	{
		return status_of(post(cn, to, text));
	}
};

// Node n's connections to node `peer`, as its namespace lists them.
std::vector<ConnectionInfo> conns_to(Device &d, uint32_t peer)
{
	std::vector<ConnectionInfo> out;
	auto list = d.connections();
	if (!list) {
		ADD_FAILURE() << list.error().message();
		return out;
	}
	for (auto &ci : list.value())
		if (ci.peer == peer)
			out.push_back(ci);
	return out;
}

// Those of them established.
std::vector<ConnectionInfo> up_to(Device &d, uint32_t peer)
{
	auto all = conns_to(d, peer);
	std::erase_if(all, [](const ConnectionInfo &ci) { return ci.state != "established"; });
	return all;
}

// Waits for d's ConnClosed or ConnDead event of connection `conn`.
std::optional<Completion> end_event(Device &d, uint32_t conn, std::chrono::milliseconds timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	while (std::chrono::steady_clock::now() < deadline) {
		auto cs = d.wait(16, 100ms);
		if (!cs) {
			ADD_FAILURE() << cs.error().message();
			return std::nullopt;
		}
		for (const Completion &c : cs.value())
			if ((c.type == CompletionType::ConnClosed || c.type == CompletionType::ConnDead) &&
			    c.conn == conn)
				return c;
	}
	return std::nullopt;
}

// A raw descriptor, closed at destruction unless closed already.
struct RawFd {
	int fd = -1;
	RawFd(const RawFd &) = delete;
	RawFd &operator=(const RawFd &) = delete;
	explicit RawFd(int f) : fd(f) {}
	~RawFd() { close(); }
	int close()
	{
		int r = fd >= 0 ? ::close(fd) : 0;
		fd = -1;
		return r;
	}
};

// A descriptor of /dev/multiedge acting in node n (-1: the test fails).
int open_raw(Cluster &c, int n)
{
	Cluster::Enter in(c.ns(n));
	if (!in.ok()) {
		ADD_FAILURE() << "cannot enter " << c.ns(n);
		return -1;
	}
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		ADD_FAILURE() << "open " << ME_DEVICE_PATH << ": " << errno_name(errno);
	return fd;
}

// A shared connection to `peer` joined through the raw ioctl: its id, or 0.
uint32_t join_raw(int fd, uint32_t peer)
{
	me_connect cn{};
	cn.size = sizeof(cn);
	cn.flags = ME_CONNECT_F_SHARED;
	cn.peer = peer;
	cn.timeout_ms = 10000;
	int err = io(fd, ME_IOC_CONNECT, &cn);
	if (err) {
		ADD_FAILURE() << "shared connect: " << errno_name(err);
		return 0;
	}
	return cn.conn;
}

void aim(me_post &p, const RemoteRegion &r, uint64_t off)
{
	p.remote_region = r.id;
	p.remote_key = static_cast<uint32_t>(r.key);
	p.remote_key_hi = static_cast<uint32_t>(r.key >> 32);
	p.remote_off = off;
}

class SharedTest : public ClusterTest {
protected:
	void SetUp() override
	{
		ClusterTest::SetUp();
		if (HasFatalFailure())
			return;
		ASSERT_NO_FATAL_FAILURE(make_pair(1));
		auto info = c_->dev(0).query();
		ME_ASSERT_OK(info);
		ASSERT_GE(info->abi_version, 18u);	// shared connections since 18
		ASSERT_TRUE(info->features & ME_FEATURE_SHARED);
	}
	uint32_t a_id() { return c_->id(0); }
	uint32_t b_id() { return c_->id(1); }
};

} // namespace

// 80 files of node A, each bound to a port, and two of node B: every A file
// joins the one shared connection to B (the same id), sends to both B
// ports, and each B file gets exactly its 80 messages with the sender's
// port and answers each on the shared connection to that port; every A
// file gets both answers.  One connection each way of the 80 x 2 endpoint
// pairs, where a connection per pair would pass max_passive (64): node B
// would refuse the 65th.  One B file joins the connection A opened (the
// same one its messages came on); the other answers without joining.
TEST_F(SharedTest, EightyFilesShareOneConnection)
{
	constexpr int kA = 80;
	std::vector<File> a(kA);
	File b[2];
	ASSERT_TRUE(b[0].open(*c_, 1, 5001, kA * ME_SEND_MAX));
	ASSERT_TRUE(b[1].open(*c_, 1, 5002, kA * ME_SEND_MAX));
	for (int i = 0; i < kA; i++)
		ASSERT_TRUE(a[i].open(*c_, 0, static_cast<uint16_t>(7000 + i)));

	std::vector<Connection> to_b;
	for (int i = 0; i < kA; i++) {
		auto cn = a[i].dev->connect_shared(b_id(), 10s);
		ME_ASSERT_OK(cn);
		EXPECT_TRUE(cn->shared());
		if (i) {
			ASSERT_EQ(cn->id(), to_b[0].id()) << "file " << i << " got another connection";
		}
		to_b.push_back(std::move(cn).value());
	}
	auto text = [](int i, uint16_t to) { return "a" + std::to_string(i) + ">" + std::to_string(to); };
	std::vector<std::array<uint64_t, 2>> cookies(kA);
	for (int i = 0; i < kA; i++)
		for (int k = 0; k < 2; k++)
			cookies[i][k] = a[i].post(to_b[i], b[k].port, text(i, b[k].port), k);
	for (int i = 0; i < kA; i++)
		for (int k = 0; k < 2; k++)
			ASSERT_EQ(errno_name(a[i].status_of(cookies[i][k])), errno_name(0))
				<< "file " << i << " to port " << b[k].port;

	// Each B file: exactly its messages, each with its sender's port.
	std::vector<Message> got[2];
	for (int k = 0; k < 2; k++) {
		std::set<int> from;
		for (int n = 0; n < kA; n++) {
			auto m = b[k].dev->recv(0, 10s);
			ME_ASSERT_OK(m);
			ASSERT_GE(m->port, 7000);
			ASSERT_LT(m->port, 7000 + kA);
			const int i = m->port - 7000;
			EXPECT_EQ(text_of(m.value()), text(i, b[k].port)) << "port " << m->port;
			EXPECT_EQ(m->peer, a_id());
			EXPECT_TRUE(from.insert(i).second) << "two messages from file " << i;
			got[k].push_back(std::move(m).value());
		}
		auto extra = b[k].dev->recv(0, 300ms);
		EXPECT_FALSE(extra) << "port " << b[k].port << " got \"" << text_of(extra.value())
				    << "\" too";
		EXPECT_EQ(from.size(), static_cast<size_t>(kA));
	}
	const uint32_t at_b = got[0][0].conn;
	for (int k = 0; k < 2; k++)
		for (const Message &m : got[k])
			EXPECT_EQ(m.conn, at_b) << "a message came on another connection";

	// b[0] joins: the connection A opened, which its messages came on.
	auto b_to_a = b[0].dev->connect_shared(a_id(), 10s);
	ME_ASSERT_OK(b_to_a);
	EXPECT_EQ(b_to_a->id(), at_b);

	// Answers to each sender's port: b[0] on its own join, b[1] on the
	// connection its message came on, not joined.
	for (int k = 0; k < 2; k++) {
		std::vector<uint64_t> answered;
		for (size_t n = 0; n < got[k].size(); n++) {
			const Message &m = got[k][n];
			const std::string t = "b" + std::to_string(b[k].port) + ">" + std::to_string(m.port);
			if (k == 0) {
				answered.push_back(b[k].post(b_to_a.value(), m.port, t, n));
			} else {
				auto back = b[k].dev->accept(m);
				ME_ASSERT_OK(back);
				EXPECT_TRUE(back->shared());
				answered.push_back(b[k].post(back.value(), m.port, t, n));
			}
		}
		for (uint64_t ck : answered)
			ASSERT_EQ(errno_name(b[k].status_of(ck)), errno_name(0)) << "B port " << b[k].port;
	}
	for (int i = 0; i < kA; i++) {
		std::set<std::string> answers;
		for (int n = 0; n < 2; n++) {
			auto m = a[i].dev->recv(0, 10s);
			ME_ASSERT_OK(m);
			EXPECT_EQ(m->conn, to_b[i].id());
			EXPECT_EQ(text_of(m.value()),
				  "b" + std::to_string(m->port) + ">" + std::to_string(a[i].port));
			answers.insert(text_of(m.value()));
		}
		EXPECT_EQ(answers.size(), 2u) << "file " << i;
		EXPECT_FALSE(a[i].dev->recv(0, 0ms)) << "file " << i << " got a third message";
	}

	// One connection between the nodes, listed once on each side.
	auto at_a = conns_to(c_->dev(0), b_id());
	ASSERT_EQ(at_a.size(), 1u);
	EXPECT_EQ(at_a[0].conn, to_b[0].id());
	EXPECT_TRUE(at_a[0].shared);
	EXPECT_TRUE(at_a[0].active);
	EXPECT_FALSE(at_a[0].ordered);
	EXPECT_EQ(at_a[0].port, 0u);
	EXPECT_EQ(at_a[0].state, "established");
	auto at_b_list = conns_to(c_->dev(1), a_id());
	ASSERT_EQ(at_b_list.size(), 1u);
	EXPECT_EQ(at_b_list[0].conn, at_b);
	EXPECT_TRUE(at_b_list[0].shared);
	EXPECT_FALSE(at_b_list[0].active);
	EXPECT_EQ(accounting().conns, 2u) << "the engines hold other connections than the shared one";
}

// What the uapi header refuses, through raw ioctls; and what a message of
// a file bound to no port says.
TEST_F(SharedTest, BadInputIsRefused)
{
	File a, u, b;
	ASSERT_TRUE(a.open(*c_, 0, 7000));
	ASSERT_TRUE(u.open(*c_, 0, 0));	// bound to no port
	ASSERT_TRUE(b.open(*c_, 1, 5001, 4096, Access::RemoteWrite));
	const int fd = a.dev->fd();

	me_connect cn{};
	cn.size = sizeof(cn);
	cn.peer = b_id();
	cn.flags = ME_CONNECT_F_SHARED | ME_CONNECT_F_ORDERED;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_CONNECT, &cn)), "EINVAL") << "SHARED | ORDERED";
	cn.flags = ME_CONNECT_F_SHARED;
	cn.port = 5001;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_CONNECT, &cn)), "EINVAL") << "SHARED with a port";
	cn.port = 0;
	cn.flags = ME_CONNECT_F_SHARED | 4;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_CONNECT, &cn)), "EOPNOTSUPP") << "an unknown flag";
	// Joining twice is harmless: the same id.
	const uint32_t s = join_raw(fd, b_id());
	ASSERT_NE(s, 0u);
	EXPECT_EQ(join_raw(fd, b_id()), s);
	auto plain = a.dev->connect(b_id(), 5001);
	ME_ASSERT_OK(plain);
	EXPECT_FALSE(plain->shared());
	const uint32_t region = a.mr->id();
	std::memcpy(a.buf->data(), "hello", 5);

	me_post p = post_of(ME_OP_SEND, s, region, 0, 5);
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EDESTADDRREQ") << "a send without a port";
	p.size = ME_POST_SIZE_VER0;	// the old struct cannot name one
	p.port = 5001;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EDESTADDRREQ") << "a 64-byte send";
	p.size = sizeof(p);
	p.port = ME_PORT_MAX + 1;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EINVAL") << "port 65536";
	p.port = ~0u;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EINVAL") << "port ~0";
	p.port = 5001;
	p.__reserved = 1;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EINVAL") << "__reserved";
	p.__reserved = 0;
	p.conn = plain->id();
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EINVAL") << "a port on a plain connection";
	auto lib = a.send(plain.value(), 5001, "x");
	EXPECT_EQ(errno_name(lib), "EINVAL") << "send_to on a plain connection";
	const RemoteRegion far{b.mr->id(), b.mr->key(), 4096};
	for (uint32_t op : {ME_OP_WRITE, ME_OP_READ, ME_OP_NOTIFY}) {
		me_post w = post_of(op, s, region, 0, 16);
		aim(w, far, 0);
		w.port = 5001;
		EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &w)), "EINVAL") << "a port on opcode " << op;
	}
	EXPECT_EQ(accounting().ops_inflight, 0u) << "a refused post is in flight";
	// The 64-byte struct still posts the rest on a shared connection.
	std::memcpy(a.buf->data(), "hello", 5);
	me_post w = post_of(ME_OP_WRITE, s, region, 0, 5);
	aim(w, far, 100);
	w.size = ME_POST_SIZE_VER0;
	w.cookie = 500;
	ASSERT_EQ(io(fd, ME_IOC_POST, &w), 0);
	auto wd = a.dev->wait_for(500, 10s);
	ME_ASSERT_OK(wd);
	EXPECT_EQ(wd->status, 0) << wd->describe();
	EXPECT_EQ(std::memcmp(b.buf->data() + 100, "hello", 5), 0);

	// A send to a port nobody holds completes refused.
	p = post_of(ME_OP_SEND, s, region, 0, 5);
	p.port = 5999;
	p.cookie = 501;
	ASSERT_EQ(io(fd, ME_IOC_POST, &p), 0);
	auto refused = a.dev->wait_for(501, 10s);
	ME_ASSERT_OK(refused);
	EXPECT_EQ(errno_name(refused->status), "ECONNREFUSED") << refused->describe();
	EXPECT_NE(refused->describe().find("bound"), std::string::npos) << refused->describe();
	EXPECT_FALSE(b.dev->recv(0, 200ms)) << "port 5001 got the message for 5999";

	// A sender's port is its binding: 7000 for a, 0 for u (bound to none,
	// and never joined: any file of the node may post on it).
	std::memcpy(a.buf->data(), "hello", 5);
	p = post_of(ME_OP_SEND, s, region, 0, 5);
	p.port = 5001;
	p.cookie = 502;
	ASSERT_EQ(io(fd, ME_IOC_POST, &p), 0);
	std::memcpy(u.buf->data(), "unbound", 7);
	me_post q = post_of(ME_OP_SEND, s, u.mr->id(), 0, 7);
	q.port = 5001;
	q.cookie = 503;
	ASSERT_EQ(io(u.dev->fd(), ME_IOC_POST, &q), 0);
	auto pd = a.dev->wait_for(502, 10s);
	ME_ASSERT_OK(pd);
	EXPECT_EQ(pd->status, 0) << pd->describe();
	auto qd = u.dev->wait_for(503, 10s);
	ME_ASSERT_OK(qd);
	EXPECT_EQ(qd->status, 0) << qd->describe();
	std::map<std::string, uint16_t> port_of;
	for (int n = 0; n < 2; n++) {
		auto m = b.dev->recv(0, 10s);
		ME_ASSERT_OK(m);
		port_of[text_of(m.value())] = m->port;
	}
	EXPECT_EQ(port_of, (std::map<std::string, uint16_t>{{"hello", 7000}, {"unbound", 0}}));
	// me_recv's __reserved is checked too.
	char rb[64];
	me_recv rv{};
	rv.size = sizeof(rv);
	rv.buf = reinterpret_cast<uintptr_t>(rb);
	rv.len = sizeof(rb);
	rv.__reserved = 1;
	EXPECT_EQ(errno_name(io(b.dev->fd(), ME_IOC_RECV, &rv)), "EINVAL");

	// Leaving: only a file that joined; once.
	me_disconnect dc{sizeof(dc), s};
	EXPECT_EQ(errno_name(io(u.dev->fd(), ME_IOC_DISCONNECT, &dc)), "ENOENT") << "never joined";
	EXPECT_EQ(io(fd, ME_IOC_DISCONNECT, &dc), 0);
	EXPECT_EQ(errno_name(io(fd, ME_IOC_DISCONNECT, &dc)), "ENOENT") << "left already";
}

// Writes, notifies and reads over the shared connection from two files of
// node A into one region of node B, checked byte for byte on both sides;
// then io_uring posts on it (UringQueue::send_to).
TEST_F(SharedTest, RmaFromTwoFilesIntoOneRegion)
{
	constexpr size_t kLen = 1 << 20, kHalf = kLen / 2, kChunk = 64 << 10;
	File a1, a2, b;
	ASSERT_TRUE(a1.open(*c_, 0, 7001, kLen));
	ASSERT_TRUE(a2.open(*c_, 0, 7002, kLen));
	ASSERT_TRUE(b.open(*c_, 1, 5001, kLen, Access::RemoteReadWrite));
	fill_random(a1.buf->data(), kLen, 11);
	fill_random(a2.buf->data(), kLen, 12);
	fill_random(b.buf->data(), kLen, 13);
	auto c1 = a1.dev->connect_shared(b_id(), 10s);
	ME_ASSERT_OK(c1);
	auto c2 = a2.dev->connect_shared(b_id(), 10s);
	ME_ASSERT_OK(c2);
	ASSERT_EQ(c1->id(), c2->id());
	const RemoteRegion far = multiedge::remote_of(*b.mr);

	// a1 writes the first half from its buffer, a2 the second from its
	// own, its last chunk with a notification.
	std::vector<uint64_t> c1s, c2s;
	for (size_t off = 0; off < kHalf; off += kChunk) {
		ME_ASSERT_OK(c1->write(*a1.mr, off, far, off, kChunk, 100 + off / kChunk));
		c1s.push_back(100 + off / kChunk);
		const bool last = off + kChunk == kHalf;
		if (last)
			ME_ASSERT_OK(c2->write_notify(*a2.mr, kHalf + off, far, kHalf + off, kChunk,
						       0xa2, 200 + off / kChunk));
		else
			ME_ASSERT_OK(c2->write(*a2.mr, kHalf + off, far, kHalf + off, kChunk,
					       200 + off / kChunk));
		c2s.push_back(200 + off / kChunk);
	}
	for (uint64_t ck : c1s) {
		auto d = a1.dev->wait_for(ck, 30s);
		ME_ASSERT_OK(d);
		ASSERT_EQ(d->status, 0) << d->describe();
	}
	for (uint64_t ck : c2s) {
		auto d = a2.dev->wait_for(ck, 30s);
		ME_ASSERT_OK(d);
		ASSERT_EQ(d->status, 0) << d->describe();
	}
	EXPECT_EQ(first_difference(b.buf->data(), a1.buf->data(), kHalf), -1);
	EXPECT_EQ(first_difference(b.buf->data() + kHalf, a2.buf->data() + kHalf, kHalf), -1);
	auto note = b.dev->wait(4, 10s);
	ME_ASSERT_OK(note);
	ASSERT_EQ(note->size(), 1u);
	EXPECT_EQ(note->at(0).type, CompletionType::Notify) << note->at(0).describe();
	EXPECT_EQ(note->at(0).imm, 0xa2u);
	EXPECT_EQ(note->at(0).off, kLen - kChunk);
	EXPECT_EQ(note->at(0).len, kChunk);
	EXPECT_EQ(note->at(0).region, b.mr->id());
	EXPECT_EQ(note->at(0).peer, a_id());

	// Each reads back what the other wrote, into the half it did not send.
	ME_ASSERT_OK(c1->read(*a1.mr, kHalf, far, kHalf, kHalf, 300));
	ME_ASSERT_OK(c2->read(*a2.mr, 0, far, 0, kHalf, 400));
	auto r1 = a1.dev->wait_for(300, 30s);
	ME_ASSERT_OK(r1);
	EXPECT_EQ(r1->status, 0) << r1->describe();
	auto r2 = a2.dev->wait_for(400, 30s);
	ME_ASSERT_OK(r2);
	EXPECT_EQ(r2->status, 0) << r2->describe();
	EXPECT_EQ(first_difference(a1.buf->data(), a2.buf->data(), kLen), -1)
		<< "both files should now hold the region";
	EXPECT_EQ(first_difference(a1.buf->data(), b.buf->data(), kLen), -1);
	// Small notifies from both, each told once.
	ME_ASSERT_OK(c1->write_notify(*a1.mr, 0, far, 8, 8, 0xa1, 500));
	ME_ASSERT_OK(c2->write_notify(*a2.mr, 16, far, 24, 8, 0xa2a2, 600));
	auto n1 = a1.dev->wait_for(500, 10s);
	ME_ASSERT_OK(n1);
	EXPECT_EQ(n1->status, 0) << n1->describe();
	auto n2 = a2.dev->wait_for(600, 10s);
	ME_ASSERT_OK(n2);
	EXPECT_EQ(n2->status, 0) << n2->describe();
	std::map<uint32_t, uint64_t> imms;
	for (int tries = 0; imms.size() < 2 && tries < 50; tries++) {
		auto cs = b.dev->wait(4, 200ms);
		ME_ASSERT_OK(cs);
		for (const Completion &c : cs.value()) {
			EXPECT_EQ(c.type, CompletionType::Notify) << c.describe();
			EXPECT_EQ(imms.count(c.imm), 0u) << "notify " << c.imm << " twice";
			imms[c.imm] = c.off;
		}
	}
	EXPECT_EQ(imms, (std::map<uint32_t, uint64_t>{{0xa1, 8}, {0xa2a2, 24}}));

	// Through io_uring: a send naming the port, a write, and a send to a
	// port nobody holds, which completes refused.
	auto q = multiedge::UringQueue::create(*a1.dev);
	ME_ASSERT_OK(q);
	std::memcpy(a1.buf->data(), "by uring", 8);
	ME_ASSERT_OK(q->send_to(c1.value(), b.port, *a1.mr, 0, 8, 1));
	ME_ASSERT_OK(q->write(c1.value(), *a1.mr, 0, far, 64, 8, 2));
	ME_ASSERT_OK(q->send_to(c1.value(), 5999, *a1.mr, 0, 8, 3));
	auto zero = q->send_to(c1.value(), 0, *a1.mr, 0, 8, 4);
	ASSERT_FALSE(zero);
	EXPECT_EQ(errno_name(zero.error().code().value()), "EDESTADDRREQ");
	auto done = q->reap(8, 3, 30s);
	ME_ASSERT_OK(done);
	std::map<uint64_t, std::string> status;
	for (const Completion &c : done.value())
		status[c.cookie] = errno_name(c.status);
	EXPECT_EQ(status, (std::map<uint64_t, std::string>{{1, "0"}, {2, "0"}, {3, "ECONNREFUSED"}}));
	auto m = b.dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "by uring");
	EXPECT_EQ(m->port, a1.port);
	EXPECT_EQ(std::memcmp(b.buf->data() + 64, "by uring", 8), 0);
}

// The connection A opened lives while a file of A is joined: B's files
// leaving, one of A's files leaving and another closing its descriptor
// leave it up; the last A file's leave closes it, and the B file joined to
// it gets ConnClosed (the one that left before does not, nor does an A file
// that posted on it without joining: its later posts fail cleanly).  B's
// connect_shared() then opens a new one (after closing the old handle:
// the library's one join per peer per Device), which works.
TEST_F(SharedTest, TheLastJoinerOfTheOpenerClosesIt)
{
	std::optional<File> a1(std::in_place), a2(std::in_place);
	File a3, b1, b2;
	ASSERT_TRUE(a1->open(*c_, 0, 7001));
	ASSERT_TRUE(a2->open(*c_, 0, 7002));
	ASSERT_TRUE(a3.open(*c_, 0, 7003));	// never joins
	ASSERT_TRUE(b1.open(*c_, 1, 5001, 4096, Access::RemoteWrite));
	ASSERT_TRUE(b2.open(*c_, 1, 5002));
	std::optional<Connection> j1;
	{
		auto j = a1->dev->connect_shared(b_id(), 10s);
		ME_ASSERT_OK(j);
		j1.emplace(std::move(j).value());
	}
	auto j2 = a2->dev->connect_shared(b_id(), 10s);
	ME_ASSERT_OK(j2);
	const uint32_t sa = j2->id();
	ASSERT_EQ(j1->id(), sa);
	RawFd a0(open_raw(*c_, 0));	// closes its descriptor while joined
	ASSERT_GE(a0.fd, 0);
	ASSERT_EQ(join_raw(a0.fd, b_id()), sa);
	auto k1 = b1.dev->connect_shared(a_id(), 10s);
	ME_ASSERT_OK(k1);
	const uint32_t sb = k1->id();
	auto k2 = b2.dev->connect_shared(a_id(), 10s);
	ME_ASSERT_OK(k2);
	EXPECT_EQ(k2->id(), sb);
	// The library's one join per peer per Device.
	auto twice = b1.dev->connect_shared(a_id());
	ASSERT_FALSE(twice);
	EXPECT_EQ(errno_name(twice.error().code().value()), "EISCONN") << twice.error().message();

	// B's files leaving: A's connection stays.
	ME_ASSERT_OK(k2->close());
	EXPECT_EQ(a1->send(*j1, 5001, "one"), 0);
	auto m = b1.dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "one");
	EXPECT_EQ(m->port, 7001);
	// a1 leaves (its Connection goes, then its file), a0 closes its
	// descriptor joined: the connection stays for a2.
	j1.reset();
	a1.reset();
	ASSERT_EQ(a0.close(), 0);
	ASSERT_EQ(a2->send(j2.value(), 5001, "two"), 0);
	m = b1.dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "two");
	ASSERT_EQ(b1.send(k1.value(), 7002, "back"), 0);
	m = a2->dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "back");
	EXPECT_EQ(m->port, 5001);
	EXPECT_EQ(m->conn, sa);
	EXPECT_FALSE(end_event(*b1.dev, sb, 300ms)) << "B was told of an end while a2 is joined";
	ASSERT_EQ(up_to(c_->dev(0), b_id()).size(), 1u);

	// a3 posts on the connection a message came on, without joining.
	ASSERT_EQ(b1.send(k1.value(), 7003, "hi a3"), 0);
	m = a3.dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(m->port, 5001);
	ASSERT_EQ(m->conn, sa);
	auto borrowed = a3.dev->accept(m.value());
	ME_ASSERT_OK(borrowed);
	EXPECT_TRUE(borrowed->shared());
	const RemoteRegion far = multiedge::remote_of(*b1.mr);
	std::memcpy(a3.buf->data() + 2048, "written", 7);
	ME_ASSERT_OK(borrowed->write(*a3.mr, 2048, far, 0, 7, 40));
	auto w = a3.dev->wait_for(40, 10s);
	ME_ASSERT_OK(w);
	EXPECT_EQ(w->status, 0) << w->describe();
	EXPECT_EQ(std::memcmp(b1.buf->data(), "written", 7), 0);
	EXPECT_EQ(a3.send(borrowed.value(), 5001, "from a3"), 0);
	m = b1.dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "from a3");
	EXPECT_EQ(m->port, 7003);

	// a2, the last of A's joined files, leaves: B's joined file is told.
	ME_ASSERT_OK(j2->close());
	auto ev = end_event(*b1.dev, sb, 10s);
	ASSERT_TRUE(ev) << "b1 was not told that the shared connection closed";
	EXPECT_EQ(ev->type, CompletionType::ConnClosed) << ev->describe();
	EXPECT_EQ(ev->peer, a_id());
	EXPECT_FALSE(end_event(*b2.dev, sb, 200ms)) << "b2 left before the end, and was told";
	for (int n = 0; n < 100 && !up_to(c_->dev(0), b_id()).empty(); n++)
		std::this_thread::sleep_for(50ms);
	EXPECT_TRUE(up_to(c_->dev(0), b_id()).empty()) << "A's side is still up";
	auto quiet = a3.dev->wait(16, 300ms);
	ME_ASSERT_OK(quiet);
	for (const Completion &c : quiet.value())
		ADD_FAILURE() << "a3 never joined, yet got: " << c.describe();
	auto late = borrowed->write(*a3.mr, 2048, far, 0, 7, 41);
	if (late) {
		auto d = a3.dev->wait_for(41, 30s);
		ME_ASSERT_OK(d);
		const std::string e = errno_name(d->status);
		EXPECT_TRUE(e == "ECANCELED" || e == "ECONNRESET" || e == "ETIMEDOUT") << d->describe();
	} else {
		const std::string e = errno_name(late.error().code().value());
		EXPECT_TRUE(e == "ENOTCONN" || e == "ENOENT") << late.error().message();
	}
	// Giving the borrowed connection back tells the module nothing.
	ME_ASSERT_OK(borrowed->close());

	// A new one, from B's side now.
	auto again = b1.dev->connect_shared(a_id());
	ASSERT_FALSE(again) << "a second join while the first Connection lives";
	EXPECT_EQ(errno_name(again.error().code().value()), "EISCONN");
	(void)k1->close();	// left already, or the connection's end forgot the join
	auto fresh = b1.dev->connect_shared(a_id(), 10s);
	ME_ASSERT_OK(fresh);
	EXPECT_NE(fresh->id(), sb);
	ASSERT_EQ(b1.send(fresh.value(), 7002, "new"), 0);
	m = a2->dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "new");
	EXPECT_EQ(m->port, 5001);
	EXPECT_NE(m->conn, sa);
	auto at_b = up_to(c_->dev(1), a_id());
	ASSERT_EQ(at_b.size(), 1u);
	EXPECT_EQ(at_b[0].conn, fresh->id());
	EXPECT_TRUE(at_b[0].shared && at_b[0].active);
	auto at_a = up_to(c_->dev(0), b_id());
	ASSERT_EQ(at_a.size(), 1u);
	EXPECT_EQ(at_a[0].conn, m->conn);
	EXPECT_TRUE(at_a[0].shared);
	EXPECT_FALSE(at_a[0].active);
}

// Node A's files joined to the shared connection: raw descriptors (so
// that one can be closed with its region still registered), and a region
// of node B written through them.
// Two nodes whose files open the shared connection to each other at the
// same moment end with one (wire 12: the lower node id's is kept, the
// other side's files join it): each node lists one live shared connection
// to the other, both files hold its id on their side, and it carries a
// message each way.  Five rounds, each on a new pair of files after the
// last round's connection closed.
TEST_F(SharedTest, OpenedFromBothSidesAtOnceIsOne)
{
	auto live_shared = [&](int n, uint32_t peer) {
		auto conns = c_->dev(n).connections();
		EXPECT_TRUE(conns.ok());
		std::vector<uint32_t> ids;
		if (conns.ok())
			for (const auto &ci : conns.value())
				if (ci.shared && ci.peer == peer &&
				    (ci.state == "established" || ci.state == "connecting"))
					ids.push_back(ci.conn);
		return ids;
	};
	for (int round = 0; round < 5; round++) {
		SCOPED_TRACE("round " + std::to_string(round));
		File a, b;
		ASSERT_TRUE(a.open(*c_, 0, static_cast<uint16_t>(7100 + round)));
		ASSERT_TRUE(b.open(*c_, 1, static_cast<uint16_t>(5100 + round)));
		std::optional<multiedge::Result<Connection>> ja, jb;
		std::atomic<int> ready{0};
		auto go = [&](File &f, uint32_t peer, std::optional<multiedge::Result<Connection>> &out) {
			ready++;
			while (ready.load() < 2) {
			}
			out.emplace(f.dev->connect_shared(peer, 10s));
		};
		std::thread ta([&] { go(a, b_id(), ja); });
		std::thread tb([&] { go(b, a_id(), jb); });
		ta.join();
		tb.join();
		ME_ASSERT_OK(*ja);
		ME_ASSERT_OK(*jb);
		auto on_a = live_shared(0, b_id()), on_b = live_shared(1, a_id());
		ASSERT_EQ(on_a.size(), 1u) << "node A keeps more than one shared connection to B";
		ASSERT_EQ(on_b.size(), 1u) << "node B keeps more than one shared connection to A";
		EXPECT_EQ((*ja)->id(), on_a[0]);
		EXPECT_EQ((*jb)->id(), on_b[0]);
		ASSERT_EQ(a.send((*ja).value(), b.port, "to b"), 0);
		auto m = b.dev->recv(0, 10s);
		ME_ASSERT_OK(m);
		EXPECT_EQ(text_of(m.value()), "to b");
		ASSERT_EQ(b.send((*jb).value(), a.port, "to a"), 0);
		m = a.dev->recv(0, 10s);
		ME_ASSERT_OK(m);
		EXPECT_EQ(text_of(m.value()), "to a");
		// Both leave: the opener's side closes it.
		ja.reset();
		jb.reset();
		for (int i = 0; i < 100 && (!live_shared(0, b_id()).empty() ||
					    !live_shared(1, a_id()).empty()); i++)
			std::this_thread::sleep_for(50ms);
		ASSERT_TRUE(live_shared(0, b_id()).empty()) << "still up after both left";
	}
}

class InFlightTest : public SharedTest {
protected:
	static constexpr size_t kLen = 4 << 20, kChunk = 64 << 10;

	// Opens a raw file of node A with a region over src, joined: its
	// descriptor, the region id and the connection id in the arguments.
	void open_joined(std::optional<RawFd> &raw, uint32_t &region, uint32_t &conn)
	{
		raw.emplace(open_raw(*c_, 0));
		ASSERT_GE(raw->fd, 0);
		me_mr_reg reg{};
		reg.size = sizeof(reg);
		reg.addr = reinterpret_cast<uintptr_t>(src_.data());
		reg.length = kLen;
		ASSERT_EQ(io(raw->fd, ME_IOC_MR_REG, &reg), 0);
		region = reg.region;
		conn = join_raw(raw->fd, b_id());
		ASSERT_NE(conn, 0u);
	}

	// Posts writes of all of src into B's region: how many.
	void post_all(int fd, uint32_t region, uint32_t conn, const RemoteRegion &far)
	{
		for (size_t off = 0; off < kLen; off += kChunk) {
			me_post p = post_of(ME_OP_WRITE, conn, region, off, kChunk);
			aim(p, far, off);
			p.cookie = 1000 + off / kChunk;
			ASSERT_EQ(io(fd, ME_IOC_POST, &p), 0) << "at " << off;
		}
	}

	// Waits until no operation is in flight and only `regions` regions
	// of `pages` pinned pages are left.
	void expect_accounting(uint64_t regions, uint64_t pages)
	{
		multiedge::DeviceInfo i;
		for (int n = 0; n < 300; n++) {
			i = accounting();
			if (i.ops_inflight == 0 && i.regions == regions && i.pinned_pages == pages &&
			    i.zc_skbs == 0)
				break;
			std::this_thread::sleep_for(50ms);
		}
		EXPECT_EQ(i.ops_inflight, 0u);
		EXPECT_EQ(i.regions, regions);
		EXPECT_EQ(i.pinned_pages, pages);
		EXPECT_EQ(i.zc_skbs, 0u);
	}

	Buffer src_{kLen};
};

// A file closed (the descriptor, its region still registered) with writes
// in flight on the shared connection it alone of node A joined: its
// operations complete, the connection ends (B's joined file is told,
// after them), and the module's accounting comes back to what the test
// still holds.
TEST_F(InFlightTest, TheLastJoinerClosedWithOperationsInFlightLeavesNothing)
{
	File b;
	ASSERT_TRUE(b.open(*c_, 1, 5001, kLen, Access::RemoteWrite));
	std::memset(b.buf->data(), 0, kLen);
	fill_random(src_.data(), kLen, 21);
	std::optional<RawFd> raw;
	uint32_t region = 0, s = 0;
	ASSERT_NO_FATAL_FAILURE(open_joined(raw, region, s));
	auto kb = b.dev->connect_shared(a_id(), 10s);
	ME_ASSERT_OK(kb);
	auto at_b = up_to(c_->dev(1), a_id());
	ASSERT_EQ(at_b.size(), 1u);
	ASSERT_FALSE(at_b[0].active) << "b opened a connection of its own";

	ASSERT_NO_FATAL_FAILURE(post_all(raw->fd, region, s, multiedge::remote_of(*b.mr)));
	const uint64_t inflight = accounting().ops_inflight;
	ASSERT_EQ(raw->close(), 0);	// leaves: the last of A's files joined

	auto ev = end_event(*b.dev, kb->id(), 30s);
	ASSERT_TRUE(ev) << "b was not told that the shared connection ended";
	const long landed = first_difference(b.buf->data(), src_.data(), kLen);
	std::printf("in flight when the file closed: %llu operations; then %s: %s\n",
		    static_cast<unsigned long long>(inflight),
		    landed < 0 ? "every byte landed" : ("bytes equal up to " + std::to_string(landed)).c_str(),
		    ev->describe().c_str());
	// Closing waits for the file's operations on shared connections
	// before its regions go: they finish, then the last leave closes it.
	EXPECT_EQ(landed, -1);
	EXPECT_EQ(ev->type, CompletionType::ConnClosed) << ev->describe();
	// Left: b's region only.
	expect_accounting(1, kLen / 4096);
}

// Two files of node A joined; one closes its descriptor with writes in
// flight: the connection stays for the other (it is still joined), which
// goes on writing and sending; B's joined file is told of no end.
TEST_F(InFlightTest, AJoinerClosedWithOperationsInFlightLeavesTheConnectionUp)
{
	File a2, b;
	ASSERT_TRUE(a2.open(*c_, 0, 7002, 4096));
	ASSERT_TRUE(b.open(*c_, 1, 5001, kLen, Access::RemoteWrite));
	fill_random(src_.data(), kLen, 22);
	std::optional<RawFd> raw;
	uint32_t region = 0, s = 0;
	ASSERT_NO_FATAL_FAILURE(open_joined(raw, region, s));
	auto j2 = a2.dev->connect_shared(b_id(), 10s);
	ME_ASSERT_OK(j2);
	ASSERT_EQ(j2->id(), s);
	auto kb = b.dev->connect_shared(a_id(), 10s);
	ME_ASSERT_OK(kb);
	const RemoteRegion far = multiedge::remote_of(*b.mr);

	ASSERT_NO_FATAL_FAILURE(post_all(raw->fd, region, s, far));
	ASSERT_EQ(raw->close(), 0);
	// close() returned after the file's operations finished.
	EXPECT_EQ(first_difference(b.buf->data(), src_.data(), kLen - 4096), -1);

	// a2's operations after that go through.
	fill_random(a2.buf->data(), 4096, 23);
	if (auto st = j2->write(*a2.mr, 0, far, kLen - 4096, 4096, 1); !st) {
		auto ev = end_event(*a2.dev, s, 2s);
		FAIL() << st.error().message()
		       << (ev ? "; a2 (joined) was told: " + ev->describe() : std::string());
	}
	auto w = a2.dev->wait_for(1, 30s);
	ME_ASSERT_OK(w);
	EXPECT_EQ(w->status, 0) << w->describe();
	EXPECT_EQ(first_difference(b.buf->data() + kLen - 4096, a2.buf->data(), 4096), -1);
	EXPECT_EQ(errno_name(a2.send(j2.value(), 5001, "still up")), "0");
	auto m = b.dev->recv(0, 10s);
	ME_ASSERT_OK(m);
	EXPECT_EQ(text_of(m.value()), "still up");
	auto ev = end_event(*b.dev, kb->id(), 1s);
	EXPECT_FALSE(ev) << "the connection ended for every file: " << ev->describe();
	auto at_a = up_to(c_->dev(0), b_id());
	ASSERT_EQ(at_a.size(), 1u);
	EXPECT_EQ(at_a[0].conn, s);
	// Left: a2's and b's regions.
	expect_accounting(2, 1 + kLen / 4096);
}
