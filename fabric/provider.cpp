// The provider's entry point (fi_prov_ini), fi_getinfo and the fabric.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fabric/mefi.hpp"
#include "fabric/nosys.hpp"

namespace mefi {

namespace {

constexpr const char *kName = "multiedge";
// FI_LOCAL_COMM: an endpoint can send to itself (the one endpoint of its
// node, Documentation/libfabric.md); FI_REMOTE_COMM: to other nodes.
// FI_MULTI_RECV: untagged receive buffers that take many messages (MPICH's
// active messages need them).
constexpr std::uint64_t kCaps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE |
				FI_DIRECTED_RECV | FI_MULTI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr std::uint64_t kTxCaps = FI_MSG | FI_TAGGED | FI_SEND | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr std::uint64_t kRxCaps = FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV |
				  FI_MULTI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM;
// RMA, offered only to callers that take raw keys (FI_MR_RAW): a region is
// named by its id and a 64-bit key, more than fi_mr_key's 64 bits.
constexpr std::uint64_t kRmaCaps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr std::uint64_t kRmaTxCaps = FI_RMA | FI_READ | FI_WRITE;
constexpr std::uint64_t kRmaRxCaps = FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE;
// Atomics, addressed as RMA is (raw keys), where the module has them
// (ABI 19, ME_FEATURE_ATOMIC).
constexpr std::uint64_t kAtomicCaps = FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
				      FI_REMOTE_WRITE;
constexpr std::uint64_t kAtomicTxCaps = FI_ATOMIC | FI_READ | FI_WRITE;
constexpr std::uint64_t kAtomicRxCaps = FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE;

// Whether RMA may be offered: the caller accepts FI_MR_RAW (no hints: it
// accepts everything; before API 1.5 there are no MR mode bits).
bool rma_allowed(std::uint32_t version, const fi_info *hints)
{
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		return false;
	if (!hints || !hints->domain_attr)
		return !hints;
	return hints->domain_attr->mr_mode & FI_MR_RAW;
}
constexpr std::size_t kQueueSize = 1024;
// Counters a domain offers (domain_attr cntr_cnt): as many as CQs; neither
// costs more than its memory.
constexpr std::size_t kCounters = 64;

// This namespace's node and the module's features (ME_FEATURE_*), or a
// positive errno (module not loaded: ENOENT).
int query_node(std::uint32_t *node, std::uint32_t *features)
{
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno;
	me_query q{};
	q.size = sizeof(q);
	int err = ::ioctl(fd, ME_IOC_QUERY, &q) ? errno : 0;
	::close(fd);
	if (!err) {
		*node = q.node_id;
		*features = q.features;
	}
	return err;
}

bool name_ok(const char *want)
{
	return !want || !std::strcmp(want, kName);
}

// The capabilities beyond messages offered to a caller: RMA and, with a
// module that has them, atomics, both for callers that take raw keys.
std::uint64_t remote_caps(std::uint32_t version, const fi_info *hints, std::uint32_t features)
{
	if (!rma_allowed(version, hints))
		return 0;
	return kRmaCaps | ((features & ME_FEATURE_ATOMIC) ? kAtomicCaps : 0);
}

// Whether `hints` can be met by a module with `features`.
bool hints_ok(std::uint32_t version, const fi_info *hints, std::uint32_t features)
{
	if (!hints)
		return true;
	std::uint64_t rma = remote_caps(version, hints, features);
	if (hints->caps & ~(kCaps | rma))
		return false;
	if (hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != FI_ADDR_STR)
		return false;
	if (hints->ep_attr) {
		if (hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != FI_EP_RDM)
			return false;
		if (hints->ep_attr->max_msg_size > ME_OP_MAX_LEN)
			return false;
		if (hints->ep_attr->tx_ctx_cnt > 1 || hints->ep_attr->rx_ctx_cnt > 1)
			return false;
	}
	if (hints->tx_attr) {
		if (hints->tx_attr->caps &
		    ~(kTxCaps | (rma & (kRmaTxCaps | kAtomicTxCaps))))
			return false;
		if (hints->tx_attr->inject_size > kEagerMax || hints->tx_attr->iov_limit > 1 ||
		    hints->tx_attr->rma_iov_limit > 1)
			return false;
	}
	if (hints->rx_attr) {
		if (hints->rx_attr->caps &
		    ~(kRxCaps | (rma & (kRmaRxCaps | kAtomicRxCaps))))
			return false;
		if (hints->rx_attr->iov_limit > 1)
			return false;
	}
	if (hints->domain_attr) {
		const fi_domain_attr *d = hints->domain_attr;
		if (!name_ok(d->name))
			return false;
		if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
			return false;
		if (d->cq_data_size > 8)
			return false;
		if (d->cntr_cnt > kCounters)
			return false;
	}
	if (hints->fabric_attr && !name_ok(hints->fabric_attr->name))
		return false;
	return true;
}

char *dup_addr(Addr a, std::size_t *len)
{
	std::string s = addr_string(a);
	char *p = static_cast<char *>(std::calloc(1, kAddrLen));
	if (p)
		std::memcpy(p, s.c_str(), s.size() + 1);
	*len = kAddrLen;
	return p;
}

fi_info *make_info(std::uint32_t version, Addr src, const fi_info *hints,
		   std::optional<Addr> dest, std::uint32_t features)
{
	fi_info *fi = fi_allocinfo();
	if (!fi)
		return nullptr;
	std::uint64_t rma = remote_caps(version, hints, features);
	fi->caps = hints && hints->caps ? hints->caps : kCaps | rma;
	bool raw = fi->caps & (FI_RMA | FI_ATOMIC);
	fi->mode = 0;
	fi->addr_format = FI_ADDR_STR;
	fi->src_addr = dup_addr(src, &fi->src_addrlen);
	if (dest)
		fi->dest_addr = dup_addr(*dest, &fi->dest_addrlen);

	fi->tx_attr->caps = fi->caps & (kTxCaps | kRmaTxCaps | kAtomicTxCaps);
	fi->tx_attr->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
	fi->tx_attr->msg_order = FI_ORDER_SAS;
	fi->tx_attr->comp_order = FI_ORDER_NONE;
	fi->tx_attr->inject_size = kEagerMax;
	fi->tx_attr->size = kQueueSize;
	fi->tx_attr->iov_limit = 1;
	fi->tx_attr->rma_iov_limit = raw ? 1 : 0;

	fi->rx_attr->caps = fi->caps & (kRxCaps | kRmaRxCaps | kAtomicRxCaps);
	fi->rx_attr->op_flags = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
	fi->rx_attr->msg_order = FI_ORDER_SAS;
	fi->rx_attr->comp_order = FI_ORDER_NONE;
	fi->rx_attr->total_buffered_recv = 0;
	fi->rx_attr->size = kQueueSize;
	fi->rx_attr->iov_limit = 1;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_UNSPEC;
	fi->ep_attr->protocol_version = 1;
	fi->ep_attr->max_msg_size = ME_OP_MAX_LEN;
	fi->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	fi_domain_attr *d = fi->domain_attr;
	d->name = strdup(kName);
	// Every level is met (the domain's lock serializes everything): the
	// one asked for is named, as callers that check for theirs expect
	// (MPICH wants FI_THREAD_DOMAIN back).
	d->threading = hints && hints->domain_attr && hints->domain_attr->threading != FI_THREAD_UNSPEC
			       ? hints->domain_attr->threading
			       : FI_THREAD_SAFE;
	d->control_progress = FI_PROGRESS_MANUAL;
	d->data_progress = FI_PROGRESS_MANUAL;
	d->resource_mgmt = FI_RM_ENABLED;
	d->av_type = hints && hints->domain_attr ? hints->domain_attr->av_type : FI_AV_UNSPEC;
	// Local buffers need no registration (atomics' operands and results
	// included); remote keys are raw (region id and key) and
	// provider-chosen, when RMA or atomics are offered at all.
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		d->mr_mode = FI_MR_SCALABLE;
	else
		d->mr_mode = raw ? FI_MR_RAW | FI_MR_PROV_KEY : 0;
	d->mr_key_size = raw ? kRawKeySize : 8;
	d->cq_data_size = 8;
	d->cq_cnt = 64;
	d->cntr_cnt = kCounters;
	d->ep_cnt = 1;
	d->tx_ctx_cnt = 1;
	d->rx_ctx_cnt = 1;
	d->max_ep_tx_ctx = 1;
	d->max_ep_rx_ctx = 1;
	d->mr_iov_limit = 1;
	// One holds the send slots, one the atomics' slots.
	d->mr_cnt = ME_MR_MAX_PER_FILE - 2;

	fi->fabric_attr->name = strdup(kName);
	fi->fabric_attr->prov_version = provider.version;
	if (!fi->src_addr || (dest && !fi->dest_addr) || !d->name || !fi->fabric_attr->name) {
		fi_freeinfo(fi);
		return nullptr;
	}
	return fi;
}

int getinfo(std::uint32_t version, const char *node, const char *service, std::uint64_t flags,
	    const fi_info *hints, fi_info **info)
{
	*info = nullptr;
	// Hints nothing could meet are refused without opening the device;
	// those that ask for atomics again once the module's features are
	// known.
	if (!hints_ok(version, hints, ME_FEATURE_ATOMIC))
		return -FI_ENODATA;
	std::uint32_t me = 0, features = 0;
	int err = query_node(&me, &features);
	if (!err && !hints_ok(version, hints, features))
		return -FI_ENODATA;
	if (err) {
		if (err == ENOENT)
			FI_INFO(&provider, FI_LOG_CORE,
				"%s missing: the multiedge module is not loaded\n", ME_DEVICE_PATH);
		else
			MEFI_WARN("%s: %s\n", ME_DEVICE_PATH, std::strerror(err));
		return -FI_ENODATA;
	}
	// The service is a port: this endpoint's with FI_SOURCE, else the
	// destination's (whose node `node` names; this node without one).
	std::uint16_t port = 0;
	if (service && *service) {
		std::optional<std::uint16_t> p = parse_port(service);
		if (!p)
			return -FI_ENODATA;
		port = *p;
	}
	Addr src = make_addr(me, 0);
	std::optional<Addr> dest;
	if (node && *node) {
		std::optional<Addr> n = parse_addr(node, std::strlen(node) + 1);
		if (!n || (port && addr_port(*n)))
			return -FI_ENODATA;
		if (port)
			*n = make_addr(addr_node(*n), port);
		if (flags & FI_SOURCE) {
			if (addr_node(*n) != me)
				return -FI_ENODATA;
			src = *n;
		} else {
			dest = n;
		}
	} else if (port) {
		if (flags & FI_SOURCE)
			src = make_addr(me, port);
		else
			dest = make_addr(me, port);
	}
	if (hints && hints->src_addr) {
		std::optional<Addr> n = parse_addr(hints->src_addr, hints->src_addrlen);
		if (!n || addr_node(*n) != me)
			return -FI_ENODATA;
		if (addr_port(*n))
			src = *n;
	}
	if (!dest && hints && hints->dest_addr) {
		dest = parse_addr(hints->dest_addr, hints->dest_addrlen);
		if (!dest || !addr_port(*dest))
			return -FI_ENODATA;
	}
	if (dest && !addr_port(*dest))
		return -FI_ENODATA;	// a destination is an endpoint: it has a port
	*info = make_info(version, src, hints, dest, features);
	return *info ? 0 : -FI_ENOMEM;
}


// ---- fabric ----

int fabric_close(fid *f)
{
	delete self_of<Fabric>(reinterpret_cast<fid_fabric *>(f));
	return 0;
}

// 0 when the caller may sleep on the wait fds: nothing is to be read from
// the CQs, and the counters did not move since the caller last read them.
int trywait(fid_fabric *, fid **fids, int count)
{
	for (int i = 0; i < count; i++) {
		if (fids[i]->fclass == FI_CLASS_CNTR) {
			Counter *c = self_of<Counter>(reinterpret_cast<fid_cntr *>(fids[i]));
			std::lock_guard<std::recursive_mutex> g(c->domain->mu);
			c->domain->progress();
			if (c->moved())
				return -FI_EAGAIN;
			continue;
		}
		if (fids[i]->fclass != FI_CLASS_CQ)
			return -FI_ENOSYS;
		CompletionQueue *cq = self_of<CompletionQueue>(reinterpret_cast<fid_cq *>(fids[i]));
		std::lock_guard<std::recursive_mutex> g(cq->domain->mu);
		cq->domain->progress();
		if (!cq->done.empty() || !cq->errors.empty())
			return -FI_EAGAIN;
	}
	return 0;
}

fi_ops fabric_fi_ops = fid_ops(fabric_close);

fi_ops_fabric fabric_ops = [] {
	fi_ops_fabric o{};
	o.size = sizeof(fi_ops_fabric);
	o.domain = domain_open;
	MEFI_NOSYS(o, passive_ep);
	o.eq_open = eq_open;
	MEFI_NOSYS(o, wait_open);
	o.trywait = trywait;
	MEFI_NOSYS(o, domain2);
	return o;
}();

int fabric_open(fi_fabric_attr *attr, fid_fabric **fabric, void *context)
{
	if (!attr || !name_ok(attr->name))
		return -FI_EINVAL;
	auto *f = new (std::nothrow) Fabric(context);
	if (!f)
		return -FI_ENOMEM;
	*fabric = &f->h.fid;
	return 0;
}

void cleanup() {}

constexpr const char *kMaxUnexpectedParam = "max_unexpected";
constexpr const char *kLargeSendsParam = "large_sends";
constexpr const char *kAckNowParam = "ack_now";

// A boolean parameter that is on unless set to 0.
bool param_on(const char *name)
{
	int v = 1;
	if (fi_param_get_bool(&provider, name, &v) == FI_SUCCESS)
		return v;
	return true;
}

} // namespace

void define_params()
{
	fi_param_define(&provider, kMaxUnexpectedParam, FI_PARAM_SIZE_T,
			"Bytes of unexpected messages (sent before their receive was posted) an "
			"endpoint holds; past them it takes no more and senders wait (default: %zu)",
			kMaxUnexpectedDefault);
	fi_param_define(&provider, kLargeSendsParam, FI_PARAM_BOOL,
			"Messages of up to 16 KiB in one send where the module takes sends of "
			"several packets (ABI 26); 0: in pieces of 960 bytes up to 4 KiB, by "
			"rendezvous above, as with an older module (default: 1)");
	fi_param_define(&provider, kAckNowParam, FI_PARAM_BOOL,
			"A send or write whose completion is waited for asks the peer's module "
			"to ack it at once rather than hold the ack for a reply (ABI 27); 0: "
			"the peer may hold it, as with an older module (default: 1)");
}

bool large_sends_param()
{
	return param_on(kLargeSendsParam);
}

bool ack_now_param()
{
	return param_on(kAckNowParam);
}

std::size_t max_unexpected_param()
{
	std::size_t v = 0;
	if (fi_param_get_size_t(&provider, kMaxUnexpectedParam, &v) == FI_SUCCESS && v > 0)
		return v;
	return kMaxUnexpectedDefault;
}

fi_provider provider = {
	.version = FI_VERSION(0, 1),
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.context = {},
	.name = kName,
	.getinfo = getinfo,
	.fabric = fabric_open,
	.cleanup = cleanup,
};

Fabric::Fabric(void *context)
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_FABRIC;
	h.fid.fid.context = context;
	h.fid.fid.ops = &fabric_fi_ops;
	h.fid.ops = &fabric_ops;
}

} // namespace mefi

extern "C" FI_EXT_INI
{
	mefi::define_params();
	return &mefi::provider;
}
