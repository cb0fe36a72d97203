// Guest tests of the libfabric provider (fabric/, libmultiedge-fi.so):
// libfabric's own API between nodes (namespaces) of one guest, and the
// fi_info and fi_pingpong programs Debian ships.
//
// One process drives every endpoint: a domain opened while the thread is
// in a node's namespace acts there, and progress is manual, so the waits
// below read every endpoint's completion queue in turn.
#include <gtest/gtest.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "multiedge.h"
#include "tests/vm/cluster.hpp"
#include "tests/vm/module_util.hpp"

using namespace std::chrono_literals;
using metest::Cluster;
using metest::modprobe;
using metest::sh;

namespace {

// The provider as built: <build>/lib/libfabric, beside <build>/bin.
std::string provider_dir()
{
	return std::string(ME_BIN_DIR) + "/../lib/libfabric";
}

// Set before libfabric's first call in this process.
const bool provider_path_set = [] {
	::setenv("FI_PROVIDER_PATH", provider_dir().c_str(), 1);
	return true;
}();

std::string fi_err(int ret)
{
	return std::to_string(ret) + " (" + fi_strerror(-ret) + ")";
}

fi_info *hints(fi_ep_type type = FI_EP_RDM,
	       std::uint64_t caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV)
{
	fi_info *h = fi_allocinfo();
	h->caps = caps;
	h->ep_attr->type = type;
	h->fabric_attr->prov_name = strdup("multiedge");
	return h;
}

struct Done {
	fi_cq_tagged_entry e{};
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	int err = 0;		// libfabric error (positive), 0: success
	std::size_t olen = 0;
};

// One endpoint in one node's namespace, with its own AV and CQ.
class Fab {
public:
	// With `rma`: FI_RMA asked for, raw keys accepted (FI_MR_RAW).  With
	// `port`: the endpoint's port (as fi_getinfo's service, FI_SOURCE).
	// `setup` runs before the CQ is bound and the endpoint enabled: it may
	// bind counters (counter()) and change cq_flags.  `more_caps` are asked
	// for as well (FI_ATOMIC).
	Fab(Cluster &c, int n, bool rma = false, fi_cq_format format = FI_CQ_FORMAT_TAGGED,
	    const char *port = nullptr, const std::function<void(Fab &)> &setup = {},
	    std::uint64_t more_caps = 0)
	{
		Cluster::Enter in(c.ns(n));
		EXPECT_TRUE(in.ok());
		fi_info *h = hints();
		if (rma) {
			h->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
			h->domain_attr->mr_mode = FI_MR_RAW | FI_MR_PROV_KEY;
		}
		h->caps |= more_caps;
		int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, port, port ? FI_SOURCE : 0, h, &info);
		fi_freeinfo(h);
		if (ret) {
			ADD_FAILURE() << "fi_getinfo: " << fi_err(ret);
			return;
		}
		EXPECT_EQ(ret = fi_fabric(info->fabric_attr, &fabric, nullptr), 0) << fi_err(ret);
		EXPECT_EQ(ret = fi_domain(fabric, info, &domain, nullptr), 0) << fi_err(ret);
		if (!domain)
			return;
		fi_av_attr av_attr{};
		av_attr.type = FI_AV_TABLE;
		EXPECT_EQ(ret = fi_av_open(domain, &av_attr, &av, nullptr), 0) << fi_err(ret);
		fi_cq_attr cq_attr{};
		cq_attr.format = format;
		cq_attr.wait_obj = FI_WAIT_FD;
		EXPECT_EQ(ret = fi_cq_open(domain, &cq_attr, &cq, nullptr), 0) << fi_err(ret);
		EXPECT_EQ(ret = fi_endpoint(domain, info, &ep, nullptr), 0) << fi_err(ret);
		if (!ep || !av || !cq)
			return;
		EXPECT_EQ(ret = fi_ep_bind(ep, &av->fid, 0), 0) << fi_err(ret);
		if (setup)
			setup(*this);
		EXPECT_EQ(ret = fi_ep_bind(ep, &cq->fid, cq_flags), 0) << fi_err(ret);
		EXPECT_EQ(ret = fi_enable(ep), 0) << fi_err(ret);
		name.resize(64);
		std::size_t len = name.size();
		EXPECT_EQ(ret = fi_getname(&ep->fid, name.data(), &len), 0) << fi_err(ret);
		name.resize(len);
		ok = ret == 0;
	}
	~Fab()
	{
		if (ep) {
			EXPECT_EQ(fi_close(&ep->fid), 0);
		}
		for (fid_cntr *k : cntrs)
			EXPECT_EQ(fi_close(&k->fid), 0) << "a counter of a closed endpoint";
		if (cq) {
			EXPECT_EQ(fi_close(&cq->fid), 0);
		}
		if (av) {
			EXPECT_EQ(fi_close(&av->fid), 0);
		}
		if (domain) {
			EXPECT_EQ(fi_close(&domain->fid), 0);
		}
		if (fabric) {
			EXPECT_EQ(fi_close(&fabric->fid), 0);
		}
		if (info)
			fi_freeinfo(info);
	}
	Fab(const Fab &) = delete;
	Fab &operator=(const Fab &) = delete;

	fi_addr_t insert(const Fab &other)
	{
		fi_addr_t a = FI_ADDR_NOTAVAIL;
		EXPECT_EQ(fi_av_insert(av, other.name.data(), 1, &a, 0, nullptr), 1);
		return a;
	}

	// Moves what the queue has into `got`.
	void harvest()
	{
		fi_cq_tagged_entry e[16];
		fi_addr_t src[16];
		for (;;) {
			ssize_t n = fi_cq_readfrom(cq, e, 16, src);
			if (n == -FI_EAVAIL) {
				fi_cq_err_entry err{};
				ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
				Done d;
				d.e.op_context = err.op_context;
				d.e.flags = err.flags;
				d.e.len = err.len;
				d.e.tag = err.tag;
				d.err = err.err;
				d.olen = err.olen;
				got.push_back(d);
				continue;
			}
			if (n == -FI_EAGAIN)
				return;
			ASSERT_GT(n, 0) << fi_err(static_cast<int>(n));
			for (ssize_t i = 0; i < n; i++)
				got.push_back({e[i], src[i], 0, 0});
		}
	}

	// A counter of this domain, closed after the endpoint, bound to the
	// endpoint for `flags` unless they are 0.
	fid_cntr *counter(std::uint64_t flags, fi_wait_obj wait = FI_WAIT_FD)
	{
		fi_cntr_attr attr{};
		attr.events = FI_CNTR_EVENTS_COMP;
		attr.wait_obj = wait;
		fid_cntr *k = nullptr;
		int ret = fi_cntr_open(domain, &attr, &k, nullptr);
		EXPECT_EQ(ret, 0) << fi_err(ret);
		if (!k)
			return nullptr;
		cntrs.push_back(k);
		if (flags) {
			EXPECT_EQ(ret = fi_ep_bind(ep, &k->fid, flags), 0) << fi_err(ret);
		}
		return k;
	}

	// Takes the completion of `context` out of `got`, if there.
	std::optional<Done> take(void *context)
	{
		for (auto it = got.begin(); it != got.end(); ++it)
			if (it->e.op_context == context) {
				Done d = *it;
				got.erase(it);
				return d;
			}
		return std::nullopt;
	}

	fi_info *info = nullptr;
	fid_fabric *fabric = nullptr;
	fid_domain *domain = nullptr;
	fid_av *av = nullptr;
	fid_cq *cq = nullptr;
	fid_ep *ep = nullptr;
	std::vector<fid_cntr *> cntrs;
	std::uint64_t cq_flags = FI_TRANSMIT | FI_RECV;
	std::string name;
	bool ok = false;
	std::vector<Done> got;
};

// Drives every endpoint until `done()` or the timeout.
bool drive(std::initializer_list<Fab *> fabs, const std::function<bool()> &done,
	   std::chrono::milliseconds timeout = 30s)
{
	auto end = std::chrono::steady_clock::now() + timeout;
	while (!done()) {
		if (std::chrono::steady_clock::now() > end)
			return false;
		for (Fab *f : fabs)
			f->harvest();
	}
	return true;
}

// Posts ctx.size() tagged sends from `from` to `to`, message i being
// `msg(i)` with context &ctx[i], harvesting while the provider answers
// FI_EAGAIN (its send slots are taken); all within 60 s.
void tsend_all(Fab &from, fi_addr_t to, std::uint64_t tag, std::vector<int> &ctx,
	       const std::function<std::pair<const void *, std::size_t>(int)> &msg)
{
	auto t0 = std::chrono::steady_clock::now();
	for (int sent = 0; sent < static_cast<int>(ctx.size());) {
		auto [buf, len] = msg(sent);
		ssize_t r = fi_tsend(from.ep, buf, len, nullptr, to, tag, &ctx[sent]);
		if (r == -FI_EAGAIN) {
			from.harvest();
			continue;
		}
		ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
		sent++;
		ASSERT_LT(std::chrono::steady_clock::now() - t0, 60s);
	}
}

// Waits for the completion of `ctx` on `at`, driving all of `fabs`.
std::optional<Done> wait_done(Fab &at, void *ctx, std::initializer_list<Fab *> fabs)
{
	std::optional<Done> d;
	drive(fabs, [&] { return (d = at.take(ctx)).has_value(); });
	return d;
}

// Drives `fabs` until every send of `ctx` completed on `at`, in order;
// returns how many did.
int sends_completed(Fab &at, std::vector<int> &ctx, std::initializer_list<Fab *> fabs)
{
	int done = 0;
	const int n = static_cast<int>(ctx.size());
	drive(fabs, [&] {
		while (done < n && at.take(&ctx[done]))
			done++;
		return done == n;
	});
	return done;
}

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed)
{
	std::vector<std::uint8_t> v(n);
	std::uint32_t x = seed * 2654435761u + 1;
	for (auto &b : v) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b = static_cast<std::uint8_t>(x);
	}
	return v;
}

// Three nodes on one switch (MTU 9000), the module loaded afresh.
class FabricTest : public metest::ClusterTest {
protected:
	void SetUp() override
	{
		ASSERT_TRUE(provider_path_set);
		ClusterTest::SetUp();
		for (int i = 0; i < 3; i++)
			ASSERT_EQ(c_->add_node(), i);
		int sw = c_->add_switch();
		ASSERT_GE(sw, 0);
		for (int i = 0; i < 3; i++)
			ASSERT_GE(c_->plug(i, sw, 9000), 0);
		ASSERT_TRUE(c_->start());
		ASSERT_TRUE(c_->wait_pair(0, 1, 1));
		ASSERT_TRUE(c_->wait_pair(0, 2, 1));
		ASSERT_TRUE(c_->wait_pair(1, 2, 1));
	}
	Cluster &c() { return *c_; }
};

TEST_F(FabricTest, GetinfoDescribesTheProvider)
{
	Cluster::Enter in(c().ns(0));
	ASSERT_TRUE(in.ok());
	fi_info *h = hints(), *info = nullptr;
	ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
	ASSERT_NE(info, nullptr);
	EXPECT_STREQ(info->fabric_attr->prov_name, "multiedge");
	EXPECT_EQ(info->ep_attr->type, FI_EP_RDM);
	EXPECT_EQ(info->caps & (FI_MSG | FI_TAGGED), FI_MSG | FI_TAGGED);
	EXPECT_EQ(info->addr_format, static_cast<std::uint32_t>(FI_ADDR_STR));
	EXPECT_EQ(std::string(static_cast<char *>(info->src_addr)),
		  "fi_me://" + std::to_string(c().id(0)));
	EXPECT_GT(info->tx_attr->inject_size, 0u);
	fi_freeinfo(info);

	// What it does not offer is not matched.
	for (auto [type, caps] : {std::pair{FI_EP_MSG, FI_MSG}, std::pair{FI_EP_DGRAM, FI_MSG},
				  std::pair{FI_EP_RDM, FI_MSG | FI_RMA},  // without FI_MR_RAW
				  std::pair{FI_EP_RDM, FI_MSG | FI_ATOMIC}}) {  // without FI_MR_RAW
		fi_info *h2 = hints(type, caps), *none = nullptr;
		EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h2, &none), -FI_ENODATA)
			<< "type " << type << " caps " << caps;
		fi_freeinfo(h2);
	}
	// RMA for callers that take raw keys.
	fi_info *hr = hints(FI_EP_RDM, FI_MSG | FI_RMA), *rinfo = nullptr;
	hr->domain_attr->mr_mode = FI_MR_RAW | FI_MR_PROV_KEY;
	ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hr, &rinfo), 0);
	EXPECT_TRUE(rinfo->caps & FI_RMA);
	EXPECT_TRUE(rinfo->domain_attr->mr_mode & FI_MR_RAW);
	EXPECT_EQ(rinfo->domain_attr->mr_key_size, 16u);
	fi_freeinfo(rinfo);
	fi_freeinfo(hr);
	// A node that is not ours as the source.
	fi_info *info2 = nullptr;
	EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), "fi_me://4000000000", nullptr, FI_SOURCE, h, &info2),
		  -FI_ENODATA);
	fi_freeinfo(h);
}

// The hints Open MPI 4.1's mtl ofi gives (ompi/mca/mtl/ofi/
// mtl_ofi_component.c), at the API version it gives them with.
TEST_F(FabricTest, OpenMpiMtlHintsMatch)
{
	Cluster::Enter in(c().ns(0));
	ASSERT_TRUE(in.ok());
	fi_info *h = fi_allocinfo(), *info = nullptr;
	h->mode = FI_CONTEXT;
	h->ep_attr->type = FI_EP_RDM;
	// 4.1.4 asks these caps (seen in libfabric's log of its fi_getinfo).
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->op_flags = FI_COMPLETION;
	h->tx_attr->op_flags = FI_COMPLETION;
	h->domain_attr->threading = FI_THREAD_UNSPEC;
	h->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
	h->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
	h->domain_attr->av_type = FI_AV_MAP;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	int ret = fi_getinfo(FI_VERSION(1, 0), nullptr, nullptr, 0, h, &info);
	ASSERT_EQ(ret, 0) << fi_err(ret);
	bool found = false;
	for (fi_info *i = info; i; i = i->next)
		found |= !std::strcmp(i->fabric_attr->prov_name, "multiedge");
	EXPECT_TRUE(found) << "multiedge not among the providers matched";
	fi_freeinfo(info);
	// With remote CQ data (its tag mode "full" asks again with it).
	h->domain_attr->cq_data_size = 4;
	ASSERT_EQ(ret = fi_getinfo(FI_VERSION(1, 0), nullptr, nullptr, 0, h, &info), 0) << fi_err(ret);
	fi_freeinfo(info);
	fi_freeinfo(h);
}

// Messages and tagged messages of every size class arrive whole, in both
// directions: empty, eager (one multiedge send), rendezvous (remote read).
TEST_F(FabricTest, SizesRoundTrip)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	std::size_t eager = a.info->tx_attr->inject_size;
	// Eager in one send (up to 16 KiB - 64 where the module takes sends
	// of several packets), by rendezvous.
	for (std::size_t len : {std::size_t{0}, std::size_t{1}, eager, eager + 1, 2 * eager,
				std::size_t{4096}, std::size_t{4097}, std::size_t{16320},
				std::size_t{16321}, std::size_t{65536}, std::size_t{1} << 20,
				std::size_t{5} << 20}) {
		for (bool tagged : {false, true}) {
			SCOPED_TRACE("len " + std::to_string(len) + (tagged ? " tagged" : " msg"));
			auto out = pattern(len, static_cast<unsigned>(len) + tagged);
			std::vector<std::uint8_t> in(len + 16, 0xee);
			int rctx = 0, sctx = 0;
			ssize_t r = tagged ? fi_trecv(b.ep, in.data(), in.size(), nullptr, to_a, 0x77, 0, &rctx)
					   : fi_recv(b.ep, in.data(), in.size(), nullptr, to_a, &rctx);
			ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
			r = tagged ? fi_tsend(a.ep, out.data(), len, nullptr, to_b, 0x77, &sctx)
				   : fi_send(a.ep, out.data(), len, nullptr, to_b, &sctx);
			ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
			auto rd = wait_done(b, &rctx, {&a, &b});
			ASSERT_TRUE(rd) << "no receive completion";
			auto sd = wait_done(a, &sctx, {&a, &b});
			ASSERT_TRUE(sd) << "no send completion";
			EXPECT_EQ(rd->err, 0);
			EXPECT_EQ(sd->err, 0);
			EXPECT_EQ(rd->e.len, len);
			EXPECT_EQ(rd->src, to_a) << "FI_SOURCE";
			EXPECT_TRUE(rd->e.flags & FI_RECV);
			EXPECT_TRUE(rd->e.flags & (tagged ? FI_TAGGED : FI_MSG));
			if (tagged) {
				EXPECT_EQ(rd->e.tag, 0x77u);
			}
			EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << "payload differs";
			EXPECT_EQ(in[len], 0xee) << "written past the message";
		}
	}
}

// Two endpoints on node 1 (MPI ranks sharing a node), one on node 0: each
// of node 1's gets only what was sent to it, eager and rendezvous, and
// node 0 tells their answers apart by source.  Once one of them closes,
// sends to it fail with FI_ECONNREFUSED; the other goes on.
TEST_F(FabricTest, TwoEndpointsOfOneNodeAreApart)
{
	Fab a(c(), 0), b2(c(), 1);
	auto b1p = std::make_unique<Fab>(c(), 1);
	Fab &b1 = *b1p;
	ASSERT_TRUE(a.ok && b1.ok && b2.ok);
	ASSERT_NE(b1.name, b2.name);
	fi_addr_t to_b1 = a.insert(b1), to_b2 = a.insert(b2);
	fi_addr_t b1_to_a = b1.insert(a), b2_to_a = b2.insert(a);
	for (std::size_t len : {std::size_t{100}, std::size_t{300000}}) {
		SCOPED_TRACE("len " + std::to_string(len));
		auto m1 = pattern(len, 1), m2 = pattern(len, 2);
		int s1, s2;
		ASSERT_EQ(fi_tsend(a.ep, m1.data(), len, nullptr, to_b1, 5, &s1), 0);
		ASSERT_EQ(fi_tsend(a.ep, m2.data(), len, nullptr, to_b2, 5, &s2), 0);
		std::vector<std::uint8_t> in1(len), in2(len);
		int r1, r2;
		ASSERT_EQ(fi_trecv(b1.ep, in1.data(), len, nullptr, FI_ADDR_UNSPEC, 5, 0, &r1), 0);
		ASSERT_EQ(fi_trecv(b2.ep, in2.data(), len, nullptr, FI_ADDR_UNSPEC, 5, 0, &r2), 0);
		auto d1 = wait_done(b1, &r1, {&a, &b1, &b2});
		auto d2 = wait_done(b2, &r2, {&a, &b1, &b2});
		ASSERT_TRUE(d1 && d2);
		EXPECT_EQ(d1->err, 0);
		EXPECT_EQ(d2->err, 0);
		EXPECT_TRUE(in1 == m1) << "b1 got another's message";
		EXPECT_TRUE(in2 == m2) << "b2 got another's message";
		EXPECT_EQ(d1->src, b1_to_a);
		EXPECT_EQ(d2->src, b2_to_a);
		ASSERT_TRUE(wait_done(a, &s1, {&a, &b1, &b2}));
		ASSERT_TRUE(wait_done(a, &s2, {&a, &b1, &b2}));
		// Answers: node 0 tells them apart by source.
		char ans1[] = "b1", ans2[] = "b2";
		ASSERT_EQ(fi_send(b2.ep, ans2, sizeof(ans2), nullptr, b2_to_a, &s2), 0);
		ASSERT_EQ(fi_send(b1.ep, ans1, sizeof(ans1), nullptr, b1_to_a, &s1), 0);
		for (int k = 0; k < 2; k++) {
			char in[8] = {};
			int r;
			ASSERT_EQ(fi_recv(a.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &r), 0);
			auto d = wait_done(a, &r, {&a, &b1, &b2});
			ASSERT_TRUE(d);
			EXPECT_EQ(d->src, std::string(in) == "b1" ? to_b1 : to_b2) << in;
		}
	}
	// b1 goes: its connection closes, a send to it is refused.  One sent
	// before a saw the close may fail with the connection instead.
	b1p.reset();
	char x[] = "x";
	int sx;
	ASSERT_EQ(fi_send(a.ep, x, sizeof(x), nullptr, to_b1, &sx), 0);
	auto dx = wait_done(a, &sx, {&a, &b2});
	ASSERT_TRUE(dx);
	EXPECT_TRUE(dx->err == FI_ECONNREFUSED || dx->err == FI_ECONNRESET) << fi_strerror(dx->err);
	ASSERT_EQ(fi_send(a.ep, x, sizeof(x), nullptr, to_b1, &sx), 0);
	dx = wait_done(a, &sx, {&a, &b2});
	ASSERT_TRUE(dx);
	EXPECT_EQ(dx->err, FI_ECONNREFUSED) << fi_strerror(dx->err);
	int sy, ry;
	char y[] = "y", iny[4] = {};
	ASSERT_EQ(fi_send(a.ep, y, sizeof(y), nullptr, to_b2, &sy), 0);
	ASSERT_EQ(fi_recv(b2.ep, iny, sizeof(iny), nullptr, FI_ADDR_UNSPEC, &ry), 0);
	ASSERT_TRUE(wait_done(b2, &ry, {&a, &b2}));
	EXPECT_STREQ(iny, "y");
}

// The service of fi_getinfo is a port: with FI_SOURCE the endpoint's own
// (its domain binds it; a second domain cannot), else the destination's.
TEST_F(FabricTest, PortsAsServices)
{
	Fab a(c(), 0, false, FI_CQ_FORMAT_TAGGED, "5001");
	ASSERT_TRUE(a.ok);
	std::string want = "fi_me://" + std::to_string(c().id(0)) + ":5001";
	EXPECT_EQ(std::string(a.name.c_str()), want);
	{
		Cluster::Enter in(c().ns(0));
		ASSERT_TRUE(in.ok());
		fi_info *h = hints(), *info = nullptr;
		ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, "5001", FI_SOURCE, h, &info), 0);
		EXPECT_EQ(std::string(static_cast<char *>(info->src_addr)), want);
		fid_fabric *fab = nullptr;
		fid_domain *dom = nullptr;
		ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
		EXPECT_EQ(fi_domain(fab, info, &dom, nullptr), -FI_EADDRINUSE) << "port taken twice";
		EXPECT_EQ(dom, nullptr);
		fi_close(&fab->fid);
		fi_freeinfo(info);
		fi_info *d = nullptr;
		std::string peer = "fi_me://" + std::to_string(c().id(1));
		ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), peer.c_str(), "6000", 0, h, &d), 0);
		EXPECT_EQ(std::string(static_cast<char *>(d->dest_addr)), peer + ":6000");
		fi_freeinfo(d);
		for (const char *bad : {"0", "65536", "x1"}) {
			fi_info *none = nullptr;
			EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, bad, FI_SOURCE, h, &none),
				  -FI_ENODATA)
				<< bad;
		}
		fi_freeinfo(h);
	}
	// fi_av_insertsvc takes the node and the port apart.
	Fab b(c(), 1);
	ASSERT_TRUE(b.ok);
	fi_addr_t to_a = FI_ADDR_NOTAVAIL;
	std::string node = "fi_me://" + std::to_string(c().id(0));
	ASSERT_EQ(fi_av_insertsvc(b.av, node.c_str(), "5001", &to_a, 0, nullptr), 1);
	fi_addr_t to_node = FI_ADDR_NOTAVAIL;
	char node_name[32] = {};
	std::memcpy(node_name, node.c_str(), node.size());
	EXPECT_EQ(fi_av_insert(b.av, node_name, 1, &to_node, 0, nullptr), 0)
		<< "a node is not an endpoint";
	char m[] = "to 5001", in[16] = {};
	int s, r;
	ASSERT_EQ(fi_send(b.ep, m, sizeof(m), nullptr, to_a, &s), 0);
	ASSERT_EQ(fi_recv(a.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &r), 0);
	ASSERT_TRUE(wait_done(a, &r, {&a, &b}));
	EXPECT_STREQ(in, m);
}

// Tags match under ignore bits; messages that come before their receive
// wait (unexpected) and are matched in the order they were sent; remote
// CQ data arrives with them.
TEST_F(FabricTest, TagMatchingAndUnexpectedOrder)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	constexpr int kN = 40;
	std::vector<std::vector<std::uint8_t>> out;
	int sctx[kN];
	for (int i = 0; i < kN; i++) {
		// Every third one is large (rendezvous): order holds across both.
		out.push_back(pattern(i % 3 == 2 ? 100000 : 100 + i, i));
		std::uint64_t tag = 0x1000 | (i % 2);	// two tags
		ssize_t r = fi_tsenddata(a.ep, out[i].data(), out[i].size(), nullptr, 1000 + i, to_b,
					 tag, &sctx[i]);
		ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
	}
	// Let them all land unexpected.
	drive({&a, &b}, [&] { return false; }, 300ms);
	// Receive tag ...1 first (ignoring nothing), then the rest with a
	// receive that ignores the low bit.
	std::vector<std::uint8_t> in(100000);
	std::vector<int> order;
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < kN / 2; k++) {
			int rctx;
			ssize_t r = fi_trecv(b.ep, in.data(), in.size(), nullptr, to_a,
					     pass == 0 ? 0x1001 : 0x1000, pass == 0 ? 0 : 1, &rctx);
			ASSERT_EQ(r, 0);
			auto d = wait_done(b, &rctx, {&a, &b});
			ASSERT_TRUE(d);
			ASSERT_EQ(d->err, 0);
			ASSERT_TRUE(d->e.flags & FI_REMOTE_CQ_DATA);
			int i = static_cast<int>(d->e.data - 1000);
			ASSERT_GE(i, 0);
			ASSERT_LT(i, kN);
			order.push_back(i);
			EXPECT_EQ(d->e.tag, 0x1000u | (i % 2));
			ASSERT_EQ(d->e.len, out[i].size());
			EXPECT_EQ(std::memcmp(in.data(), out[i].data(), out[i].size()), 0) << "message " << i;
		}
	}
	// Odd ones first in send order, then the even ones in send order.
	std::vector<int> want;
	for (int i = 1; i < kN; i += 2)
		want.push_back(i);
	for (int i = 0; i < kN; i += 2)
		want.push_back(i);
	EXPECT_EQ(order, want);
	for (int i = 0; i < kN; i++) {
		auto d = wait_done(a, &sctx[i], {&a, &b});
		ASSERT_TRUE(d);
		EXPECT_EQ(d->err, 0);
	}
}

// A receive directed at one source takes only its messages; one from any
// source takes them in arrival order.  Three nodes on a switch.
TEST_F(FabricTest, DirectedReceiveAmongThreeNodes)
{
	Fab a(c(), 0), b(c(), 1), z(c(), 2);
	ASSERT_TRUE(a.ok && b.ok && z.ok);
	fi_addr_t a_to_z = a.insert(z), b_to_z = b.insert(z);
	fi_addr_t z_to_a = z.insert(a), z_to_b = z.insert(b);
	char ma[] = "from a", mb[] = "from b";
	int sa, sb;
	ASSERT_EQ(fi_send(a.ep, ma, sizeof(ma), nullptr, a_to_z, &sa), 0);
	ASSERT_EQ(fi_send(b.ep, mb, sizeof(mb), nullptr, b_to_z, &sb), 0);
	ASSERT_TRUE(wait_done(a, &sa, {&a, &b, &z}));
	ASSERT_TRUE(wait_done(b, &sb, {&a, &b, &z}));
	char in[32] = {};
	int r1;
	ASSERT_EQ(fi_recv(z.ep, in, sizeof(in), nullptr, z_to_b, &r1), 0);
	auto d = wait_done(z, &r1, {&a, &b, &z});
	ASSERT_TRUE(d);
	EXPECT_STREQ(in, "from b");
	EXPECT_EQ(d->src, z_to_b);
	int r2;
	ASSERT_EQ(fi_recv(z.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &r2), 0);
	d = wait_done(z, &r2, {&a, &b, &z});
	ASSERT_TRUE(d);
	EXPECT_STREQ(in, "from a");
	EXPECT_EQ(d->src, z_to_a);
}

// A message longer than its receive buffer: the buffer is filled, the
// completion is an FI_ETRUNC error saying how much did not fit; the send
// itself succeeds.  Eager and rendezvous alike.
TEST_F(FabricTest, TruncatedReceive)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	for (std::size_t len : {std::size_t{500}, std::size_t{5000}, std::size_t{200000}}) {
		SCOPED_TRACE("len " + std::to_string(len));
		auto out = pattern(len, 5);
		std::vector<std::uint8_t> in(100, 0);
		int rctx, sctx;
		ASSERT_EQ(fi_recv(b.ep, in.data(), in.size(), nullptr, to_a, &rctx), 0);
		ASSERT_EQ(fi_send(a.ep, out.data(), len, nullptr, to_b, &sctx), 0);
		auto rd = wait_done(b, &rctx, {&a, &b});
		ASSERT_TRUE(rd);
		EXPECT_EQ(rd->err, FI_ETRUNC);
		EXPECT_EQ(rd->olen, len - 100);
		EXPECT_EQ(std::memcmp(in.data(), out.data(), 100), 0);
		auto sd = wait_done(a, &sctx, {&a, &b});
		ASSERT_TRUE(sd);
		EXPECT_EQ(sd->err, 0);
	}
}

// Many more messages than the peer's receive queue holds, none of them
// received yet: the queue refuses some (ENOBUFS), the provider sends them
// again, and every one arrives once, in order.
TEST_F(FabricTest, FloodBeyondTheReceiveQueueKeepsOrder)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	constexpr int kN = 900;
	std::vector<std::uint32_t> vals(kN);
	std::vector<int> sctx(kN);
	ASSERT_NO_FATAL_FAILURE(tsend_all(a, to_b, 9, sctx, [&](int i) {
		vals[i] = static_cast<std::uint32_t>(i);
		return std::pair<const void *, std::size_t>{&vals[i], 4};
	}));
	// Only the sender progresses for a while: the receiver takes nothing.
	drive({&a}, [&] { return false; }, 1s);
	std::vector<std::uint32_t> got;
	std::uint32_t v;
	while (got.size() < kN) {
		int rctx;
		ASSERT_EQ(fi_trecv(b.ep, &v, 4, nullptr, to_a, 9, 0, &rctx), 0);
		auto d = wait_done(b, &rctx, {&a, &b});
		ASSERT_TRUE(d) << "message " << got.size() << " never came";
		ASSERT_EQ(d->err, 0);
		got.push_back(v);
	}
	for (int i = 0; i < kN; i++)
		ASSERT_EQ(got[i], static_cast<std::uint32_t>(i)) << "out of order at " << i;
	EXPECT_EQ(sends_completed(a, sctx, {&a, &b}), kN);
}

namespace {

// kN messages of kLen bytes tagged 9 from a to b while b takes none, then
// taken in turn: each arrives whole, once, in order, and every send
// completes.
void flood_then_take(Fab &a, Fab &b, int kN, std::size_t kLen)
{
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	std::vector<std::vector<std::uint8_t>> msgs(kN);
	std::vector<int> sctx(kN);
	ASSERT_NO_FATAL_FAILURE(tsend_all(a, to_b, 9, sctx, [&](int i) {
		msgs[i] = pattern(kLen, static_cast<unsigned>(i));
		return std::pair<const void *, std::size_t>{msgs[i].data(), kLen};
	}));
	drive({&a}, [&] { return false; }, 1s);
	std::vector<std::uint8_t> in(kLen + 1);
	for (int i = 0; i < kN; i++) {
		int rctx;
		ASSERT_EQ(fi_trecv(b.ep, in.data(), in.size(), nullptr, to_a, 9, 0, &rctx), 0);
		auto d = wait_done(b, &rctx, {&a, &b});
		ASSERT_TRUE(d) << "message " << i << " never came";
		ASSERT_EQ(d->err, 0);
		ASSERT_EQ(d->e.len, kLen);
		ASSERT_TRUE(std::equal(msgs[i].begin(), msgs[i].end(), in.begin()))
			<< "message " << i << " differs (out of order or torn)";
	}
	EXPECT_EQ(sends_completed(a, sctx, {&a, &b}), kN);
}

} // namespace

// The same with messages sent in pieces (3 sends each): refused pieces
// go again in turn, and every message arrives whole, once, in order.
TEST_F(FabricTest, FloodOfPiecesKeepsOrder)
{
	// As over a module before ABI 26: 2500 bytes in three pieces.
	ASSERT_EQ(setenv("FI_MULTIEDGE_LARGE_SENDS", "0", 1), 0);
	Fab a(c(), 0), b(c(), 1);
	unsetenv("FI_MULTIEDGE_LARGE_SENDS");
	ASSERT_TRUE(a.ok && b.ok);
	flood_then_take(a, b, 200, 2500);
}

// The same with messages of one send of several packets each (ABI 26):
// 300 of them, more than the receiver's queue holds (ME_RECV_QUEUE), and
// the sender's large slots (64) held by the refused ones: they go again
// in turn.
TEST_F(FabricTest, FloodOfLargeSendsKeepsOrder)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	flood_then_take(a, b, 300, 12000);
}

// A receiver that sends no large sends itself (FI_MULTIEDGE_LARGE_SENDS=0)
// still takes them from a peer that does.
TEST_F(FabricTest, LargeSendsReachAnEndpointWithoutThem)
{
	Fab a(c(), 0);
	ASSERT_EQ(setenv("FI_MULTIEDGE_LARGE_SENDS", "0", 1), 0);
	Fab b(c(), 1);
	unsetenv("FI_MULTIEDGE_LARGE_SENDS");
	ASSERT_TRUE(a.ok && b.ok);
	flood_then_take(a, b, 20, 16000);
}

// CPU time this thread has used, in microseconds.
long long thread_cpu_us()
{
	rusage u{};
	getrusage(RUSAGE_THREAD, &u);
	return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000ll + u.ru_utime.tv_usec +
	       u.ru_stime.tv_usec;
}

// More unexpected messages than the receiver may hold (64 KiB of them
// here, FI_MULTIEDGE_MAX_UNEXPECTED): it stops taking them, the module's
// queue (ME_RECV_QUEUE) fills and refuses, and the sender waits and sends
// them again; a blocking read meanwhile sleeps instead of spinning on the
// messages it may not take.  Once receives are posted every message
// arrives once, in order.
TEST_F(FabricTest, UnexpectedMessagesAreBounded)
{
	constexpr std::size_t kCap = 65536, kLen = 900;
	constexpr int kN = 900;
	Fab a(c(), 0);
	ASSERT_EQ(setenv("FI_MULTIEDGE_MAX_UNEXPECTED", std::to_string(kCap).c_str(), 1), 0);
	Fab b(c(), 1);
	unsetenv("FI_MULTIEDGE_MAX_UNEXPECTED");
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	std::vector<std::vector<std::uint8_t>> msgs(kN);
	std::vector<int> sctx(kN);
	ASSERT_NO_FATAL_FAILURE(tsend_all(a, to_b, 5, sctx, [&](int i) {
		msgs[i] = pattern(kLen, static_cast<unsigned>(i));
		return std::pair<const void *, std::size_t>{msgs[i].data(), kLen};
	}));
	// Both progress for 2 s; b posts no receive.
	drive({&a, &b}, [] { return false; }, 2s);
	int send_done = 0;
	for (int i = 0; i < kN; i++)
		if (auto d = a.take(&sctx[i])) {
			EXPECT_EQ(d->err, 0) << "send " << i;
			send_done++;
		}
	std::printf("  sends accepted while the receiver posted nothing: %d of %d\n", send_done, kN);
	EXPECT_GT(send_done, 0);
	EXPECT_LE(send_done, static_cast<int>(ME_RECV_QUEUE + kCap / kLen + 64))
		<< "the receiver took more than it may hold";

	long long cpu0 = thread_cpu_us();
	fi_cq_tagged_entry e{};
	EXPECT_EQ(fi_cq_sread(b.cq, &e, 1, nullptr, 300), -FI_EAGAIN);
	long long cpu = thread_cpu_us() - cpu0;
	EXPECT_LT(cpu, 150000) << "a 300 ms blocking read spun (" << cpu << " us of CPU)";

	std::vector<std::uint8_t> buf(kLen);
	for (int i = 0; i < kN; i++) {
		int rctx;
		ASSERT_EQ(fi_trecv(b.ep, buf.data(), kLen, nullptr, to_a, 5, 0, &rctx), 0);
		auto d = wait_done(b, &rctx, {&a, &b});
		if (!d) {
			metest::dump_node(c().dev(0), 0);
			metest::dump_node(c().dev(1), 1);
		}
		ASSERT_TRUE(d) << "message " << i << " never came";
		ASSERT_EQ(d->err, 0);
		ASSERT_EQ(buf, msgs[i]) << "message " << i << " differs (out of order?)";
	}
	drive({&a, &b}, [&] {
		for (int i = 0; i < kN; i++)
			if (a.take(&sctx[i]))
				send_done++;
		return send_done == kN;
	});
	EXPECT_EQ(send_done, kN);
}

// An endpoint sends to itself (FI_LOCAL_COMM: MPI ranks do, in
// collectives): small and large, matched like any other message.
TEST_F(FabricTest, SendToItself)
{
	Fab a(c(), 0);
	ASSERT_TRUE(a.ok);
	fi_addr_t self = a.insert(a);
	for (std::size_t len : {std::size_t{8}, std::size_t{300000}}) {
		auto out = pattern(len, 11);
		std::vector<std::uint8_t> in(len);
		int sctx, rctx;
		ASSERT_EQ(fi_tsend(a.ep, out.data(), len, nullptr, self, 3, &sctx), 0);
		ASSERT_EQ(fi_trecv(a.ep, in.data(), len, nullptr, self, 3, 0, &rctx), 0);
		auto sd = wait_done(a, &sctx, {&a});
		auto rd = wait_done(a, &rctx, {&a});
		ASSERT_TRUE(sd && rd);
		EXPECT_EQ(rd->err, 0);
		EXPECT_EQ(rd->e.len, len);
		EXPECT_EQ(rd->src, self);
		EXPECT_EQ(in, out);
	}
}

// Bad input answers with the errors libfabric programs expect, and
// nothing is sent.
TEST_F(FabricTest, BadInput)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b);
	char buf[64] = "x";
	int ctx;
	EXPECT_EQ(fi_send(a.ep, buf, 8, nullptr, 12345, &ctx), -FI_EINVAL) << "unknown fi_addr";
	EXPECT_EQ(fi_inject(a.ep, buf, a.info->tx_attr->inject_size + 1, to_b), -FI_EMSGSIZE);
	// Garbage addresses are not inserted.
	char junk[32] = "not-an-address";
	fi_addr_t out = 0;
	EXPECT_EQ(fi_av_insert(a.av, junk, 1, &out, 0, nullptr), 0);
	EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
	// Cancel a posted receive: FI_ECANCELED; cancel twice: -FI_ENOENT.
	int rctx;
	ASSERT_EQ(fi_recv(b.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rctx), 0);
	EXPECT_EQ(fi_cancel(&b.ep->fid, &rctx), 0);
	EXPECT_EQ(fi_cancel(&b.ep->fid, &rctx), -FI_ENOENT);
	b.harvest();
	auto d = b.take(&rctx);
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_ECANCELED);
	// A peek that finds nothing: FI_ENOMSG.
	fi_msg_tagged m{};
	m.addr = FI_ADDR_UNSPEC;
	m.tag = 42;
	m.context = &rctx;
	ASSERT_EQ(fi_trecvmsg(b.ep, &m, FI_PEEK), 0);
	b.harvest();
	d = b.take(&rctx);
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_ENOMSG);
	// An endpoint cannot be bound once enabled (counters: CounterBadInput).
	fid_cq *cq2 = nullptr;
	fi_cq_attr attr{};
	attr.format = FI_CQ_FORMAT_CONTEXT;
	ASSERT_EQ(fi_cq_open(a.domain, &attr, &cq2, nullptr), 0);
	EXPECT_EQ(fi_ep_bind(a.ep, &cq2->fid, FI_RECV), -FI_EOPBADSTATE);
	EXPECT_EQ(fi_close(&cq2->fid), 0);
	// One endpoint per domain; a busy domain does not close.
	fid_ep *ep2 = nullptr;
	EXPECT_EQ(fi_endpoint(a.domain, a.info, &ep2, nullptr), -FI_ENOSPC);
	EXPECT_EQ(fi_close(&a.domain->fid), -FI_EBUSY);
	EXPECT_EQ(fi_close(&a.cq->fid), -FI_EBUSY) << "a bound CQ closed";
}

// Peek, claim and receive the claimed message (MPI_Improbe, MPI_Mrecv).
TEST_F(FabricTest, PeekAndClaim)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	auto out = pattern(3000, 1);	// rendezvous
	int sctx;
	ASSERT_EQ(fi_tsend(a.ep, out.data(), out.size(), nullptr, to_b, 5, &sctx), 0);
	int pctx;
	fi_msg_tagged m{};
	m.addr = to_a;
	m.tag = 5;
	m.context = &pctx;
	std::optional<Done> peeked;
	ASSERT_TRUE(drive({&a, &b}, [&] {
		if (fi_trecvmsg(b.ep, &m, FI_PEEK | FI_CLAIM) != 0)
			return false;
		b.harvest();
		peeked = b.take(&pctx);
		return peeked && peeked->err == 0;
	}));
	EXPECT_EQ(peeked->e.len, out.size());
	EXPECT_EQ(peeked->e.tag, 5u);
	// A plain receive does not get the claimed message.
	std::vector<std::uint8_t> in(4000);
	int other;
	ASSERT_EQ(fi_trecv(b.ep, in.data(), in.size(), nullptr, to_a, 5, 0, &other), 0);
	iovec iov{in.data(), in.size()};
	m.msg_iov = &iov;
	m.iov_count = 1;
	ASSERT_EQ(fi_trecvmsg(b.ep, &m, FI_CLAIM), 0);
	auto d = wait_done(b, &pctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_EQ(std::memcmp(in.data(), out.data(), out.size()), 0);
	EXPECT_FALSE(b.take(&other)) << "the claimed message went to another receive";
	EXPECT_EQ(fi_cancel(&b.ep->fid, &other), 0);
	ASSERT_TRUE(wait_done(a, &sctx, {&a, &b}));
}

// FI_MULTI_RECV (MPICH's active messages post their buffers so): one
// buffer takes message after message, each at an 8-byte boundary, the
// waiting ones when it is posted and the later ones as they come, eager,
// in pieces and by rendezvous, until less than FI_OPT_MIN_MULTI_RECV is
// left; the completion of the last says the buffer is handed back, and
// the next message goes to the next receive.
TEST_F(FabricTest, MultiReceiveBufferTakesManyMessages)
{
	Fab a(c(), 0), b(c(), 1, false, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_MULTI_RECV);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	EXPECT_TRUE(b.info->caps & FI_MULTI_RECV);
	EXPECT_TRUE(b.info->rx_attr->caps & FI_MULTI_RECV);
	std::size_t min = 0, len = sizeof(min);
	ASSERT_EQ(fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len), 0);
	EXPECT_GT(min, 0u);
	min = 4096;
	ASSERT_EQ(fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)), 0);
	min = 0;
	ASSERT_EQ(fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len), 0);
	EXPECT_EQ(min, 4096u);
	// Bad input.
	EXPECT_EQ(fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, 4), -FI_EINVAL);
	EXPECT_EQ(fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &min, sizeof(min)),
		  -FI_ENOPROTOOPT);
	std::vector<std::uint8_t> tbuf(8192);
	iovec tiov{tbuf.data(), tbuf.size()};
	fi_msg_tagged tm{};
	tm.msg_iov = &tiov;
	tm.iov_count = 1;
	tm.addr = FI_ADDR_UNSPEC;
	EXPECT_EQ(fi_trecvmsg(b.ep, &tm, FI_MULTI_RECV), -FI_EINVAL) << "tagged multi-receive";

	// Each message carries its index as its data and `pattern(size, index)`.
	struct Sent {
		std::vector<std::uint8_t> bytes;
		int ctx = 0;
	};
	std::vector<Sent> sent;
	sent.reserve(16);	// their contexts' addresses are posted
	auto send = [&](std::size_t size) {
		sent.push_back({pattern(size, static_cast<unsigned>(sent.size()) + 1), 0});
	};
	auto post = [&](std::size_t i) {
		ssize_t r;
		while ((r = fi_senddata(a.ep, sent[i].bytes.data(), sent[i].bytes.size(), nullptr, i,
					to_b, &sent[i].ctx)) == -FI_EAGAIN)
			a.harvest();
		ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
	};
	// A buffer's completions: each message where it should be, whole;
	// only the last says FI_MULTI_RECV.
	auto check = [&](std::vector<std::uint8_t> &buf, void *ctx, std::size_t first,
			 std::size_t last) {
		std::size_t off = 0;
		for (std::size_t i = first; i <= last; i++) {
			SCOPED_TRACE("message " + std::to_string(i));
			std::optional<Done> d;
			ASSERT_TRUE(drive({&a, &b}, [&] {
				for (auto it = b.got.begin(); it != b.got.end(); ++it)
					if (it->e.op_context == ctx && it->e.data == i) {
						d = *it;
						b.got.erase(it);
						return true;
					}
				return false;
			}));
			EXPECT_EQ(d->err, 0);
			EXPECT_EQ(d->e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
			EXPECT_EQ(d->e.buf, buf.data() + off);
			ASSERT_EQ(d->e.len, sent[i].bytes.size());
			EXPECT_EQ(std::memcmp(buf.data() + off, sent[i].bytes.data(), d->e.len), 0);
			EXPECT_EQ((d->e.flags & FI_MULTI_RECV) != 0, i == last);
			off = (off + d->e.len + 7) & ~std::size_t{7};
		}
	};

	// Three wait unexpected: eager, middle, rendezvous.  A 24 KiB buffer
	// takes all three, after which 1472 bytes are left: handed back.
	for (std::size_t size : {100, 2000, 20000})
		send(size);
	for (std::size_t i = 0; i < 3; i++)
		post(i);
	drive({&a, &b}, [&] { return false; }, 300ms);
	// Posts `buf` as a multi-receive buffer with context `ctx`.
	auto post_multi = [&](std::vector<std::uint8_t> &buf, void *ctx) {
		iovec iov{buf.data(), buf.size()};
		fi_msg msg{};
		msg.msg_iov = &iov;
		msg.iov_count = 1;
		msg.addr = FI_ADDR_UNSPEC;
		msg.context = ctx;
		return fi_recvmsg(b.ep, &msg, FI_MULTI_RECV | FI_COMPLETION);
	};
	std::vector<std::uint8_t> m1(24576);
	int c1, c2, c3, c4;
	ASSERT_EQ(post_multi(m1, &c1), 0);
	check(m1, &c1, 0, 2);

	// One posted first takes them as they come: 8 + 500 + 1000 + 2000 +
	// 5000 + 300 bytes leave 7568 of 16 KiB; the next 5000 leave 2568.
	std::vector<std::uint8_t> m2(16384);
	ASSERT_EQ(post_multi(m2, &c2), 0);
	for (std::size_t size : {8, 500, 1000, 2000, 5000, 300, 5000, 77})
		send(size);
	for (std::size_t i = 3; i < sent.size(); i++)
		post(i);
	check(m2, &c2, 3, 9);
	// The one after went to the next receive.
	std::vector<std::uint8_t> in(100);
	ASSERT_EQ(fi_recv(b.ep, in.data(), in.size(), nullptr, to_a, &c3), 0);
	auto d = wait_done(b, &c3, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->e.data, 10u);
	EXPECT_EQ(d->e.len, 77u);
	EXPECT_EQ(std::memcmp(in.data(), sent[10].bytes.data(), 77), 0);
	for (auto &s : sent) {
		auto sd = wait_done(a, &s.ctx, {&a, &b});
		ASSERT_TRUE(sd);
		EXPECT_EQ(sd->err, 0);
	}
	// Cancelled, an unused one is handed back at once.
	ASSERT_EQ(post_multi(m2, &c4), 0);
	ASSERT_EQ(fi_cancel(&b.ep->fid, &c4), 0);
	d = wait_done(b, &c4, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_ECANCELED);
	EXPECT_TRUE(d->e.flags & FI_MULTI_RECV);

	// With a minimum of 0 a buffer is handed back when full: two 8-byte
	// messages fill 16 bytes, the second says so.
	min = 0;
	ASSERT_EQ(fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)), 0);
	std::vector<std::uint8_t> m3(16);
	int c5;
	ASSERT_EQ(post_multi(m3, &c5), 0);
	send(8);
	send(8);
	post(11);
	post(12);
	check(m3, &c5, 11, 12);
	for (std::size_t i = 11; i < 13; i++)
		ASSERT_TRUE(wait_done(a, &sent[i].ctx, {&a, &b}));
}

// A rendezvous from read-only memory (it cannot be registered): the
// provider sends a copy.
TEST_F(FabricTest, SendFromReadOnlyMemory)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	constexpr std::size_t kLen = 256 * 1024;
	void *p = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(p, MAP_FAILED);
	auto out = pattern(kLen, 3);
	std::memcpy(p, out.data(), kLen);
	ASSERT_EQ(::mprotect(p, kLen, PROT_READ), 0);
	std::vector<std::uint8_t> in(kLen);
	int rctx, sctx;
	ASSERT_EQ(fi_recv(b.ep, in.data(), in.size(), nullptr, to_a, &rctx), 0);
	ASSERT_EQ(fi_send(a.ep, p, kLen, nullptr, to_b, &sctx), 0);
	auto rd = wait_done(b, &rctx, {&a, &b});
	auto sd = wait_done(a, &sctx, {&a, &b});
	ASSERT_TRUE(rd && sd);
	EXPECT_EQ(rd->err, 0);
	EXPECT_EQ(sd->err, 0);
	EXPECT_EQ(in, out);
	::munmap(p, kLen);
}

// fi_cq_sread sleeps until a message comes (the device polls
// POLLRDBAND for it) and gives up after its timeout.
TEST_F(FabricTest, BlockingReadWakesForAMessage)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	char in[16] = {};
	int rctx;
	ASSERT_EQ(fi_recv(b.ep, in, sizeof(in), nullptr, to_a, &rctx), 0);
	fi_cq_tagged_entry e{};
	auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(fi_cq_sread(b.cq, &e, 1, nullptr, 200), -FI_EAGAIN);
	EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
	std::thread sender([&] {
		std::this_thread::sleep_for(300ms);
		char msg[] = "wake";
		int sctx;
		EXPECT_EQ(fi_send(a.ep, msg, sizeof(msg), nullptr, to_b, &sctx), 0);
		std::optional<Done> d;
		drive({&a}, [&] { return (d = a.take(&sctx)).has_value(); });
		EXPECT_TRUE(d);
	});
	t0 = std::chrono::steady_clock::now();
	ssize_t n = fi_cq_sread(b.cq, &e, 1, nullptr, 20000);
	auto waited = std::chrono::steady_clock::now() - t0;
	sender.join();
	ASSERT_EQ(n, 1) << fi_err(static_cast<int>(n));
	EXPECT_EQ(e.op_context, &rctx);
	EXPECT_STREQ(in, "wake");
	EXPECT_LT(waited, 10s);
	int fd = -1;
	EXPECT_EQ(fi_control(&b.cq->fid, FI_GETWAIT, &fd), 0);
	EXPECT_EQ(fd >= 0, true);
}

// A registered region of `len` bytes and the raw key a peer maps.
struct Target {
	Target(Fab &f, std::size_t len, std::uint64_t access) : mem(len, 0)
	{
		EXPECT_EQ(fi_mr_reg(f.domain, mem.data(), len, access, 0, 0, 0, &mr, nullptr), 0);
		EXPECT_EQ(fi_mr_key(mr), FI_KEY_NOTAVAIL) << "keys are raw";
		std::size_t size = 4;
		std::uint64_t base = 0;
		EXPECT_EQ(fi_mr_raw_attr(mr, &base, raw, &size, 0), -FI_ETOOSMALL);
		EXPECT_EQ(size, sizeof(raw));
		EXPECT_EQ(fi_mr_raw_attr(mr, &base, raw, &size, 0), 0);
		EXPECT_EQ(base, reinterpret_cast<std::uintptr_t>(mem.data()));
	}
	~Target() { EXPECT_EQ(fi_close(&mr->fid), 0); }
	std::vector<std::uint8_t> mem;
	fid_mr *mr = nullptr;
	std::uint8_t raw[16] = {};
};

std::uint64_t map_key(Fab &f, std::uint8_t *raw)
{
	std::uint64_t key = 0;
	EXPECT_EQ(fi_mr_map_raw(f.domain, 0, raw, 16, &key, 0), 0);
	return key;
}

namespace {

// fi_write, fi_read, fi_writedata and fi_inject_write from a onto b's
// region by its raw key; the module's checks come back as errors.
void rma_with_raw_keys(Fab &a, Fab &b)
{
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b);
	Target t(b, 1 << 20, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw);
	auto out = pattern(100000, 21);
	int ctx;
	ASSERT_EQ(fi_write(a.ep, out.data(), out.size(), nullptr, to_b, 4096, key, &ctx), 0);
	auto d = wait_done(a, &ctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_TRUE(d->e.flags & FI_RMA);
	EXPECT_TRUE(d->e.flags & FI_WRITE);
	EXPECT_TRUE(std::equal(out.begin(), out.end(), t.mem.begin() + 4096));
	std::vector<std::uint8_t> back(out.size());
	ASSERT_EQ(fi_read(a.ep, back.data(), back.size(), nullptr, to_b, 4096, key, &ctx), 0);
	d = wait_done(a, &ctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_EQ(back, out);
	// With data: the target's queue gets it.
	ASSERT_EQ(fi_writedata(a.ep, out.data(), 64, nullptr, 0xabcd, to_b, 0, key, &ctx), 0);
	ASSERT_TRUE(wait_done(a, &ctx, {&a, &b}));
	std::optional<Done> remote;
	ASSERT_TRUE(drive({&a, &b}, [&] {
		for (auto it = b.got.begin(); it != b.got.end(); ++it)
			if (it->e.flags & FI_REMOTE_CQ_DATA) {
				remote = *it;
				b.got.erase(it);
				return true;
			}
		return false;
	}));
	EXPECT_EQ(remote->e.data, 0xabcdu);
	EXPECT_EQ(remote->e.len, 64u);
	EXPECT_TRUE(remote->e.flags & FI_REMOTE_WRITE);
	EXPECT_EQ(fi_writedata(a.ep, out.data(), 64, nullptr, 1ULL << 40, to_b, 0, key, &ctx),
		  -FI_EINVAL) << "remote data beyond 32 bits";
	// Inject: the buffer is free at once.
	std::uint8_t small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	ASSERT_EQ(fi_inject_write(a.ep, small, 8, to_b, 0, key), 0);
	std::memset(small, 0, 8);
	ASSERT_EQ(fi_read(a.ep, back.data(), 8, nullptr, to_b, 0, key, &ctx), 0);
	d = wait_done(a, &ctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(back[0], 1);
	EXPECT_EQ(back[7], 8);

	// Refusals: beyond the region, a wrong key, a region without the access.
	ASSERT_EQ(fi_write(a.ep, out.data(), 100, nullptr, to_b, (1 << 20) - 50, key, &ctx), 0);
	d = wait_done(a, &ctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, ERANGE);
	std::uint8_t wrong[16];
	std::memcpy(wrong, t.raw, 16);
	wrong[8] ^= 1;
	std::uint64_t bad = map_key(a, wrong);
	ASSERT_EQ(fi_write(a.ep, out.data(), 100, nullptr, to_b, 0, bad, &ctx), 0);
	d = wait_done(a, &ctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_EACCES);
	Target ro(b, 4096, FI_REMOTE_READ);
	std::uint64_t rokey = map_key(a, ro.raw);
	ASSERT_EQ(fi_write(a.ep, out.data(), 100, nullptr, to_b, 0, rokey, &ctx), 0);
	d = wait_done(a, &ctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_EACCES) << "written into a read-only region";
	// Keys: garbage is not mapped, an unmapped key is refused.
	std::uint8_t junk[16] = {};
	std::uint64_t k = 0;
	EXPECT_EQ(fi_mr_map_raw(a.domain, 0, junk, 16, &k, 0), -FI_EINVAL);
	EXPECT_EQ(fi_mr_map_raw(a.domain, 0, t.raw, 8, &k, 0), -FI_EINVAL);
	EXPECT_EQ(fi_mr_unmap_key(a.domain, bad), 0);
	EXPECT_EQ(fi_mr_unmap_key(a.domain, bad), -FI_EINVAL);
	EXPECT_EQ(fi_write(a.ep, out.data(), 100, nullptr, to_b, 0, bad, &ctx), -FI_EINVAL);
}

} // namespace

TEST_F(FabricTest, RmaWithRawKeys)
{
	Fab a(c(), 0, true), b(c(), 1, true);
	rma_with_raw_keys(a, b);
}

// The same between two endpoints of one node: through the module's
// loopback (ABI 20), with the same checks and answers.
TEST_F(FabricTest, RmaBetweenEndpointsOfOneNode)
{
	Fab a(c(), 0, true), b(c(), 0, true);
	rma_with_raw_keys(a, b);
}

// RMA to the endpoint's own node, checked as the module checks a peer.
TEST_F(FabricTest, RmaToItself)
{
	Fab a(c(), 0, true);
	ASSERT_TRUE(a.ok);
	fi_addr_t self = a.insert(a);
	Target t(a, 8192, FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw);
	auto out = pattern(5000, 4);
	int ctx;
	ASSERT_EQ(fi_write(a.ep, out.data(), out.size(), nullptr, self, 100, key, &ctx), 0);
	auto d = wait_done(a, &ctx, {&a});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_TRUE(std::equal(out.begin(), out.end(), t.mem.begin() + 100));
	std::vector<std::uint8_t> back(10);
	ASSERT_EQ(fi_read(a.ep, back.data(), back.size(), nullptr, self, 100, key, &ctx), 0);
	d = wait_done(a, &ctx, {&a});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_EACCES) << "read from a region without remote read";
	ASSERT_EQ(fi_write(a.ep, out.data(), 5000, nullptr, self, 4000, key, &ctx), 0);
	d = wait_done(a, &ctx, {&a});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, ERANGE);
}

// Drives `fabs` until counter `k` has counted `value` completions and
// `errors` failures (or more: the caller checks); false at the timeout.
bool counted(fid_cntr *k, std::uint64_t value, std::uint64_t errors,
	     std::initializer_list<Fab *> fabs)
{
	return drive(fabs, [&] { return fi_cntr_read(k) >= value && fi_cntr_readerr(k) >= errors; });
}

// Sends `msg` from `from` to `to` after 300 ms, on a thread of its own,
// and drives `from` until the send completed.
std::thread send_later(Fab &from, fi_addr_t to, const char *msg)
{
	return std::thread([&from, to, msg] {
		std::this_thread::sleep_for(300ms);
		int sctx;
		EXPECT_EQ(fi_send(from.ep, msg, std::strlen(msg) + 1, nullptr, to, &sctx), 0);
		std::optional<Done> d;
		drive({&from}, [&] { return (d = from.take(&sctx)).has_value(); });
		EXPECT_TRUE(d);
	});
}

// fi_getinfo offers counters (cntr_cnt) but not FI_RMA_EVENT: a peer's
// reads and writes of a region are not seen by its provider.
TEST_F(FabricTest, CountersInGetinfo)
{
	Cluster::Enter in(c().ns(0));
	ASSERT_TRUE(in.ok());
	fi_info *h = hints(), *info = nullptr;
	h->domain_attr->cntr_cnt = 4;
	ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
	EXPECT_GE(info->domain_attr->cntr_cnt, 4u);
	fi_freeinfo(info);
	fi_freeinfo(h);
	h = hints();
	h->domain_attr->cntr_cnt = 1 << 20;
	EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), -FI_ENODATA)
		<< "more counters than a domain offers";
	fi_freeinfo(h);
	h = hints(FI_EP_RDM, FI_MSG | FI_RMA | FI_RMA_EVENT);
	h->domain_attr->mr_mode = FI_MR_RAW | FI_MR_PROV_KEY;
	EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), -FI_ENODATA)
		<< "FI_RMA_EVENT";
	fi_freeinfo(h);
}

// Counters count every send and receive that completes, eager, in pieces
// and by rendezvous, with a CQ entry or without one (FI_SELECTIVE_COMPLETION
// without FI_COMPLETION, fi_inject), and the failed ones as errors, apart.
TEST_F(FabricTest, CountersCountSendsAndReceives)
{
	fid_cntr *sent = nullptr, *a_recvd = nullptr, *recvd = nullptr;
	Fab a(c(), 0, false, FI_CQ_FORMAT_TAGGED, nullptr, [&](Fab &f) {
		sent = f.counter(FI_SEND);
		a_recvd = f.counter(FI_RECV);
		f.cq_flags |= FI_SELECTIVE_COMPLETION;
	});
	Fab b(c(), 1, false, FI_CQ_FORMAT_TAGGED, nullptr,
	      [&](Fab &f) { recvd = f.counter(FI_RECV); });
	ASSERT_TRUE(a.ok && b.ok && sent && a_recvd && recvd);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	constexpr std::size_t kMax = 100000;
	std::vector<std::vector<std::uint8_t>> in(8, std::vector<std::uint8_t>(kMax));
	int rctx[8];
	for (int i = 0; i < 7; i++)
		ASSERT_EQ(fi_recv(b.ep, in[i].data(), kMax, nullptr, to_a, &rctx[i]), 0);
	ASSERT_EQ(fi_trecv(b.ep, in[7].data(), kMax, nullptr, to_a, 9, 0, &rctx[7]), 0);
	// Eager, in pieces, rendezvous: by fi_send (no CQ entry: selective)
	// and by fi_sendmsg with FI_COMPLETION (an entry); fi_inject; tagged.
	auto out = pattern(kMax, 5);
	int sctx[8];
	std::vector<void *> reported;
	int k = 0;
	for (std::size_t len : {std::size_t{8}, std::size_t{2000}, kMax}) {
		ASSERT_EQ(fi_send(a.ep, out.data(), len, nullptr, to_b, &sctx[k++]), 0);
		iovec iov{out.data(), len};
		fi_msg m{};
		m.msg_iov = &iov;
		m.iov_count = 1;
		m.addr = to_b;
		m.context = &sctx[k++];
		reported.push_back(m.context);
		ASSERT_EQ(fi_sendmsg(a.ep, &m, FI_COMPLETION), 0);
	}
	ASSERT_EQ(fi_inject(a.ep, out.data(), 8, to_b), 0);
	ASSERT_EQ(fi_tsend(a.ep, out.data(), 8, nullptr, to_b, 9, &sctx[k++]), 0);
	ASSERT_TRUE(counted(sent, 8, 0, {&a, &b})) << fi_cntr_read(sent) << " sends counted";
	ASSERT_TRUE(counted(recvd, 8, 0, {&a, &b})) << fi_cntr_read(recvd) << " receives counted";
	a.harvest();
	b.harvest();
	EXPECT_EQ(fi_cntr_read(sent), 8u);
	EXPECT_EQ(fi_cntr_readerr(sent), 0u);
	EXPECT_EQ(fi_cntr_read(recvd), 8u);
	EXPECT_EQ(fi_cntr_readerr(recvd), 0u);
	EXPECT_EQ(fi_cntr_read(a_recvd), 0u) << "a received nothing";
	EXPECT_EQ(a.got.size(), reported.size()) << "CQ entries of the sends asking for one";
	for (void *ctx : reported)
		EXPECT_TRUE(a.take(ctx));
	EXPECT_EQ(b.got.size(), 8u);

	// A truncated receive and a cancelled one count as errors of b's
	// receives; the send of the truncated message succeeded.
	char small[4];
	int tctx, cctx;
	ASSERT_EQ(fi_recv(b.ep, small, sizeof(small), nullptr, to_a, &tctx), 0);
	ASSERT_EQ(fi_send(a.ep, out.data(), 8, nullptr, to_b, &sctx[0]), 0);
	ASSERT_TRUE(counted(recvd, 8, 1, {&a, &b}));
	ASSERT_EQ(fi_recv(b.ep, small, sizeof(small), nullptr, to_a, &cctx), 0);
	ASSERT_EQ(fi_cancel(&b.ep->fid, &cctx), 0);
	// A send to a port nobody holds fails: an error of a's sends, and
	// a CQ entry although a's successful sends write none.
	fi_addr_t nobody = FI_ADDR_NOTAVAIL;
	std::string node1 = "fi_me://" + std::to_string(c().id(1));
	ASSERT_EQ(fi_av_insertsvc(a.av, node1.c_str(), "7", &nobody, 0, nullptr), 1);
	int nctx;
	ASSERT_EQ(fi_send(a.ep, out.data(), 8, nullptr, nobody, &nctx), 0);
	ASSERT_TRUE(counted(sent, 9, 1, {&a, &b}));
	ASSERT_TRUE(counted(recvd, 8, 2, {&a, &b}));
	auto d = wait_done(a, &nctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_NE(d->err, 0);
	EXPECT_EQ(fi_cntr_read(sent), 9u);
	EXPECT_EQ(fi_cntr_readerr(sent), 1u);
	EXPECT_EQ(fi_cntr_read(recvd), 8u) << "failed receives counted as done";
	EXPECT_EQ(fi_cntr_readerr(recvd), 2u);
	EXPECT_EQ(fi_cntr_readerr(a_recvd), 0u);
}

// RMA reads and writes count on the counters bound for FI_READ and
// FI_WRITE (not on the one for sends), to a peer and to the endpoint
// itself, with or without a CQ entry; refused ones count as errors.
TEST_F(FabricTest, CountersCountReadsAndWrites)
{
	fid_cntr *reads = nullptr, *writes = nullptr, *sends = nullptr;
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, [&](Fab &f) {
		reads = f.counter(FI_READ);
		writes = f.counter(FI_WRITE);
		sends = f.counter(FI_SEND);
		f.cq_flags |= FI_SELECTIVE_COMPLETION;
	});
	Fab b(c(), 1, true);
	ASSERT_TRUE(a.ok && b.ok && reads && writes && sends);
	fi_addr_t to_b = a.insert(b), self = a.insert(a);
	Target t(b, 1 << 20, FI_REMOTE_READ | FI_REMOTE_WRITE);
	Target mine(a, 8192, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw), my_key = map_key(a, mine.raw);
	auto out = pattern(100000, 7);
	std::vector<std::uint8_t> back(out.size());
	int ctx;
	// Six writes: small, large, inject, with data, empty, to itself.
	ASSERT_EQ(fi_write(a.ep, out.data(), 100, nullptr, to_b, 0, key, &ctx), 0);
	ASSERT_EQ(fi_write(a.ep, out.data(), out.size(), nullptr, to_b, 4096, key, &ctx), 0);
	ASSERT_EQ(fi_inject_write(a.ep, out.data(), 8, to_b, 200000, key), 0);
	ASSERT_EQ(fi_writedata(a.ep, out.data(), 64, nullptr, 5, to_b, 300000, key, &ctx), 0);
	ASSERT_EQ(fi_write(a.ep, out.data(), 0, nullptr, to_b, 0, key, &ctx), 0);
	ASSERT_EQ(fi_write(a.ep, out.data(), 1000, nullptr, self, 0, my_key, &ctx), 0);
	// Three reads: small, large, from itself.
	ASSERT_EQ(fi_read(a.ep, back.data(), 100, nullptr, to_b, 0, key, &ctx), 0);
	ASSERT_TRUE(counted(writes, 6, 0, {&a, &b}));
	ASSERT_EQ(fi_read(a.ep, back.data(), out.size(), nullptr, to_b, 4096, key, &ctx), 0);
	ASSERT_EQ(fi_read(a.ep, back.data(), 1000, nullptr, self, 0, my_key, &ctx), 0);
	ASSERT_TRUE(counted(reads, 3, 0, {&a, &b})) << fi_cntr_read(reads) << " reads counted";
	a.harvest();
	EXPECT_EQ(fi_cntr_read(writes), 6u);
	EXPECT_EQ(fi_cntr_read(reads), 3u);
	EXPECT_EQ(fi_cntr_readerr(writes), 0u);
	EXPECT_EQ(fi_cntr_readerr(reads), 0u);
	EXPECT_TRUE(a.got.empty()) << "a CQ entry without FI_COMPLETION";
	EXPECT_TRUE(std::equal(back.begin(), back.begin() + 1000, out.begin()));

	// A wrong key (write and read), a range beyond the region: errors,
	// each with its CQ entry.
	std::uint8_t wrong[16];
	std::memcpy(wrong, t.raw, 16);
	wrong[8] ^= 1;
	std::uint64_t bad = map_key(a, wrong);
	int w1, r1, w2;
	ASSERT_EQ(fi_write(a.ep, out.data(), 100, nullptr, to_b, 0, bad, &w1), 0);
	ASSERT_EQ(fi_read(a.ep, back.data(), 100, nullptr, to_b, 0, bad, &r1), 0);
	ASSERT_EQ(fi_write(a.ep, out.data(), 100, nullptr, self, 8150, my_key, &w2), 0);
	ASSERT_TRUE(counted(writes, 6, 2, {&a, &b}));
	ASSERT_TRUE(counted(reads, 3, 1, {&a, &b}));
	for (int *p : {&w1, &r1, &w2}) {
		auto d = wait_done(a, p, {&a, &b});
		ASSERT_TRUE(d);
		EXPECT_NE(d->err, 0);
	}
	EXPECT_EQ(fi_cntr_read(writes), 6u);
	EXPECT_EQ(fi_cntr_readerr(writes), 2u);
	EXPECT_EQ(fi_cntr_read(reads), 3u);
	EXPECT_EQ(fi_cntr_readerr(reads), 1u);
	EXPECT_EQ(fi_cntr_read(sends), 0u) << "RMA counted as sends";
	EXPECT_EQ(fi_cntr_readerr(sends), 0u);
}

// fi_cntr_set, _add, _seterr, _adderr; fi_cntr_wait returns when the
// counter reaches the threshold (a message, another thread's fi_cntr_add),
// with -FI_EAVAIL when its errors change, -FI_ETIMEDOUT at the timeout.
TEST_F(FabricTest, CounterWaitWakesAndTimesOut)
{
	fid_cntr *recvd = nullptr, *idle = nullptr;
	Fab a(c(), 0);
	Fab b(c(), 1, false, FI_CQ_FORMAT_TAGGED, nullptr, [&](Fab &f) {
		recvd = f.counter(FI_RECV);
		idle = f.counter(0);
	});
	ASSERT_TRUE(a.ok && b.ok && recvd && idle);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	EXPECT_EQ(fi_cntr_set(idle, 10), 0);
	EXPECT_EQ(fi_cntr_read(idle), 10u);
	EXPECT_EQ(fi_cntr_add(idle, 5), 0);
	EXPECT_EQ(fi_cntr_read(idle), 15u);
	EXPECT_EQ(fi_cntr_seterr(idle, 3), 0);
	EXPECT_EQ(fi_cntr_readerr(idle), 3u);
	EXPECT_EQ(fi_cntr_adderr(idle, 2), 0);
	EXPECT_EQ(fi_cntr_readerr(idle), 5u);
	EXPECT_EQ(fi_cntr_read(idle), 15u) << "errors are kept apart";
	EXPECT_EQ(fi_cntr_wait(idle, 15, 0), 0) << "reached already";

	auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(fi_cntr_wait(idle, 16, 200), -FI_ETIMEDOUT);
	EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
	EXPECT_EQ(fi_cntr_readerr(idle), 5u) << "a timeout changed the errors";

	std::thread adder([&] {
		std::this_thread::sleep_for(300ms);
		EXPECT_EQ(fi_cntr_add(idle, 1), 0);
	});
	t0 = std::chrono::steady_clock::now();
	int ret = fi_cntr_wait(idle, 16, 20000);
	auto waited = std::chrono::steady_clock::now() - t0;
	adder.join();
	EXPECT_EQ(ret, 0) << fi_err(ret);
	EXPECT_GE(waited, 250ms);
	EXPECT_LT(waited, 10s);

	std::thread erring([&] {
		std::this_thread::sleep_for(300ms);
		EXPECT_EQ(fi_cntr_adderr(idle, 1), 0);
	});
	ret = fi_cntr_wait(idle, 100, 20000);
	erring.join();
	EXPECT_EQ(ret, -FI_EAVAIL) << fi_err(ret);
	EXPECT_EQ(fi_cntr_readerr(idle), 6u);

	// A message: the wait makes b's progress.
	char in[16] = {};
	int rctx;
	ASSERT_EQ(fi_recv(b.ep, in, sizeof(in), nullptr, to_a, &rctx), 0);
	std::thread sender = send_later(a, to_b, "wake");
	t0 = std::chrono::steady_clock::now();
	ret = fi_cntr_wait(recvd, 1, 20000);
	waited = std::chrono::steady_clock::now() - t0;
	sender.join();
	EXPECT_EQ(ret, 0) << fi_err(ret);
	EXPECT_STREQ(in, "wake");
	EXPECT_LT(waited, 10s);
	// A receive that fails (truncated) ends the wait with -FI_EAVAIL.
	char small[2];
	ASSERT_EQ(fi_recv(b.ep, small, sizeof(small), nullptr, to_a, &rctx), 0);
	sender = send_later(a, to_b, "longer");
	ret = fi_cntr_wait(recvd, 2, 20000);
	sender.join();
	EXPECT_EQ(ret, -FI_EAVAIL) << fi_err(ret);
	EXPECT_EQ(fi_cntr_read(recvd), 1u);
	EXPECT_EQ(fi_cntr_readerr(recvd), 1u);
}

// A counter's FI_WAIT_FD (fi_control FI_GETWAIT) polls readable when a
// completion comes and when another thread changes the counter;
// fi_trywait says whether the counter moved since it was read.
TEST_F(FabricTest, CounterWaitFdPollsReadable)
{
	fid_cntr *recvd = nullptr;
	Fab a(c(), 0);
	Fab b(c(), 1, false, FI_CQ_FORMAT_TAGGED, nullptr,
	      [&](Fab &f) { recvd = f.counter(FI_RECV); });
	ASSERT_TRUE(a.ok && b.ok && recvd);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	int fd = -1;
	ASSERT_EQ(fi_control(&recvd->fid, FI_GETWAIT, &fd), 0);
	ASSERT_GE(fd, 0);
	fid *fids[] = {&recvd->fid};
	pollfd p{fd, POLLIN, 0};
	EXPECT_EQ(fi_cntr_read(recvd), 0u);
	EXPECT_EQ(fi_trywait(b.fabric, fids, 1), 0) << "nothing moved";
	EXPECT_EQ(::poll(&p, 1, 0), 0) << "readable with nothing to see";

	char in[16] = {};
	int rctx;
	ASSERT_EQ(fi_recv(b.ep, in, sizeof(in), nullptr, to_a, &rctx), 0);
	std::thread sender = send_later(a, to_b, "fd");
	EXPECT_EQ(::poll(&p, 1, 20000), 1) << "not readable for a message";
	sender.join();
	EXPECT_EQ(fi_trywait(b.fabric, fids, 1), -FI_EAGAIN) << "the counter moved";
	EXPECT_EQ(fi_cntr_read(recvd), 1u);
	EXPECT_STREQ(in, "fd");
	EXPECT_EQ(fi_trywait(b.fabric, fids, 1), 0);
	EXPECT_EQ(::poll(&p, 1, 0), 0);

	std::thread adder([&] {
		std::this_thread::sleep_for(300ms);
		EXPECT_EQ(fi_cntr_add(recvd, 4), 0);
	});
	EXPECT_EQ(::poll(&p, 1, 20000), 1) << "not readable for another thread's fi_cntr_add";
	adder.join();
	EXPECT_EQ(fi_trywait(b.fabric, fids, 1), -FI_EAGAIN);
	EXPECT_EQ(fi_cntr_read(recvd), 5u);
	EXPECT_EQ(fi_trywait(b.fabric, fids, 1), 0);
	EXPECT_EQ(::poll(&p, 1, 0), 0) << "still readable once the change was seen";
}

// What fi_cntr_open and fi_ep_bind refuse, and a bound counter does not
// close (it does once its endpoint closed: ~Fab checks).
TEST_F(FabricTest, CounterBadInput)
{
	Fab other(c(), 1);
	ASSERT_TRUE(other.ok);
	fid_cntr *foreign = other.counter(0);
	fid_cntr *bound = nullptr;
	Fab a(c(), 0, false, FI_CQ_FORMAT_TAGGED, nullptr, [&](Fab &f) {
		bound = f.counter(FI_SEND | FI_RECV);
		fid_cntr *k = f.counter(0);
		ASSERT_TRUE(bound && k && foreign);
		EXPECT_EQ(fi_ep_bind(f.ep, &k->fid, FI_SEND), -FI_EINVAL) << "two counters of sends";
		EXPECT_EQ(fi_ep_bind(f.ep, &k->fid, FI_TAGGED), -FI_EBADFLAGS);
		EXPECT_EQ(fi_ep_bind(f.ep, &k->fid, 0), -FI_EINVAL) << "bound for nothing";
		EXPECT_EQ(fi_ep_bind(f.ep, &k->fid, FI_REMOTE_WRITE), -FI_ENOSYS)
			<< "remote writes are not seen";
		EXPECT_EQ(fi_ep_bind(f.ep, &k->fid, FI_READ | FI_REMOTE_READ), -FI_ENOSYS)
			<< "remote reads are not seen";
		EXPECT_EQ(fi_ep_bind(f.ep, &foreign->fid, FI_READ), -FI_EINVAL)
			<< "a counter of another domain";
		// Nothing was bound by the refusals.
		EXPECT_EQ(fi_ep_bind(f.ep, &k->fid, FI_READ | FI_WRITE), 0);
	});
	ASSERT_TRUE(a.ok);
	EXPECT_EQ(fi_close(&bound->fid), -FI_EBUSY) << "a bound counter closed";
	fid_cntr *late = a.counter(0);
	ASSERT_TRUE(late);
	EXPECT_EQ(fi_ep_bind(a.ep, &late->fid, FI_SEND), -FI_EOPBADSTATE) << "bound once enabled";

	fid_cntr *none = nullptr;
	fi_cntr_attr attr{};
	EXPECT_EQ(fi_cntr_open(a.domain, nullptr, &none, nullptr), -FI_EINVAL);
	attr.flags = 1;
	EXPECT_EQ(fi_cntr_open(a.domain, &attr, &none, nullptr), -FI_EINVAL) << "flags";
	attr.flags = 0;
	attr.events = static_cast<fi_cntr_events>(1);
	EXPECT_EQ(fi_cntr_open(a.domain, &attr, &none, nullptr), -FI_EINVAL) << "events";
	attr.events = FI_CNTR_EVENTS_COMP;
	for (fi_wait_obj w : {FI_WAIT_SET, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD, FI_WAIT_POLLFD}) {
		attr.wait_obj = w;
		EXPECT_EQ(fi_cntr_open(a.domain, &attr, &none, nullptr), -FI_ENOSYS) << "wait " << w;
	}
	EXPECT_EQ(none, nullptr);

	// FI_WAIT_NONE: no waiting, no wait object; FI_WAIT_UNSPEC waits.
	fid_cntr *nowait = a.counter(0, FI_WAIT_NONE), *unspec = a.counter(0, FI_WAIT_UNSPEC);
	ASSERT_TRUE(nowait && unspec);
	int fd = -1;
	EXPECT_EQ(fi_cntr_wait(nowait, 1, 0), -FI_EINVAL);
	EXPECT_EQ(fi_control(&nowait->fid, FI_GETWAIT, &fd), -FI_EINVAL);
	EXPECT_EQ(fi_control(&unspec->fid, FI_GETOPSFLAG, &fd), -FI_ENOSYS);
	EXPECT_EQ(fi_cntr_wait(unspec, 1, 0), -FI_ETIMEDOUT);
	EXPECT_EQ(fi_cntr_add(nowait, 2), 0);
	EXPECT_EQ(fi_cntr_read(nowait), 2u);
}

// Debian's fi_info lists the provider; fi_pingpong runs over it between
// two nodes (its control channel is TCP over the same link).
TEST_F(FabricTest, FiInfoAndFiPingpong)
{
	std::string env = "FI_PROVIDER_PATH=" + provider_dir() + " ";
	EXPECT_EQ(sh("ip netns exec " + c().ns(0) + " env " + env +
		     "fi_info -p multiedge | grep -q 'provider: multiedge'"),
		  0);
	// IP addresses on the switch ports for fi_pingpong's own TCP channel.
	for (int n : {0, 1})
		ASSERT_EQ(sh("ip -n " + c().ns(n) + " addr add 10.77.0." + std::to_string(n + 1) +
			     "/24 dev " + c().node(n).ifnames.at(0)),
			  0);
	std::string log = "/tmp/fi_pingpong_server.log";
	std::string server = "ip netns exec " + c().ns(1) + " env " + env +
			     "timeout 120 fi_pingpong -p multiedge -e rdm -I 100 -c > " + log + " 2>&1";
	std::thread srv([&] { EXPECT_EQ(sh(server), 0) << "server; log: " << log; });
	// The client gives up at once when the server's control port (47592)
	// is not listening yet: wait for it (a fixed 500 ms was once too
	// short on a loaded host).
	auto listening = [&] {
		return sh("ip netns exec " + c().ns(1) +
			  " ss -Hltn 'sport = :47592' | grep -q LISTEN") == 0;
	};
	EXPECT_TRUE(drive({}, listening, 30s)) << "the server never listened; log: " << log;
	int client = sh("ip netns exec " + c().ns(0) + " env " + env +
			"timeout 120 fi_pingpong -p multiedge -e rdm -I 100 -c 10.77.0.2 > /tmp/fi_pingpong.log 2>&1");
	srv.join();
	sh("echo '-- fi_pingpong client:'; cat /tmp/fi_pingpong.log; echo '-- server:'; cat " + log);
	EXPECT_EQ(client, 0) << "client; see /tmp/fi_pingpong.log";
}

// The port of an endpoint's name ("fi_me://<node>:<port>").
std::uint16_t port_of(const Fab &f)
{
	std::string n(f.name.c_str());
	return static_cast<std::uint16_t>(std::stoul(n.substr(n.rfind(':') + 1)));
}

// The connections node n's namespace holds to node `peer` (ME_IOC_CONN_LIST).
std::vector<me_conn_info> conns_between(Cluster &c, int n, int peer)
{
	std::vector<me_conn_info> all(256), out;
	me_conn_list l{};
	l.size = sizeof(l);
	l.count = static_cast<std::uint32_t>(all.size());
	l.conns = reinterpret_cast<std::uintptr_t>(all.data());
	l.info_size = sizeof(me_conn_info);
	EXPECT_EQ(::ioctl(c.dev(n).fd(), ME_IOC_CONN_LIST, &l), 0) << std::strerror(errno);
	EXPECT_LE(l.count, all.size());
	for (std::uint32_t i = 0; i < l.count && i < all.size(); i++)
		if (all[i].peer == c.id(peer))
			out.push_back(all[i]);
	return out;
}

// With shared connections (module ABI 18) endpoints of two nodes share one
// multiedge connection per pair of nodes: 9 endpoints on node 0 and 9 on
// node 1, each sending to each of the other node both ways (81 pairs; a
// connection per pair of endpoints stopped at the 64 a node accepts from
// one other node), eager and rendezvous, and an RMA write each.  Every
// message arrives once, from its sender; the nodes hold at most two
// connections between them (one if neither raced the other), shared.
TEST_F(FabricTest, EndpointsShareOneConnectionPerNodePair)
{
	me_query q{};
	q.size = sizeof(q);
	ASSERT_EQ(::ioctl(c().dev(0).fd(), ME_IOC_QUERY, &q), 0);
	ASSERT_TRUE(q.features & ME_FEATURE_SHARED) << "the module has no shared connections";
	constexpr int kPer = 9;
	constexpr std::size_t kBig = 8192;	// by rendezvous: a read on the connection
	std::vector<std::unique_ptr<Fab>> side[2];
	std::vector<Fab *> all;
	for (int n = 0; n < 2; n++)
		for (int i = 0; i < kPer; i++) {
			side[n].push_back(std::make_unique<Fab>(c(), n, true));
			ASSERT_TRUE(side[n].back()->ok) << "node " << n << " endpoint " << i;
			all.push_back(side[n].back().get());
		}
	// Table AVs: endpoint i of the other node is fi_addr i everywhere.
	for (int n = 0; n < 2; n++)
		for (auto &f : side[n])
			for (auto &o : side[1 - n])
				o->insert(*f);
	auto drive_all = [&](const std::function<bool()> &done) {
		auto end = std::chrono::steady_clock::now() + 60s;
		while (!done()) {
			if (std::chrono::steady_clock::now() > end)
				return false;
			for (Fab *f : all)
				f->harvest();
		}
		return true;
	};
	// A message says who sent it to whom: node, sender, receiver, then
	// filler (to kBig for the diagonal, a rendezvous).
	auto message = [&](int n, int i, int j) {
		std::vector<std::uint8_t> m(i == j ? kBig : 24);
		for (std::size_t k = 0; k < m.size(); k++)
			m[k] = static_cast<std::uint8_t>(k < 3 ? (k == 0 ? n : k == 1 ? i : j) : k * 7 + i);
		return m;
	};
	struct Rx {
		std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(kBig);
		int ctx = 0;
		bool done = false;
	};
	std::vector<Rx> rx(2 * kPer * kPer);
	for (int n = 0; n < 2; n++)
		for (int j = 0; j < kPer; j++)
			for (int k = 0; k < kPer; k++) {
				Rx &r = rx[(n * kPer + j) * kPer + k];
				ASSERT_EQ(fi_trecv(side[n][j]->ep, r.buf.data(), r.buf.size(), nullptr,
						   FI_ADDR_UNSPEC, 5, 0, &r.ctx),
					  0);
			}
	std::vector<std::vector<std::uint8_t>> out;
	out.reserve(2 * kPer * kPer);
	std::vector<int> sctx(2 * kPer * kPer);
	for (int n = 0; n < 2; n++)
		for (int i = 0; i < kPer; i++)
			for (int j = 0; j < kPer; j++) {
				int s = (n * kPer + i) * kPer + j;
				out.push_back(message(n, i, j));
				ssize_t r;
				while ((r = fi_tsend(side[n][i]->ep, out.back().data(), out.back().size(),
						     nullptr, j, 5, &sctx[s])) == -FI_EAGAIN)
					side[n][i]->harvest();
				ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
			}
	// An RMA write from each endpoint of node 0 into a region of node 1's
	// endpoint with its number.
	std::vector<std::unique_ptr<Target>> targets;
	std::vector<std::vector<std::uint8_t>> written;
	std::vector<int> wctx(kPer);
	for (int i = 0; i < kPer; i++) {
		targets.push_back(std::make_unique<Target>(*side[1][i], 4096, FI_REMOTE_WRITE));
		std::uint64_t key = map_key(*side[0][i], targets.back()->raw);
		written.push_back(pattern(4096, 100 + i));
		ASSERT_EQ(fi_write(side[0][i]->ep, written.back().data(), 4096, nullptr, i, 0, key,
				   &wctx[i]),
			  0);
	}
	// Every receive: its message, whole, once, from the endpoint it names.
	std::vector<int> seen(2 * kPer * kPer, 0);
	int received = 0;
	ASSERT_TRUE(drive_all([&] {
		for (int n = 0; n < 2; n++)
			for (int j = 0; j < kPer; j++)
				for (int k = 0; k < kPer; k++) {
					Rx &r = rx[(n * kPer + j) * kPer + k];
					if (r.done)
						continue;
					auto d = side[n][j]->take(&r.ctx);
					if (!d)
						continue;
					r.done = true;
					received++;
					EXPECT_EQ(d->err, 0);
					// From endpoint i of node 1 - n.
					int i = r.buf[1];
					EXPECT_EQ(r.buf[0], 1 - n);
					EXPECT_EQ(r.buf[2], j) << "to the wrong endpoint";
					EXPECT_EQ(d->src, static_cast<fi_addr_t>(i)) << "FI_SOURCE";
					auto want = message(1 - n, i, j);
					EXPECT_EQ(d->e.len, want.size());
					EXPECT_EQ(std::memcmp(r.buf.data(), want.data(), want.size()), 0);
					if (i >= 0 && i < kPer)
						seen[((1 - n) * kPer + i) * kPer + j]++;
				}
		return received == 2 * kPer * kPer;
	})) << received << " of " << 2 * kPer * kPer << " messages arrived";
	for (int s = 0; s < 2 * kPer * kPer; s++)
		EXPECT_EQ(seen[s], 1) << "message " << s;
	int sent = 0;
	ASSERT_TRUE(drive_all([&] {
		for (int n = 0; n < 2; n++)
			for (int i = 0; i < kPer; i++)
				for (int j = 0; j < kPer; j++) {
					int &ctx = sctx[(n * kPer + i) * kPer + j];
					if (ctx < 0)
						continue;
					auto d = side[n][i]->take(&ctx);
					if (!d)
						continue;
					EXPECT_EQ(d->err, 0) << fi_strerror(d->err);
					ctx = -1;
					sent++;
				}
		for (int i = 0; i < kPer; i++)
			if (wctx[i] >= 0) {
				auto d = side[0][i]->take(&wctx[i]);
				if (!d)
					continue;
				EXPECT_EQ(d->err, 0) << fi_strerror(d->err);
				wctx[i] = -1;
				sent++;
			}
		return sent == 2 * kPer * kPer + kPer;
	})) << sent << " sends and writes completed";
	for (int i = 0; i < kPer; i++)
		EXPECT_TRUE(targets[i]->mem == written[i]) << "write " << i;
	// One connection between the nodes, two if both opened one at once.
	for (int n = 0; n < 2; n++) {
		auto conns = conns_between(c(), n, 1 - n);
		std::printf("node %d holds %zu connection(s) to node %d\n", n, conns.size(), 1 - n);
		EXPECT_GE(conns.size(), 1u) << "node " << n;
		EXPECT_LE(conns.size(), 2u) << "node " << n;
		for (const me_conn_info &ci : conns)
			EXPECT_TRUE(ci.flags & ME_CONN_I_SHARED) << "node " << n << " conn " << ci.conn;
	}
	targets.clear();
}

// A shared connection closes when the last endpoint that joined it on the
// node that opened it goes: the other node's endpoints learn it (or find it
// closed when they post) and their next send opens a new one, from their
// side; a send to the endpoint that went is refused.
TEST_F(FabricTest, SharedConnectionClosedIsOpenedAgain)
{
	auto a1p = std::make_unique<Fab>(c(), 0);
	Fab b(c(), 1);
	ASSERT_TRUE(a1p->ok && b.ok);
	Fab &a1 = *a1p;
	fi_addr_t to_b = a1.insert(b), b_to_a1 = b.insert(a1);
	// a1 opens the nodes' connection; b answers on it (joins it).
	char m[] = "ping", in[8] = {};
	int s, r;
	ASSERT_EQ(fi_recv(b.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &r), 0);
	ASSERT_EQ(fi_send(a1.ep, m, sizeof(m), nullptr, to_b, &s), 0);
	ASSERT_TRUE(wait_done(b, &r, {&a1, &b}));
	ASSERT_TRUE(wait_done(a1, &s, {&a1, &b}));
	ASSERT_EQ(fi_recv(a1.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &r), 0);
	ASSERT_EQ(fi_send(b.ep, m, sizeof(m), nullptr, b_to_a1, &s), 0);
	ASSERT_TRUE(wait_done(a1, &r, {&a1, &b}));
	ASSERT_TRUE(wait_done(b, &s, {&a1, &b}));
	auto before = conns_between(c(), 1, 0);
	ASSERT_EQ(before.size(), 1u);
	EXPECT_FALSE(before[0].flags & ME_CONN_I_ACTIVE) << "node 0 opened it";
	// a1 goes, and with it the connection; a2 comes on node 0.
	a1p.reset();
	Fab a2(c(), 0);
	ASSERT_TRUE(a2.ok);
	fi_addr_t b_to_a2 = b.insert(a2);
	char pong[] = "pong", in2[8] = {};
	ASSERT_EQ(fi_recv(a2.ep, in2, sizeof(in2), nullptr, FI_ADDR_UNSPEC, &r), 0);
	ASSERT_EQ(fi_send(b.ep, pong, sizeof(pong), nullptr, b_to_a2, &s), 0);
	auto d = wait_done(a2, &r, {&a2, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_STREQ(in2, "pong");
	d = wait_done(b, &s, {&a2, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0) << fi_strerror(d->err);
	ASSERT_EQ(fi_send(b.ep, pong, sizeof(pong), nullptr, b_to_a1, &s), 0);
	d = wait_done(b, &s, {&a2, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, FI_ECONNREFUSED) << fi_strerror(d->err);
	// The one that carried them: opened by node 1, shared.
	bool reopened = false;
	for (const me_conn_info &ci : conns_between(c(), 1, 0))
		reopened |= ci.state == ME_CONN_S_ESTABLISHED && (ci.flags & ME_CONN_I_ACTIVE) &&
			    (ci.flags & ME_CONN_I_SHARED);
	EXPECT_TRUE(reopened);
}

// On a shared connection the module names the sending endpoint's port: a
// message whose header names another endpoint as its sender is dropped.
TEST_F(FabricTest, ForgedSenderIsDropped)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), b_to_a = b.insert(a);
	// A file of node 0 that is not a's, bound to a port of its own, sends b
	// a provider message (eager, tagged 9) that says it is a's.
	int fd = -1;
	{
		Cluster::Enter in(c().ns(0));
		ASSERT_TRUE(in.ok());
		fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	}
	ASSERT_GE(fd, 0) << std::strerror(errno);
	std::unique_ptr<int, void (*)(int *)> closer(&fd, [](int *p) { ::close(*p); });
	me_bind bind{};
	bind.size = sizeof(bind);
	ASSERT_EQ(::ioctl(fd, ME_IOC_BIND, &bind), 0) << std::strerror(errno);
	ASSERT_NE(bind.port, port_of(a));
	alignas(4096) static std::uint8_t msg[4096];
	const char text[] = "forged";
	std::memset(msg, 0, sizeof(msg));
	msg[0] = 0xfe;				// a provider message
	msg[1] = 1;				// eager
	msg[2] = 1;				// tagged
	msg[8] = 9;				// tag
	msg[24] = sizeof(text);			// length
	msg[56] = 0x5a;				// a session of its own
	msg[60] = static_cast<std::uint8_t>(port_of(a));
	msg[61] = static_cast<std::uint8_t>(port_of(a) >> 8);
	std::memcpy(msg + 64, text, sizeof(text));
	me_mr_reg reg{};
	reg.size = sizeof(reg);
	reg.addr = reinterpret_cast<std::uintptr_t>(msg);
	reg.length = sizeof(msg);
	ASSERT_EQ(::ioctl(fd, ME_IOC_MR_REG, &reg), 0) << std::strerror(errno);
	me_connect conn{};
	conn.size = sizeof(conn);
	conn.flags = ME_CONNECT_F_SHARED;
	conn.peer = c().id(1);
	conn.timeout_ms = 5000;
	ASSERT_EQ(::ioctl(fd, ME_IOC_CONNECT, &conn), 0) << std::strerror(errno);
	me_post post{};
	post.size = sizeof(post);
	post.opcode = ME_OP_SEND;
	post.conn = conn.conn;
	post.cookie = 1;
	post.local_region = reg.region;
	post.len = 64 + sizeof(text);
	post.port = port_of(b);
	ASSERT_EQ(::ioctl(fd, ME_IOC_POST, &post), 0) << std::strerror(errno);
	// It reached b's queue: the send completed without error.
	me_completion cq[4];
	me_poll_cq poll{};
	poll.size = sizeof(poll);
	poll.flags = ME_POLL_F_WAIT;
	poll.count = 4;
	poll.entry_size = sizeof(me_completion);
	poll.entries = reinterpret_cast<std::uintptr_t>(cq);
	poll.timeout_ms = 10000;
	ASSERT_EQ(::ioctl(fd, ME_IOC_POLL_CQ, &poll), 0) << std::strerror(errno);
	ASSERT_EQ(poll.count, 1u);
	EXPECT_EQ(cq[0].cookie, 1u);
	EXPECT_EQ(cq[0].status, 0);
	// b takes a's own message, not the forged one before it.
	char in[16] = {}, real[] = "real";
	int rctx, sctx;
	ASSERT_EQ(fi_trecv(b.ep, in, sizeof(in), nullptr, b_to_a, 9, 0, &rctx), 0);
	auto t0 = std::chrono::steady_clock::now();
	while (std::chrono::steady_clock::now() - t0 < 500ms) {
		b.harvest();
		ASSERT_FALSE(b.take(&rctx)) << "the forged message was taken: " << in;
	}
	ASSERT_EQ(fi_tsend(a.ep, real, sizeof(real), nullptr, to_b, 9, &sctx), 0);
	auto d = wait_done(b, &rctx, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_STREQ(in, "real");
	EXPECT_TRUE(wait_done(a, &sctx, {&a, &b}));
}


} // namespace

// Two endpoints of one node (ranks sharing it) reach each other through
// the provider's same-node path, as the module connects nodes only: every
// size both ways (inline up to 32 KiB, a passed memory file above), order
// kept through a flood the socket's queue cannot take at once, the wait fd
// wakes for them, RMA between them works (the module's loopback), and a
// send to one that closed fails.
TEST_F(FabricTest, EndpointsOfOneNodeTalk)
{
	Fab x(c(), 1, true);
	auto yp = std::make_unique<Fab>(c(), 1, true);
	Fab &y = *yp;
	ASSERT_TRUE(x.ok && y.ok);
	fi_addr_t x_to_y = x.insert(y), y_to_x = y.insert(x);
	for (std::size_t len : {std::size_t{0}, std::size_t{960}, std::size_t{961},
				std::size_t{32768}, std::size_t{32769}, std::size_t{5} << 20}) {
		for (bool forth : {true, false}) {
			SCOPED_TRACE("len " + std::to_string(len) + (forth ? " x to y" : " y to x"));
			Fab &from = forth ? x : y, &to = forth ? y : x;
			fi_addr_t dst = forth ? x_to_y : y_to_x, src = forth ? y_to_x : x_to_y;
			auto out = pattern(len, static_cast<unsigned>(len) + forth);
			std::vector<std::uint8_t> in(len + 16, 0xee);
			int rctx, sctx;
			ASSERT_EQ(fi_trecv(to.ep, in.data(), in.size(), nullptr, src, 3, 0, &rctx), 0);
			ASSERT_EQ(fi_tsend(from.ep, out.data(), len, nullptr, dst, 3, &sctx), 0);
			auto rd = wait_done(to, &rctx, {&x, &y});
			auto sd = wait_done(from, &sctx, {&x, &y});
			ASSERT_TRUE(rd && sd);
			EXPECT_EQ(rd->err, 0);
			EXPECT_EQ(sd->err, 0);
			EXPECT_EQ(rd->e.len, len);
			EXPECT_EQ(rd->src, src) << "FI_SOURCE";
			EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << "payload differs";
			EXPECT_EQ(in[len], 0xee) << "written past the message";
		}
	}
	// A flood before any receive: the socket queues a few datagrams, the
	// rest wait in the sender and go as the receiver drains; order holds.
	constexpr int kN = 300;
	std::vector<std::vector<std::uint8_t>> msgs;
	std::vector<int> sctx(kN);
	for (int i = 0; i < kN; i++) {
		msgs.push_back(pattern(i % 50 == 49 ? 100000 : 10 + i, 1000 + i));
		ASSERT_EQ(fi_tsenddata(x.ep, msgs[i].data(), msgs[i].size(), nullptr, i, x_to_y, 9,
				       &sctx[i]),
			  0);
	}
	std::vector<std::uint8_t> in(100000);
	for (int i = 0; i < kN; i++) {
		int rctx;
		ASSERT_EQ(fi_trecv(y.ep, in.data(), in.size(), nullptr, y_to_x, 9, 0, &rctx), 0);
		auto d = wait_done(y, &rctx, {&x, &y});
		ASSERT_TRUE(d) << "message " << i;
		ASSERT_EQ(d->err, 0);
		ASSERT_EQ(d->e.data, static_cast<std::uint64_t>(i)) << "out of order";
		ASSERT_EQ(d->e.len, msgs[i].size());
		ASSERT_EQ(std::memcmp(in.data(), msgs[i].data(), msgs[i].size()), 0) << "message " << i;
	}
	for (int i = 0; i < kN; i++) {
		auto d = wait_done(x, &sctx[i], {&x, &y});
		ASSERT_TRUE(d);
		EXPECT_EQ(d->err, 0);
	}
	// The wait fd (an epoll set) becomes readable for a same-node message.
	int fd = -1;
	ASSERT_EQ(fi_control(&y.cq->fid, FI_GETWAIT, &fd), 0);
	char wake[] = "wake", got[8] = {};
	int rw, sw;
	ASSERT_EQ(fi_recv(y.ep, got, sizeof(got), nullptr, y_to_x, &rw), 0);
	y.harvest();
	pollfd p{fd, POLLIN, 0};
	EXPECT_EQ(::poll(&p, 1, 0), 0) << "readable with nothing there";
	ASSERT_EQ(fi_send(x.ep, wake, sizeof(wake), nullptr, x_to_y, &sw), 0);
	EXPECT_EQ(::poll(&p, 1, 10000), 1) << "the wait fd slept through a same-node message";
	ASSERT_TRUE(wait_done(y, &rw, {&x, &y}));
	EXPECT_STREQ(got, "wake");
	ASSERT_TRUE(wait_done(x, &sw, {&x, &y}));
	{
		// RMA goes through the module's loopback (RmaBetweenEndpointsOfOneNode).
		Target t(y, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
		std::uint64_t key = map_key(x, t.raw);
		int rc;
		ASSERT_EQ(fi_write(x.ep, wake, sizeof(wake), nullptr, x_to_y, 0, key, &rc), 0);
		auto d = wait_done(x, &rc, {&x, &y});
		ASSERT_TRUE(d);
		EXPECT_EQ(d->err, 0);
		EXPECT_EQ(std::memcmp(t.mem.data(), wake, sizeof(wake)), 0);
	}
	// y goes: a send to it fails.
	yp.reset();
	int sx;
	ASSERT_EQ(fi_send(x.ep, wake, sizeof(wake), nullptr, x_to_y, &sx), 0);
	auto dx = wait_done(x, &sx, {&x});
	ASSERT_TRUE(dx);
	EXPECT_EQ(dx->err, FI_ECONNREFUSED) << fi_strerror(dx->err);
}

// A link down for longer than the module waits for a silent peer (3 s)
// ends the connection with messages in flight (ETIMEDOUT: the peer may
// have them or not).  The provider sends them again on a new connection
// under their numbers: each arrives once and in order, whether the peer
// had them (only its answers were lost) or not.  Messages that fail for
// good (the peer still unreachable when the provider connects again)
// leave no hole in the stream: the ones sent after them come through.
TEST_F(FabricTest, MessagesOutliveTheirConnection)
{
	Fab a(c(), 0), b(c(), 1);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b), to_a = b.insert(a);
	ASSERT_EQ(modprobe("sch_netem"), 0) << "the guest kernel has no netem";
	// Message k carries data k and pattern(size, k): small, in pieces,
	// by rendezvous in turn.
	std::vector<std::vector<std::uint8_t>> msgs;
	std::vector<int> sctx(64);
	auto post = [&](int n) {
		std::vector<int> ids;
		for (int i = 0; i < n; i++) {
			const int k = static_cast<int>(msgs.size());
			const std::size_t sizes[] = {100, 2000, 100000};
			msgs.push_back(pattern(sizes[k % 3], 500 + k));
			ssize_t r = fi_tsenddata(a.ep, msgs[k].data(), msgs[k].size(), nullptr, k, to_b, 5,
						 &sctx[k]);
			EXPECT_EQ(r, 0) << fi_err(static_cast<int>(r));
			ids.push_back(k);
		}
		return ids;
	};
	// Receives the messages `ids` in order; each send completes with `err`.
	auto receive = [&](const std::vector<int> &ids) {
		std::vector<std::uint8_t> in(100000);
		for (int k : ids) {
			int rctx;
			ASSERT_EQ(fi_trecv(b.ep, in.data(), in.size(), nullptr, to_a, 5, 0, &rctx), 0);
			auto d = wait_done(b, &rctx, {&a, &b});
			ASSERT_TRUE(d) << "message " << k << " did not come";
			ASSERT_EQ(d->err, 0) << fi_strerror(d->err);
			ASSERT_EQ(d->e.data, static_cast<std::uint64_t>(k)) << "out of order, or twice";
			ASSERT_EQ(d->e.len, msgs[k].size());
			ASSERT_EQ(std::memcmp(in.data(), msgs[k].data(), msgs[k].size()), 0) << k;
		}
		for (int k : ids) {
			auto d = wait_done(a, &sctx[k], {&a, &b});
			ASSERT_TRUE(d) << "send " << k;
			EXPECT_EQ(d->err, 0) << "send " << k << ": " << fi_strerror(d->err);
		}
	};
	// Connected first.
	receive(post(1));
	for (bool both : {false, true}) {
		SCOPED_TRACE(both ? "nothing crosses" : "node 1's answers are lost");
		ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, "netem loss 100%"));
		if (both) {
			ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Switch, "netem loss 100%"));
		}
		std::vector<int> ids = post(6);
		// Nobody drives the provider meanwhile: the module ends the
		// connection; the provider sees it once the link is back.
		std::this_thread::sleep_for(4500ms);
		ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, ""));
		if (both) {
			ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Switch, ""));
		}
		receive(ids);
		if (HasFatalFailure())
			return;
	}
	// Down while the provider connects again: those messages fail.
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, "netem loss 100%"));
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Switch, "netem loss 100%"));
	std::vector<int> lost = post(3);
	int failed = 0;
	EXPECT_TRUE(drive({&a, &b}, [&] {
		for (int k : lost)
			if (auto d = a.take(&sctx[k])) {
				EXPECT_NE(d->err, 0) << "send " << k << " completed with the link down";
				failed++;
			}
		return failed == 3;
	}, 60s)) << failed << " of 3 sends completed";
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, ""));
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Switch, ""));
	// The nodes know each other again within a HELLO period (a connect
	// that found node 1 unknown already does not wait for it again).
	std::this_thread::sleep_for(1s);
	receive(post(4));
}

// What an MPI ping-pong between two ranks of one node does while a rank
// of another node sends to both (MPICH over the provider with
// MPIR_CVAR_NOLOCAL, mpi-mpich's 4 ranks on 2 nodes): x and y of node 0
// bounce messages of 8 B to 64 KiB whose tags start again with each size
// (the same tag, another length), receives posted before and after their
// message comes; z of node 1 sends both a message per round trip under
// another tag, unexpected until the end.  Every payload, length and
// order is checked.
TEST_F(FabricTest, SameNodePingPongBesideAnotherNodesMessages)
{
	Fab x(c(), 0), y(c(), 0), z(c(), 1);
	ASSERT_TRUE(x.ok && y.ok && z.ok);
	fi_addr_t x_to_y = x.insert(y), y_to_x = y.insert(x);
	fi_addr_t z_to_x = z.insert(x), z_to_y = z.insert(y);
	fi_addr_t x_to_z = x.insert(z), y_to_z = y.insert(z);
	constexpr std::uint64_t kFar = 1ull << 40;	// z's tags
	constexpr int kIters = 25;
	std::vector<std::vector<std::uint8_t>> far;	// z's messages, k-th to x if even
	std::vector<int> far_ctx(2 * 4 * kIters);
	std::vector<std::uint8_t> in(65536);
	// One message from `from` to `to`, tag `tag`, its receive posted
	// before the send or after it.
	auto bounce = [&](Fab &from, fi_addr_t dst, Fab &to, fi_addr_t src, std::size_t len,
			  std::uint64_t tag, unsigned seed, bool post_first) {
		auto out = pattern(len, seed);
		std::fill(in.begin(), in.end(), 0xee);
		int rctx, sctx;
		if (post_first) {
			ASSERT_EQ(fi_trecv(to.ep, in.data(), len, nullptr, src, tag, 0, &rctx), 0);
		}
		ssize_t r = fi_tsend(from.ep, out.data(), len, nullptr, dst, tag, &sctx);
		ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
		if (!post_first) {
			drive({&x, &y, &z}, [] { return false; }, 2ms);
			ASSERT_EQ(fi_trecv(to.ep, in.data(), len, nullptr, src, tag, 0, &rctx), 0);
		}
		auto d = wait_done(to, &rctx, {&x, &y, &z});
		ASSERT_TRUE(d) << len << " B, tag " << tag;
		ASSERT_EQ(d->err, 0) << fi_strerror(d->err);
		ASSERT_EQ(d->e.len, len);
		ASSERT_EQ(d->e.tag, tag);
		ASSERT_EQ(std::memcmp(in.data(), out.data(), len), 0) << len << " B, tag " << tag;
		ASSERT_TRUE(wait_done(from, &sctx, {&x, &y, &z}));
	};
	unsigned seed = 0;
	for (std::size_t len : {std::size_t{8}, std::size_t{900}, std::size_t{4096},
				std::size_t{65536}}) {
		for (int it = 0; it < kIters; it++) {
			for (int side = 0; side < 2; side++) {
				const std::size_t k = far.size();
				far.push_back(pattern(100 + k, 9000 + static_cast<unsigned>(k)));
				ssize_t r = fi_tsend(z.ep, far[k].data(), far[k].size(), nullptr,
						     side ? z_to_y : z_to_x, kFar | k, &far_ctx[k]);
				ASSERT_EQ(r, 0) << fi_err(static_cast<int>(r));
			}
			const bool first = it % 2;
			bounce(x, x_to_y, y, y_to_x, len, it, seed++, first);
			if (HasFatalFailure())
				return;
			bounce(y, y_to_x, x, x_to_y, len, it, seed++, !first);
			if (HasFatalFailure())
				return;
		}
	}
	// z's messages, each where it was sent, in order, under any low bits.
	for (std::size_t k = 0; k < far.size(); k++) {
		Fab &to = k % 2 ? y : x;
		int rctx;
		ASSERT_EQ(fi_trecv(to.ep, in.data(), in.size(), nullptr, k % 2 ? y_to_z : x_to_z, kFar,
				   0xffffffffull, &rctx), 0);
		auto d = wait_done(to, &rctx, {&x, &y, &z});
		ASSERT_TRUE(d) << "z's message " << k;
		ASSERT_EQ(d->e.tag, kFar | k) << "out of order";
		ASSERT_EQ(d->e.len, far[k].size());
		ASSERT_EQ(std::memcmp(in.data(), far[k].data(), far[k].size()), 0) << k;
		ASSERT_TRUE(wait_done(z, &far_ctx[k], {&x, &y, &z}));
	}
}

// A rendezvous send whose receiver closed before taking it completes by
// itself: the sender asks after it (a Probe, kProbeEvery) and the module
// refuses that for the port nobody holds.  A new endpoint on the port
// then gets the sender's next messages (its stream starts again).  One
// sent to an endpoint that closed while another took its port completes
// too: the new one answers that it holds no such Rts.
TEST_F(FabricTest, RendezvousToAnEndpointThatClosedCompletes)
{
	Fab x(c(), 0);
	auto y = std::make_unique<Fab>(c(), 1, false, FI_CQ_FORMAT_TAGGED, "5003");
	ASSERT_TRUE(x.ok && y->ok);
	fi_addr_t to_y = x.insert(*y);
	auto big = pattern(64 << 10, 3);
	auto pump = [](std::initializer_list<Fab *> fabs, std::chrono::milliseconds t) {
		drive(fabs, [] { return false; }, t);
	};
	int s1;
	ASSERT_EQ(fi_tsend(x.ep, big.data(), big.size(), nullptr, to_y, 1, &s1), 0);
	pump({&x, y.get()}, 300ms);	// the Rts is y's, unexpected
	EXPECT_FALSE(x.take(&s1)) << "completed before its receiver did anything";
	y.reset();
	auto t0 = std::chrono::steady_clock::now();
	auto d = wait_done(x, &s1, {&x});
	ASSERT_TRUE(d) << "a rendezvous to a closed endpoint never completed";
	EXPECT_EQ(d->err, FI_ECONNREFUSED) << fi_strerror(d->err);
	EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);

	// A new endpoint on the port gets the next message (a new stream).
	y = std::make_unique<Fab>(c(), 1, false, FI_CQ_FORMAT_TAGGED, "5003");
	ASSERT_TRUE(y->ok);
	std::vector<std::uint8_t> in(big.size());
	int s2, r2;
	ASSERT_EQ(fi_trecv(y->ep, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, 2, 0, &r2), 0);
	ASSERT_EQ(fi_tsend(x.ep, big.data(), big.size(), nullptr, to_y, 2, &s2), 0);
	auto rd = wait_done(*y, &r2, {&x, y.get()});
	ASSERT_TRUE(rd) << "the new endpoint on the port never got the message";
	EXPECT_EQ(rd->err, 0);
	EXPECT_EQ(in, big);
	d = wait_done(x, &s2, {&x, y.get()});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);

	// Its Rts unread, the endpoint closes and another takes the port at once.
	int s3;
	ASSERT_EQ(fi_tsend(x.ep, big.data(), big.size(), nullptr, to_y, 3, &s3), 0);
	pump({&x, y.get()}, 300ms);
	y.reset();
	y = std::make_unique<Fab>(c(), 1, false, FI_CQ_FORMAT_TAGGED, "5003");
	ASSERT_TRUE(y->ok);
	d = wait_done(x, &s3, {&x, y.get()});
	ASSERT_TRUE(d) << "a rendezvous to an endpoint replaced on its port never completed";
	EXPECT_EQ(d->err, FI_ECONNRESET) << fi_strerror(d->err);
	// And the newest endpoint gets what comes next.
	int s4, r4;
	char small[] = "after", got[8] = {};
	ASSERT_EQ(fi_trecv(y->ep, got, sizeof(got), nullptr, FI_ADDR_UNSPEC, 4, 0, &r4), 0);
	ASSERT_EQ(fi_tsend(x.ep, small, sizeof(small), nullptr, to_y, 4, &s4), 0);
	rd = wait_done(*y, &r4, {&x, y.get()});
	ASSERT_TRUE(rd) << "the newest endpoint never got the next message";
	EXPECT_STREQ(got, "after");
}

// ---- atomics (FI_ATOMIC, a module of ABI 19) ----

namespace {

// The kinds of atomic call and their forms.
enum class AKind { Base, Fetch, Compare };
enum class AForm { Plain, Vector, Msg };

const char *name_of(AKind k)
{
	return k == AKind::Base ? "fi_atomic" : k == AKind::Fetch ? "fi_fetch_atomic"
								  : "fi_compare_atomic";
}

const char *name_of(AForm f)
{
	return f == AForm::Plain ? "" : f == AForm::Vector ? "v" : "msg";
}

// Posts one atomic of one element from `f` in the given kind and form
// (`flags` for the msg form only); the call's return.
ssize_t post_atomic(Fab &f, AKind kind, AForm form, const void *buf, const void *compare,
		    void *result, fi_addr_t to, std::uint64_t addr, std::uint64_t key,
		    fi_datatype dt, fi_op op, void *ctx, std::uint64_t flags = 0)
{
	fi_ioc iov{const_cast<void *>(buf), 1}, cmp{const_cast<void *>(compare), 1}, res{result, 1};
	fi_rma_ioc rma{addr, 1, key};
	fi_msg_atomic m{};
	m.msg_iov = &iov;
	m.iov_count = 1;
	m.addr = to;
	m.rma_iov = &rma;
	m.rma_iov_count = 1;
	m.datatype = dt;
	m.op = op;
	m.context = ctx;
	switch (form) {
	case AForm::Plain:
		if (kind == AKind::Base)
			return fi_atomic(f.ep, buf, 1, nullptr, to, addr, key, dt, op, ctx);
		if (kind == AKind::Fetch)
			return fi_fetch_atomic(f.ep, buf, 1, nullptr, result, nullptr, to, addr, key,
					       dt, op, ctx);
		return fi_compare_atomic(f.ep, buf, 1, nullptr, compare, nullptr, result, nullptr,
					 to, addr, key, dt, op, ctx);
	case AForm::Vector:
		if (kind == AKind::Base)
			return fi_atomicv(f.ep, &iov, nullptr, 1, to, addr, key, dt, op, ctx);
		if (kind == AKind::Fetch)
			return fi_fetch_atomicv(f.ep, &iov, nullptr, 1, &res, nullptr, 1, to, addr,
						key, dt, op, ctx);
		return fi_compare_atomicv(f.ep, &iov, nullptr, 1, &cmp, nullptr, 1, &res, nullptr, 1,
					  to, addr, key, dt, op, ctx);
	default:
		if (kind == AKind::Base)
			return fi_atomicmsg(f.ep, &m, flags);
		if (kind == AKind::Fetch)
			return fi_fetch_atomicmsg(f.ep, &m, &res, nullptr, 1, flags);
		return fi_compare_atomicmsg(f.ep, &m, &cmp, nullptr, 1, &res, nullptr, 1, flags);
	}
}

// Posts one atomic and waits for its completion (driving `fabs`).
std::optional<Done> run_atomic(Fab &f, AKind kind, AForm form, const void *buf,
			       const void *compare, void *result, fi_addr_t to, std::uint64_t addr,
			       std::uint64_t key, fi_datatype dt, fi_op op,
			       std::initializer_list<Fab *> fabs)
{
	int ctx;
	ssize_t r = post_atomic(f, kind, form, buf, compare, result, to, addr, key, dt, op, &ctx);
	EXPECT_EQ(r, 0) << fi_err(static_cast<int>(r));
	if (r)
		return std::nullopt;
	auto d = wait_done(f, &ctx, fabs);
	EXPECT_TRUE(d) << "no completion";
	return d;
}

template <typename T> T value_at(const std::vector<std::uint8_t> &mem, std::size_t off)
{
	T v;
	std::memcpy(&v, mem.data() + off, sizeof(v));
	return v;
}

struct AtomicType {
	fi_datatype dt;
	std::uint32_t size;
	bool is_signed;
	const char *name;
};
const AtomicType kAtomicTypes[] = {{FI_INT32, 4, true, "FI_INT32"},
				   {FI_UINT32, 4, false, "FI_UINT32"},
				   {FI_INT64, 8, true, "FI_INT64"},
				   {FI_UINT64, 8, false, "FI_UINT64"}};

// Every operation on every datatype in every form, from `f` onto the value
// at offset 8 of `t` (reached at `to`, mapped by f as `key`): the value
// left there, the value found (fetching calls: into the result, whose
// bytes beyond the datatype stay), the bytes around it untouched, the
// completion's flags.  The value starts at -5 and the operand is positive,
// so that signed and unsigned minimum and maximum differ.
void atomic_sweep(Fab &f, fi_addr_t to, Target &t, std::uint64_t key,
		  std::initializer_list<Fab *> fabs)
{
	constexpr std::size_t kOff = 8;
	constexpr std::uint64_t kUntouched = 0x5555555555555555ull;
	for (const AtomicType &ty : kAtomicTypes) {
		const std::uint64_t mask = ty.size == 4 ? 0xffffffffull : ~0ull;
		const std::uint64_t init = static_cast<std::uint64_t>(-5) & mask;
		const std::uint64_t operand = ty.size == 4 ? 0x12345678ull : 0x123456789abcdef0ull;
		struct Case {
			AKind kind;
			fi_op op;
			const char *name;
			std::uint64_t compare;
			std::uint64_t left;	// what stays at the target
		};
		std::vector<Case> cases;
		for (AKind kind : {AKind::Base, AKind::Fetch}) {
			cases.push_back({kind, FI_SUM, "FI_SUM", 0, (init + operand) & mask});
			cases.push_back({kind, FI_BOR, "FI_BOR", 0, init | operand});
			cases.push_back({kind, FI_BAND, "FI_BAND", 0, init & operand});
			cases.push_back({kind, FI_BXOR, "FI_BXOR", 0, init ^ operand});
			// Signed, -5 is the smaller; unsigned, the larger.
			cases.push_back({kind, FI_MIN, "FI_MIN", 0, ty.is_signed ? init : operand});
			cases.push_back({kind, FI_MAX, "FI_MAX", 0, ty.is_signed ? operand : init});
			cases.push_back({kind, FI_ATOMIC_WRITE, "FI_ATOMIC_WRITE", 0, operand});
		}
		cases.push_back({AKind::Fetch, FI_ATOMIC_READ, "FI_ATOMIC_READ", 0, init});
		cases.push_back({AKind::Compare, FI_CSWAP, "FI_CSWAP (equal)", init, operand});
		cases.push_back({AKind::Compare, FI_CSWAP, "FI_CSWAP (differs)", init ^ 1, init});
		for (AForm form : {AForm::Plain, AForm::Vector, AForm::Msg})
			for (const Case &k : cases) {
				SCOPED_TRACE(std::string(name_of(k.kind)) + name_of(form) + " " +
					     ty.name + " " + k.name);
				std::memset(t.mem.data(), 0xaa, 32);
				std::memcpy(t.mem.data() + kOff, &init, ty.size);
				std::uint64_t buf = operand, compare = k.compare, result = kUntouched;
				auto d = run_atomic(f, k.kind, form, &buf, &compare, &result, to, kOff, key,
						    ty.dt, k.op, fabs);
				ASSERT_TRUE(d);
				ASSERT_EQ(d->err, 0) << fi_strerror(d->err);
				std::uint64_t want_flags = FI_ATOMIC |
							   (k.kind == AKind::Base ? FI_WRITE : FI_READ);
				EXPECT_EQ(d->e.flags & (FI_ATOMIC | FI_READ | FI_WRITE | FI_RMA),
					  want_flags);
				std::uint64_t left = 0;
				std::memcpy(&left, t.mem.data() + kOff, ty.size);
				EXPECT_EQ(left, k.left) << std::hex << "left at the target";
				for (std::size_t i = 0; i < 32; i++) {
					if (i < kOff || i >= kOff + ty.size) {
						ASSERT_EQ(t.mem[i], 0xaa) << "byte " << i << " touched";
					}
				}
				if (k.kind == AKind::Base)
					EXPECT_EQ(result, kUntouched) << "a base atomic wrote a result";
				else
					EXPECT_EQ(result, (kUntouched & ~mask) | init)
						<< std::hex << "the value found";
			}
	}
}

// fi_getinfo offers FI_ATOMIC where the module has atomics, as RMA: to
// callers that take raw keys, in the transmit and receive capabilities
// too; Debian's fi_info lists it.
TEST_F(FabricTest, AtomicsInGetinfo)
{
	me_query q{};
	q.size = sizeof(q);
	ASSERT_EQ(::ioctl(c().dev(0).fd(), ME_IOC_QUERY, &q), 0);
	ASSERT_TRUE(q.features & ME_FEATURE_ATOMIC) << "the module has no atomics";
	{
		Cluster::Enter in(c().ns(0));
		ASSERT_TRUE(in.ok());
		fi_info *h = hints(FI_EP_RDM, FI_MSG | FI_ATOMIC), *info = nullptr;
		h->domain_attr->mr_mode = FI_MR_RAW | FI_MR_PROV_KEY;
		int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info);
		ASSERT_EQ(ret, 0) << fi_err(ret);
		EXPECT_TRUE(info->caps & FI_ATOMIC);
		EXPECT_TRUE(info->tx_attr->caps & FI_ATOMIC);
		EXPECT_TRUE(info->rx_attr->caps & FI_ATOMIC);
		EXPECT_TRUE(info->domain_attr->mr_mode & FI_MR_RAW) << "atomics without FI_RMA";
		EXPECT_EQ(info->domain_attr->mr_key_size, 16u);
		EXPECT_EQ(info->tx_attr->rma_iov_limit, 1u);
		fi_freeinfo(info);
		// In the transmit capabilities alone.
		fi_freeinfo(h);
		h = hints(FI_EP_RDM, FI_MSG);
		h->domain_attr->mr_mode = FI_MR_RAW | FI_MR_PROV_KEY;
		h->tx_attr->caps = FI_MSG | FI_ATOMIC | FI_READ | FI_WRITE;
		ASSERT_EQ(ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0)
			<< fi_err(ret);
		fi_freeinfo(info);
		fi_freeinfo(h);
		// Without raw keys, not.
		h = hints(FI_EP_RDM, FI_MSG | FI_ATOMIC);
		EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), -FI_ENODATA);
		fi_freeinfo(h);
		// Without hints everything is offered, atomics included.
		fi_info *all = nullptr;
		ASSERT_EQ(ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &all), 0)
			<< fi_err(ret);
		bool found = false;
		for (fi_info *i = all; i; i = i->next)
			if (!std::strcmp(i->fabric_attr->prov_name, "multiedge")) {
				found = true;
				EXPECT_TRUE(i->caps & FI_ATOMIC);
				EXPECT_TRUE(i->caps & FI_RMA);
			}
		EXPECT_TRUE(found);
		fi_freeinfo(all);
	}
	std::string env = "FI_PROVIDER_PATH=" + provider_dir() + " ";
	EXPECT_EQ(sh("ip netns exec " + c().ns(0) + " env " + env +
		     "fi_info -p multiedge -v > /tmp/fi_info_atomic.log 2>&1"),
		  0) << "see /tmp/fi_info_atomic.log";
	EXPECT_EQ(sh("grep -q 'FI_ATOMIC' /tmp/fi_info_atomic.log"), 0)
		<< "fi_info does not list FI_ATOMIC; see /tmp/fi_info_atomic.log";
}

// What fi_atomicvalid, fi_fetch_atomicvalid, fi_compare_atomicvalid and the
// domain's fi_query_atomic answer for every datatype and operation: valid
// (one element per call) for 32- and 64-bit integers and the operations
// the module has, -FI_EOPNOTSUPP for the rest.
TEST_F(FabricTest, AtomicValidQueries)
{
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok);
	auto supported = [](AKind kind, int dt, int op) {
		if (dt != FI_INT32 && dt != FI_UINT32 && dt != FI_INT64 && dt != FI_UINT64)
			return false;
		switch (op) {
		case FI_MIN:
		case FI_MAX:
		case FI_SUM:
		case FI_BOR:
		case FI_BAND:
		case FI_BXOR:
		case FI_ATOMIC_WRITE:
			return kind != AKind::Compare;
		case FI_ATOMIC_READ:
			return kind == AKind::Fetch;
		case FI_CSWAP:
			return kind == AKind::Compare;
		default:
			return false;
		}
	};
	int valid = 0;
	for (int dt = FI_INT8; dt <= FI_UINT128; dt++)
		for (int op = FI_MIN; op < FI_ATOMIC_OP_LAST; op++)
			for (AKind kind : {AKind::Base, AKind::Fetch, AKind::Compare}) {
				SCOPED_TRACE(std::string(name_of(kind)) + " datatype " + std::to_string(dt) +
					     " op " + std::to_string(op));
				auto d = static_cast<fi_datatype>(dt);
				auto o = static_cast<fi_op>(op);
				std::size_t count = 99;
				int ret = kind == AKind::Base	 ? fi_atomicvalid(a.ep, d, o, &count)
					  : kind == AKind::Fetch ? fi_fetch_atomicvalid(a.ep, d, o, &count)
								 : fi_compare_atomicvalid(a.ep, d, o, &count);
				fi_atomic_attr attr{99, 99};
				std::uint64_t flags = kind == AKind::Base    ? 0
						      : kind == AKind::Fetch ? FI_FETCH_ATOMIC
									     : FI_COMPARE_ATOMIC;
				int qret = fi_query_atomic(a.domain, d, o, &attr, flags);
				if (supported(kind, dt, op)) {
					valid++;
					EXPECT_EQ(ret, 0) << fi_err(ret);
					EXPECT_EQ(count, 1u);
					EXPECT_EQ(qret, 0) << fi_err(qret);
					EXPECT_EQ(attr.count, 1u);
					EXPECT_EQ(attr.size, dt == FI_INT32 || dt == FI_UINT32 ? 4u : 8u);
				} else {
					EXPECT_EQ(ret, -FI_EOPNOTSUPP) << fi_err(ret);
					EXPECT_EQ(qret, -FI_EOPNOTSUPP) << fi_err(qret);
				}
			}
	EXPECT_EQ(valid, 4 * (7 + 8 + 1));
	fi_atomic_attr attr{};
	EXPECT_EQ(fi_query_atomic(a.domain, FI_UINT64, FI_SUM, &attr,
				  FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
		  -FI_EINVAL);
	EXPECT_EQ(fi_query_atomic(a.domain, FI_UINT64, FI_SUM, &attr, FI_TAGGED), -FI_EOPNOTSUPP)
		<< "atomics onto tagged receive buffers";
}

// Every operation and datatype once in each form onto a peer's region,
// with the value found and the value left.
TEST_F(FabricTest, AtomicEachOpAndDatatype)
{
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	Fab b(c(), 1, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b);
	Target t(b, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	atomic_sweep(a, to_b, t, map_key(a, t.raw), {&a, &b});
}

// Fetch-adds onto one 64-bit counter from three sides at once: two peers
// (threads of their own, up to every atomic slot in flight each) through
// their modules, and the owner itself with the CPU's atomics.  Each value
// is found once and the counter ends at their number.  The owner adds as
// fast as it can while the peers' atomics land, so that they overlap: with
// a plain load and store in place of its atomic add the counter lost 2 to
// 4 updates a run (under TCG; 1000 atomics per peer lost none in one run
// of two, hence 3000).
TEST_F(FabricTest, AtomicFetchAddsFromThreeSidesAreExact)
{
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	Fab b(c(), 1, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	Fab d(c(), 2, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && b.ok && d.ok);
	Target t(b, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	fi_addr_t a_to_b = a.insert(b), d_to_b = d.insert(b), self = b.insert(b);
	std::uint64_t a_key = map_key(a, t.raw), d_key = map_key(d, t.raw),
		      b_key = map_key(b, t.raw);
	constexpr int kEach = 3000;
	constexpr std::uint64_t kAt = 64;
	std::atomic<int> running{2};
	struct Side {
		std::vector<std::uint64_t> found;
		int refused = 0;	// -FI_EAGAIN: every slot in flight
	} sa, sd;
	auto adder = [&](Fab &f, fi_addr_t to, std::uint64_t key, Side &s) {
		s.found.assign(kEach, ~0ull);
		std::vector<int> ctx(kEach);
		const std::uint64_t one = 1;
		int posted = 0, done = 0;
		auto end = std::chrono::steady_clock::now() + 120s;
		while (done < kEach && std::chrono::steady_clock::now() < end) {
			while (posted < kEach) {
				ssize_t r = fi_fetch_atomic(f.ep, &one, 1, nullptr, &s.found[posted],
							    nullptr, to, kAt, key, FI_UINT64, FI_SUM,
							    &ctx[posted]);
				if (r == -FI_EAGAIN) {
					s.refused++;
					break;
				}
				if (r) {
					ADD_FAILURE() << fi_err(static_cast<int>(r));
					running--;
					return;
				}
				posted++;
			}
			f.harvest();
			for (const Done &g : f.got) {
				EXPECT_EQ(g.err, 0) << fi_strerror(g.err);
				EXPECT_EQ(g.e.flags & (FI_ATOMIC | FI_READ), FI_ATOMIC | FI_READ);
			}
			done += static_cast<int>(f.got.size());
			f.got.clear();
		}
		EXPECT_EQ(done, kEach) << "completions";
		running--;
	};
	std::thread ta(adder, std::ref(a), a_to_b, a_key, std::ref(sa));
	std::thread td(adder, std::ref(d), d_to_b, d_key, std::ref(sd));
	// The owner adds meanwhile, as fast as it can (its completions are
	// taken now and then: each read of the CQ makes progress, which costs
	// system calls), for as long as the peers' atomics are applied.
	std::vector<std::uint64_t> mine;
	std::size_t owner_done = 0;
	auto take_owner = [&] {
		b.harvest();
		for (const Done &g : b.got) {
			EXPECT_EQ(g.err, 0) << fi_strerror(g.err);
			EXPECT_EQ(g.e.flags & (FI_ATOMIC | FI_READ), FI_ATOMIC | FI_READ);
		}
		owner_done += b.got.size();
		b.got.clear();
	};
	const std::uint64_t one = 1;
	while (running > 0 && mine.size() < 1000000) {
		std::uint64_t v = ~0ull;
		ssize_t r = fi_fetch_atomic(b.ep, &one, 1, nullptr, &v, nullptr, self, kAt, b_key,
					    FI_UINT64, FI_SUM, nullptr);
		EXPECT_EQ(r, 0) << fi_err(static_cast<int>(r));
		if (r)
			break;
		mine.push_back(v);
		if (mine.size() % 64 == 0)
			take_owner();
	}
	take_owner();
	EXPECT_EQ(owner_done, mine.size()) << "an atomic to itself completes at once";
	ta.join();
	td.join();
	std::vector<std::uint64_t> all = sa.found;
	all.insert(all.end(), sd.found.begin(), sd.found.end());
	all.insert(all.end(), mine.begin(), mine.end());
	std::sort(all.begin(), all.end());
	for (std::size_t i = 0; i < all.size(); i++)
		if (all[i] != i) {
			ADD_FAILURE() << "the " << i << "th value found is " << all[i]
				      << ": a value found twice, or lost";
			break;
		}
	EXPECT_EQ(value_at<std::uint64_t>(t.mem, kAt), all.size());
	EXPECT_GT(mine.size(), 0u);
	std::printf("fetch-adds: %d + %d from peers (%d and %d refusals for want of a slot), "
		    "%zu by the owner\n",
		    kEach, kEach, sa.refused, sd.refused, mine.size());
}

// Each atomic in flight holds one of the domain's 256 atomic slots: while
// the target answers nothing (its node transmits nothing), the 257th post
// answers -FI_EAGAIN; once answers flow again every one completes, each
// applied once, and slots are free again.
TEST_F(FabricTest, AtomicSlotsAreBounded)
{
	constexpr int kSlots = 256;	// Domain::kAtomicSlots
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	Fab b(c(), 1, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b);
	Target t(b, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw);
	const std::uint64_t one = 1;
	std::vector<std::uint64_t> found(kSlots + 1, ~0ull);
	std::vector<int> ctx(kSlots + 1);
	// Connected first, then node 1 (port 1) mute.
	auto d = run_atomic(a, AKind::Fetch, AForm::Plain, &one, nullptr, &found[0], to_b, 0, key,
			    FI_UINT64, FI_SUM, {&a, &b});
	ASSERT_TRUE(d);
	ASSERT_EQ(d->err, 0);
	ASSERT_EQ(modprobe("sch_netem"), 0) << "the guest kernel has no netem";
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, "netem loss 100%"));
	int posted = 1;
	ssize_t r = 0;
	while (posted <= kSlots + 1) {
		r = fi_fetch_atomic(a.ep, &one, 1, nullptr, &found[posted], nullptr, to_b, 0, key,
				    FI_UINT64, FI_SUM, &ctx[posted]);
		if (r)
			break;
		posted++;
	}
	EXPECT_EQ(r, -FI_EAGAIN) << fi_err(static_cast<int>(r));
	EXPECT_EQ(posted - 1, kSlots) << "atomics in flight when refused";
	a.harvest();
	EXPECT_TRUE(a.got.empty()) << "completions while the target was mute";
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, ""));
	int done = 0;
	EXPECT_TRUE(drive({&a, &b}, [&] {
		for (const Done &g : a.got) {
			EXPECT_EQ(g.err, 0) << fi_strerror(g.err);
			done++;
		}
		a.got.clear();
		return done == posted - 1;
	}, 60s)) << done << " of " << posted - 1 << " completed";
	std::vector<std::uint64_t> all(found.begin(), found.begin() + posted);
	std::sort(all.begin(), all.end());
	for (std::size_t i = 0; i < all.size(); i++)
		ASSERT_EQ(all[i], i) << "a value found twice, or lost";
	EXPECT_EQ(value_at<std::uint64_t>(t.mem, 0), static_cast<std::uint64_t>(posted));
	// The slots are free again.
	d = run_atomic(a, AKind::Fetch, AForm::Plain, &one, nullptr, &found[0], to_b, 0, key,
		       FI_UINT64, FI_SUM, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_EQ(found[0], static_cast<std::uint64_t>(posted));
}

// fi_inject_atomic (the operand may change at once; no CQ entry), and
// completions: FI_ATOMIC | FI_WRITE for base atomics, counted by the
// FI_WRITE counter, FI_ATOMIC | FI_READ for fetching and compare ones,
// counted by the FI_READ counter; a refused one in error, counted as an
// error of its kind.  Under FI_SELECTIVE_COMPLETION only FI_COMPLETION
// asks for an entry.
TEST_F(FabricTest, AtomicInjectCompletionsAndCounters)
{
	fid_cntr *reads = nullptr, *writes = nullptr, *sends = nullptr;
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, [&](Fab &f) {
		reads = f.counter(FI_READ);
		writes = f.counter(FI_WRITE);
		sends = f.counter(FI_SEND);
	}, FI_ATOMIC);
	Fab b(c(), 1, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && b.ok && reads && writes && sends);
	fi_addr_t to_b = a.insert(b), self = a.insert(a);
	Target t(b, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	Target mine(a, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw), my_key = map_key(a, mine.raw);
	// Inject: to the peer and to itself, the operand overwritten at once.
	std::uint64_t add = 7;
	ASSERT_EQ(fi_inject_atomic(a.ep, &add, 1, to_b, 0, key, FI_UINT64, FI_SUM), 0);
	add = 1000;
	add = 9;
	ASSERT_EQ(fi_inject_atomic(a.ep, &add, 1, self, 0, my_key, FI_UINT64, FI_SUM), 0);
	add = 1000;
	ASSERT_TRUE(counted(writes, 2, 0, {&a, &b}));
	EXPECT_EQ(value_at<std::uint64_t>(t.mem, 0), 7u);
	EXPECT_EQ(value_at<std::uint64_t>(mine.mem, 0), 9u);
	a.harvest();
	EXPECT_TRUE(a.got.empty()) << "a CQ entry for fi_inject_atomic";
	// Base, fetching and compare atomics: their flags and counters.
	std::uint32_t v = 5, cmp = 0, res = 0;
	int w, f, k;
	ASSERT_EQ(fi_atomic(a.ep, &v, 1, nullptr, to_b, 8, key, FI_UINT32, FI_BOR, &w), 0);
	ASSERT_EQ(fi_fetch_atomic(a.ep, &v, 1, nullptr, &res, nullptr, to_b, 8, key, FI_UINT32,
				  FI_SUM, &f),
		  0);
	auto dw = wait_done(a, &w, {&a, &b});
	auto df = wait_done(a, &f, {&a, &b});
	ASSERT_TRUE(dw && df);
	EXPECT_EQ(dw->e.flags, FI_ATOMIC | FI_WRITE);
	EXPECT_EQ(df->e.flags, FI_ATOMIC | FI_READ);
	EXPECT_EQ(res, 5u) << "the fetch-add found the or's 5";
	ASSERT_EQ(fi_compare_atomic(a.ep, &v, 1, nullptr, &cmp, nullptr, &res, nullptr, to_b, 8, key,
				    FI_UINT32, FI_CSWAP, &k),
		  0);
	auto dk = wait_done(a, &k, {&a, &b});
	ASSERT_TRUE(dk);
	EXPECT_EQ(dk->e.flags, FI_ATOMIC | FI_READ);
	EXPECT_EQ(res, 10u);
	EXPECT_EQ(value_at<std::uint32_t>(t.mem, 8), 10u) << "compared with 0: not swapped";
	EXPECT_EQ(fi_cntr_read(writes), 3u);
	EXPECT_EQ(fi_cntr_read(reads), 2u);
	// A refused base atomic and a refused fetch (wrong key): errors of
	// their counters, each with its entry.
	std::uint8_t wrong[16];
	std::memcpy(wrong, t.raw, 16);
	wrong[8] ^= 1;
	std::uint64_t bad = map_key(a, wrong);
	res = 77;
	ASSERT_EQ(fi_atomic(a.ep, &v, 1, nullptr, to_b, 8, bad, FI_UINT32, FI_SUM, &w), 0);
	ASSERT_EQ(fi_fetch_atomic(a.ep, &v, 1, nullptr, &res, nullptr, to_b, 8, bad, FI_UINT32,
				  FI_SUM, &f),
		  0);
	dw = wait_done(a, &w, {&a, &b});
	df = wait_done(a, &f, {&a, &b});
	ASSERT_TRUE(dw && df);
	EXPECT_EQ(dw->err, FI_EACCES);
	EXPECT_EQ(df->err, FI_EACCES);
	EXPECT_EQ(dw->e.flags, FI_ATOMIC | FI_WRITE);
	EXPECT_EQ(df->e.flags, FI_ATOMIC | FI_READ);
	EXPECT_EQ(res, 77u) << "a refused fetch wrote its result";
	EXPECT_EQ(fi_cntr_read(writes), 3u);
	EXPECT_EQ(fi_cntr_readerr(writes), 1u);
	EXPECT_EQ(fi_cntr_read(reads), 2u);
	EXPECT_EQ(fi_cntr_readerr(reads), 1u);
	EXPECT_EQ(fi_cntr_read(sends) + fi_cntr_readerr(sends), 0u) << "atomics counted as sends";
}

// Under FI_SELECTIVE_COMPLETION an atomic gets an entry only when it asks
// (fi_atomicmsg with FI_COMPLETION); a refused one always does.
TEST_F(FabricTest, AtomicSelectiveCompletion)
{
	fid_cntr *writes = nullptr;
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, [&](Fab &f) {
		writes = f.counter(FI_WRITE);
		f.cq_flags |= FI_SELECTIVE_COMPLETION;
	}, FI_ATOMIC);
	Fab b(c(), 1, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && b.ok && writes);
	fi_addr_t to_b = a.insert(b);
	Target t(b, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw);
	std::uint64_t one = 1;
	int quiet, asked, refused;
	ASSERT_EQ(fi_atomic(a.ep, &one, 1, nullptr, to_b, 0, key, FI_UINT64, FI_SUM, &quiet), 0);
	ASSERT_EQ(post_atomic(a, AKind::Base, AForm::Msg, &one, nullptr, nullptr, to_b, 0, key,
			      FI_UINT64, FI_SUM, &asked, FI_COMPLETION),
		  0);
	ASSERT_EQ(post_atomic(a, AKind::Base, AForm::Msg, &one, nullptr, nullptr, to_b, 4, key,
			      FI_UINT64, FI_SUM, &refused, 0),
		  0);
	ASSERT_TRUE(counted(writes, 2, 1, {&a, &b}));
	a.harvest();
	EXPECT_TRUE(a.take(&asked));
	auto d = a.take(&refused);
	ASSERT_TRUE(d) << "a refused atomic without its error entry";
	EXPECT_EQ(d->err, FI_EINVAL) << "misaligned";
	EXPECT_FALSE(a.take(&quiet)) << "an entry not asked for";
	EXPECT_EQ(value_at<std::uint64_t>(t.mem, 0), 2u);
}

// What atomics refuse: at the call (datatypes and operations the module
// has not, more than one element, malformed vectors and messages, missing
// buffers, unknown keys and addresses, remote CQ data) and in the
// completion, from the target's module: a wrong key, memory not aligned to
// the datatype, a region without remote read and write (read alone will do
// for FI_ATOMIC_READ), a range beyond the region.  Nothing changes there.
TEST_F(FabricTest, AtomicBadInput)
{
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	Fab b(c(), 1, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b);
	Target t(b, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, t.raw);
	std::uint64_t v[2] = {1, 1}, cmp[2] = {0, 0}, res[2] = {0, 0};
	int ctx;
	// Not offered.
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, to_b, 0, key, FI_FLOAT, FI_SUM, &ctx),
		  -FI_EOPNOTSUPP);
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, to_b, 0, key, FI_UINT16, FI_SUM, &ctx),
		  -FI_EOPNOTSUPP);
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, to_b, 0, key, FI_UINT64, FI_PROD, &ctx),
		  -FI_EOPNOTSUPP);
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, to_b, 0, key, FI_UINT64, FI_LOR, &ctx),
		  -FI_EOPNOTSUPP);
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, to_b, 0, key, FI_UINT64, FI_ATOMIC_READ, &ctx),
		  -FI_EOPNOTSUPP) << "a read that returns nothing";
	EXPECT_EQ(fi_fetch_atomic(a.ep, v, 1, nullptr, res, nullptr, to_b, 0, key, FI_UINT64,
				  FI_CSWAP, &ctx),
		  -FI_EOPNOTSUPP);
	for (fi_op op : {FI_CSWAP_NE, FI_CSWAP_LE, FI_CSWAP_GT, FI_MSWAP, FI_SUM})
		EXPECT_EQ(fi_compare_atomic(a.ep, v, 1, nullptr, cmp, nullptr, res, nullptr, to_b, 0,
					    key, FI_UINT64, op, &ctx),
			  -FI_EOPNOTSUPP) << "op " << op;
	// One element per call.
	EXPECT_EQ(fi_atomic(a.ep, v, 2, nullptr, to_b, 0, key, FI_UINT64, FI_SUM, &ctx), -FI_EINVAL);
	EXPECT_EQ(fi_atomic(a.ep, v, 0, nullptr, to_b, 0, key, FI_UINT64, FI_SUM, &ctx), -FI_EINVAL);
	EXPECT_EQ(fi_inject_atomic(a.ep, v, 2, to_b, 0, key, FI_UINT64, FI_SUM), -FI_EINVAL);
	EXPECT_EQ(fi_fetch_atomic(a.ep, v, 2, nullptr, res, nullptr, to_b, 0, key, FI_UINT64, FI_SUM,
				  &ctx),
		  -FI_EINVAL);
	EXPECT_EQ(fi_compare_atomic(a.ep, v, 2, nullptr, cmp, nullptr, res, nullptr, to_b, 0, key,
				    FI_UINT64, FI_CSWAP, &ctx),
		  -FI_EINVAL);
	fi_ioc two[2] = {{&v[0], 1}, {&v[1], 1}}, rv{res, 1}, rv2{res, 2};
	EXPECT_EQ(fi_atomicv(a.ep, two, nullptr, 2, to_b, 0, key, FI_UINT64, FI_SUM, &ctx),
		  -FI_EINVAL);
	EXPECT_EQ(fi_fetch_atomicv(a.ep, two, nullptr, 1, &rv2, nullptr, 1, to_b, 0, key, FI_UINT64,
				   FI_SUM, &ctx),
		  -FI_EINVAL) << "results of another count";
	EXPECT_EQ(fi_fetch_atomicv(a.ep, two, nullptr, 1, nullptr, nullptr, 1, to_b, 0, key,
				   FI_UINT64, FI_SUM, &ctx),
		  -FI_EINVAL);
	fi_rma_ioc rma2{0, 2, key};
	fi_msg_atomic m{};
	m.msg_iov = two;
	m.iov_count = 1;
	m.addr = to_b;
	m.rma_iov = &rma2;
	m.rma_iov_count = 1;
	m.datatype = FI_UINT64;
	m.op = FI_SUM;
	m.context = &ctx;
	EXPECT_EQ(fi_atomicmsg(a.ep, &m, 0), -FI_EINVAL) << "remote count differs";
	EXPECT_EQ(fi_fetch_atomicmsg(a.ep, &m, &rv, nullptr, 1, 0), -FI_EINVAL);
	fi_rma_ioc rma{0, 1, key};
	m.rma_iov = &rma;
	m.rma_iov_count = 2;
	EXPECT_EQ(fi_atomicmsg(a.ep, &m, 0), -FI_EINVAL) << "two remote ranges";
	m.rma_iov_count = 1;
	m.data = 5;
	EXPECT_EQ(fi_atomicmsg(a.ep, &m, FI_REMOTE_CQ_DATA), -FI_EOPNOTSUPP) << "remote CQ data";
	// Missing buffers, unknown key and address.
	EXPECT_EQ(fi_atomic(a.ep, nullptr, 1, nullptr, to_b, 0, key, FI_UINT64, FI_SUM, &ctx),
		  -FI_EINVAL);
	EXPECT_EQ(fi_fetch_atomic(a.ep, v, 1, nullptr, nullptr, nullptr, to_b, 0, key, FI_UINT64,
				  FI_SUM, &ctx),
		  -FI_EINVAL);
	EXPECT_EQ(fi_compare_atomic(a.ep, v, 1, nullptr, nullptr, nullptr, res, nullptr, to_b, 0, key,
				    FI_UINT64, FI_CSWAP, &ctx),
		  -FI_EINVAL);
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, to_b, 0, key + 100, FI_UINT64, FI_SUM, &ctx),
		  -FI_EINVAL);
	EXPECT_EQ(fi_atomic(a.ep, v, 1, nullptr, 12345, 0, key, FI_UINT64, FI_SUM, &ctx), -FI_EINVAL);
	// A read needs no operand.
	std::memset(t.mem.data(), 0, 64);
	t.mem[16] = 42;
	auto d = run_atomic(a, AKind::Fetch, AForm::Plain, nullptr, nullptr, res, to_b, 16, key,
			    FI_UINT64, FI_ATOMIC_READ, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0);
	EXPECT_EQ(res[0], 42u);

	// Refused by the target's module.
	auto refused = [&](const char *what, AKind kind, std::uint64_t at, std::uint64_t k,
			   fi_datatype dt, fi_op op, int want) {
		SCOPED_TRACE(what);
		auto before = t.mem;
		res[0] = 0x77;
		auto r = run_atomic(a, kind, AForm::Plain, v, cmp, res, to_b, at, k, dt, op, {&a, &b});
		ASSERT_TRUE(r);
		EXPECT_EQ(r->err, want) << fi_strerror(r->err);
		EXPECT_TRUE(r->e.flags & FI_ATOMIC);
		EXPECT_EQ(res[0], 0x77u) << "a refused atomic wrote its result";
		EXPECT_TRUE(before == t.mem) << "the target changed";
	};
	std::uint8_t wrong[16];
	std::memcpy(wrong, t.raw, 16);
	wrong[8] ^= 1;
	std::uint64_t bad = map_key(a, wrong);
	refused("wrong key", AKind::Base, 0, bad, FI_UINT64, FI_SUM, FI_EACCES);
	refused("wrong key, fetch", AKind::Fetch, 0, bad, FI_UINT64, FI_SUM, FI_EACCES);
	refused("misaligned 8", AKind::Fetch, 4, key, FI_UINT64, FI_SUM, FI_EINVAL);
	refused("misaligned 4", AKind::Base, 2, key, FI_INT32, FI_MAX, FI_EINVAL);
	refused("misaligned compare", AKind::Compare, 12, key, FI_INT64, FI_CSWAP, FI_EINVAL);
	refused("beyond the region", AKind::Base, 4096 - 4, key, FI_UINT64, FI_SUM, ERANGE);
	refused("far beyond the region", AKind::Fetch, 1 << 20, key, FI_UINT32, FI_SUM, ERANGE);
	Target ro(b, 4096, FI_REMOTE_READ), wo(b, 4096, FI_REMOTE_WRITE);
	std::uint64_t ro_key = map_key(a, ro.raw), wo_key = map_key(a, wo.raw);
	refused("read-only region, sum", AKind::Base, 0, ro_key, FI_UINT64, FI_SUM, FI_EACCES);
	refused("read-only region, compare", AKind::Compare, 0, ro_key, FI_UINT64, FI_CSWAP,
		FI_EACCES);
	refused("write-only region, swap", AKind::Base, 0, wo_key, FI_UINT64, FI_ATOMIC_WRITE,
		FI_EACCES);
	refused("write-only region, read", AKind::Fetch, 0, wo_key, FI_UINT64, FI_ATOMIC_READ,
		FI_EACCES);
	ro.mem[0] = 9;
	d = run_atomic(a, AKind::Fetch, AForm::Plain, nullptr, nullptr, res, to_b, 0, ro_key,
		       FI_UINT64, FI_ATOMIC_READ, {&a, &b});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0) << "FI_ATOMIC_READ of a read-only region";
	EXPECT_EQ(res[0], 9u);
}

// Atomics to the endpoint itself are applied by the provider with the
// CPU's atomic instructions, with the module's checks and answers; to
// another endpoint of its node the module's loopback applies them.
TEST_F(FabricTest, AtomicToItselfAndItsNode)
{
	Fab a(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	Fab y(c(), 0, true, FI_CQ_FORMAT_TAGGED, nullptr, {}, FI_ATOMIC);
	ASSERT_TRUE(a.ok && y.ok);
	fi_addr_t self = a.insert(a), to_y = a.insert(y);
	Target mine(a, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t key = map_key(a, mine.raw);
	atomic_sweep(a, self, mine, key, {&a});
	std::uint64_t v = 1, res = 0x77;
	auto refused = [&](const char *what, AKind kind, std::uint64_t at, std::uint64_t k,
			   fi_datatype dt, fi_op op, int want) {
		SCOPED_TRACE(what);
		std::memset(mine.mem.data(), 0, 64);
		auto before = mine.mem;
		res = 0x77;
		auto r = run_atomic(a, kind, AForm::Plain, &v, &v, &res, self, at, k, dt, op, {&a});
		ASSERT_TRUE(r);
		EXPECT_EQ(r->err, want) << fi_strerror(r->err);
		EXPECT_EQ(res, 0x77u) << "a refused atomic wrote its result";
		EXPECT_TRUE(before == mine.mem) << "the target changed";
	};
	std::uint8_t wrong[16];
	std::memcpy(wrong, mine.raw, 16);
	wrong[8] ^= 1;
	refused("wrong key", AKind::Fetch, 0, map_key(a, wrong), FI_UINT64, FI_SUM, FI_EACCES);
	refused("misaligned 8", AKind::Fetch, 4, key, FI_UINT64, FI_SUM, FI_EINVAL);
	refused("misaligned 4", AKind::Base, 1, key, FI_UINT32, FI_SUM, FI_EINVAL);
	refused("beyond the region", AKind::Compare, 4096 - 4, key, FI_UINT64, FI_CSWAP, ERANGE);
	Target ro(a, 4096, FI_REMOTE_READ), wo(a, 4096, FI_REMOTE_WRITE);
	std::uint64_t ro_key = map_key(a, ro.raw);
	refused("read-only region, sum", AKind::Base, 0, ro_key, FI_UINT64, FI_SUM, FI_EACCES);
	refused("write-only region, sum", AKind::Fetch, 0, map_key(a, wo.raw), FI_UINT64, FI_SUM,
		FI_EACCES);
	ro.mem[0] = 3;
	auto d = run_atomic(a, AKind::Fetch, AForm::Plain, nullptr, nullptr, &res, self, 0, ro_key,
			    FI_UINT64, FI_ATOMIC_READ, {&a});
	ASSERT_TRUE(d);
	EXPECT_EQ(d->err, 0) << "FI_ATOMIC_READ of a read-only region";
	EXPECT_EQ(res, 3u);
	// Another endpoint of the node: through the module's loopback (ABI
	// 20), every operation, and its refusals as a peer's.
	Target theirs(y, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::uint64_t their_key = map_key(a, theirs.raw);
	atomic_sweep(a, to_y, theirs, their_key, {&a, &y});
	std::memcpy(wrong, theirs.raw, 16);
	wrong[8] ^= 1;
	auto r = run_atomic(a, AKind::Fetch, AForm::Plain, &v, &v, &res, to_y, 0,
			    map_key(a, wrong), FI_UINT64, FI_SUM, {&a, &y});
	ASSERT_TRUE(r);
	EXPECT_EQ(r->err, FI_EACCES) << "wrong key, another endpoint";
	r = run_atomic(a, AKind::Fetch, AForm::Plain, &v, &v, &res, to_y, 4, their_key, FI_UINT64,
		       FI_SUM, {&a, &y});
	ASSERT_TRUE(r);
	EXPECT_EQ(r->err, FI_EINVAL) << "misaligned, another endpoint";
}

// Operations of an endpoint closed with them in flight still complete into
// the domain's file; a later endpoint of the domain must never take those
// completions for its own (their cookies once restarted with each
// endpoint: the old writes' refusals failed the new writes).
TEST_F(FabricTest, NewEndpointIsNotCompletedByAClosedOnesOperations)
{
	Fab a(c(), 0, true);
	Fab b(c(), 1, true);
	ASSERT_TRUE(a.ok && b.ok);
	fi_addr_t to_b = a.insert(b);
	Target t(b, 4096, FI_REMOTE_WRITE);
	Target ro(b, 4096, FI_REMOTE_READ);
	std::uint64_t key = map_key(a, t.raw), ro_key = map_key(a, ro.raw);
	std::vector<std::uint8_t> out = pattern(4096, 3);
	int first = 0;
	// Connected first; then node 1 (port 1) answers 400 ms late, so the
	// old writes' answers come after the new endpoint posted its own.
	ASSERT_EQ(fi_write(a.ep, out.data(), 8, nullptr, to_b, 0, key, &first), 0);
	auto d = wait_done(a, &first, {&a, &b});
	ASSERT_TRUE(d);
	ASSERT_EQ(d->err, 0);
	ASSERT_EQ(modprobe("sch_netem"), 0) << "the guest kernel has no netem";
	ASSERT_TRUE(c().port_qdisc(1, Cluster::Side::Node, "netem delay 400ms"));
	constexpr int kOld = 4, kNew = 6;
	int old_ctx[kOld], new_ctx[kNew];
	for (int i = 0; i < kOld; i++)
		ASSERT_EQ(fi_write(a.ep, out.data(), 8, nullptr, to_b, 8 * i, ro_key, &old_ctx[i]), 0);
	// The endpoint goes with its writes in flight; another takes its place.
	ASSERT_EQ(fi_close(&a.ep->fid), 0);
	a.ep = nullptr;
	int ret = fi_endpoint(a.domain, a.info, &a.ep, nullptr);
	ASSERT_EQ(ret, 0) << fi_err(ret);
	ASSERT_EQ(ret = fi_ep_bind(a.ep, &a.av->fid, 0), 0) << fi_err(ret);
	ASSERT_EQ(ret = fi_ep_bind(a.ep, &a.cq->fid, a.cq_flags), 0) << fi_err(ret);
	ASSERT_EQ(ret = fi_enable(a.ep), 0) << fi_err(ret);
	for (int i = 0; i < kNew; i++)
		ASSERT_EQ(ret = fi_write(a.ep, out.data() + 64 * i, 64, nullptr, to_b, 64 * (i + 1),
					 key, &new_ctx[i]), 0) << fi_err(ret);
	// The old writes are refused (a read-only region) and their
	// completions dropped; each new write completes once, with success.
	int done = 0;
	EXPECT_TRUE(drive({&a, &b}, [&] {
		for (const Done &g : a.got) {
			bool mine = false;
			for (int i = 0; i < kNew; i++)
				mine |= g.e.op_context == &new_ctx[i];
			EXPECT_TRUE(mine) << "a completion of the closed endpoint's";
			EXPECT_EQ(g.err, 0) << fi_strerror(g.err);
			done++;
		}
		a.got.clear();
		return done >= kNew;
	}, 60s)) << done << " of " << kNew << " completed";
	EXPECT_EQ(done, kNew);
	for (int i = 0; i < kNew; i++)
		EXPECT_EQ(std::memcmp(t.mem.data() + 64 * (i + 1), out.data() + 64 * i, 64), 0) << i;
	for (int i = 0; i < 200; i++)
		a.harvest();
	EXPECT_TRUE(a.got.empty()) << "a completion after the last";
	EXPECT_TRUE(c().port_qdisc(1, Cluster::Side::Node, ""));
}

} // namespace
