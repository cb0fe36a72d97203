// me_bench client: runs each requested test as one session with the
// server, a measurement per size, and writes a row per measurement.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "control.hpp"
#include "cpu.hpp"
#include "options.hpp"
#include "report.hpp"
#include "workers.hpp"

namespace bench {

namespace {

struct Context {
	const Options &opts;
	const me::Device &dev;
	me::PeerInfo server;
	Channel &chan;
	Sink &sink;
	unsigned links;
};

std::uint64_t random64()
{
	std::random_device rd;
	return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// Waits for the server's message of `kind` in `session`.
me::Result<Msg> await(const Context &cx, Kind kind, std::uint64_t session,
		      std::chrono::seconds limit)
{
	auto deadline = Clock::now() + limit;
	int absent = 0;
	while (Clock::now() < deadline) {
		auto r = receive(cx.dev, cx.server.node_id, std::chrono::seconds(1));
		if (!r)
			return r.error();
		if (!r->has_value()) {
			if (!still_there(cx.dev, cx.server, absent))
				return failure("the server node " + std::to_string(cx.server.node_id) +
					       " went away");
			continue;
		}
		const Msg &m = r->value().msg;
		if (m.session != session || m.kind != kind) {
			std::fprintf(stderr, "me_bench: ignoring a stray message (kind %u)\n",
				     static_cast<unsigned>(m.kind));
			continue;
		}
		if (m.status)
			return failure("the server failed: " + text_of(m));
		return m;
	}
	return failure("the server did not answer within " + std::to_string(limit.count()) + " s");
}

// The error to show from the threads' results: a real one before the
// "stopped because another thread failed" of the others.
template <typename R>
std::optional<me::Error> first_error(const std::vector<std::optional<R>> &results)
{
	std::optional<me::Error> first;
	for (const auto &r : results) {
		if (!r || r->ok())
			continue;
		if (r->error().message().find("another thread failed") == std::string::npos)
			return r->error();
		if (!first)
			first = r->error();
	}
	return first;
}

me::Status measure(const Context &cx, Test test, std::uint64_t session, unsigned depth,
		   std::vector<std::unique_ptr<Endpoint>> &eps,
		   const std::vector<me::RemoteRegion> &targets, std::uint64_t size)
{
	const Options &o = cx.opts;
	const unsigned n = o.threads;
	RunSpec spec;
	spec.size = size;
	spec.depth = depth;
	spec.seconds = o.seconds;
	spec.warmup = o.warmup;
	spec.min_ops = (o.min_iters + n - 1) / n;
	spec.salt = random64();
	spec.misalign = cx.opts.misalign;

	Msg begin = make_msg(Kind::Begin, session);
	begin.size = size;
	begin.seconds_ns = static_cast<std::uint64_t>(o.seconds * 1e9);
	begin.warmup_ns = static_cast<std::uint64_t>(o.warmup * 1e9);
	begin.min_ops = spec.min_ops;
	if (auto st = cx.chan.send(begin); !st)
		return st;

	Phase phase(n);
	phase.stats_dev = &cx.dev;
	std::vector<std::optional<me::Result<ThreadResult>>> results(n);
	{
		std::vector<std::jthread> threads;
		for (unsigned t = 0; t < n; t++)
			threads.emplace_back([&, t] {
				if (test == Test::PingPong)
					results[t] = run_pingpong(*eps[t], targets[t], t, spec, phase);
				else if (test == Test::Read)
					results[t] = run_reader(*eps[t], targets[t], t, spec, phase);
				else if (test == Test::OpRate)
					results[t] = run_oprate(*eps[t], targets[t], t, spec, phase,
								o.door, o.batch);
				else
					results[t] = run_writer(*eps[t], targets[t], t, spec, phase);
			});
	}
	if (auto e = first_error(results)) {
		// Tell the server this session ends; the caller says Bye.
		(void)cx.chan.send(make_msg(Kind::End, session));
		return *e;
	}
	if (auto st = cx.chan.send(make_msg(Kind::End, session)); !st)
		return st;
	auto peer = await(cx, Kind::Result, session,
			  std::chrono::seconds(120 + static_cast<long>(o.seconds * 10)));
	if (!peer)
		return peer.error();

	Row row;
	row.label = o.label;
	row.test = test_name(test);
	row.size = size;
	row.threads = n;
	row.depth = depth;
	row.links = cx.links;
	std::vector<std::uint64_t> lat;
	std::uint64_t calls = 0;
	double syscall_us = 0;
	for (auto &r : results) {
		row.ops += r->value().ops;
		row.bytes += r->value().bytes;
		calls += r->value().calls;
		syscall_us += r->value().syscall_us / n;
		lat.insert(lat.end(), r->value().lat_ns.begin(), r->value().lat_ns.end());
	}
	row.seconds = seconds_between(phase.start, phase.end);
	row.mbps = static_cast<double>(row.bytes) / 1e6 / row.seconds;
	if (test == Test::TwoWay) {
		double peer_s = static_cast<double>(peer->elapsed_ns) / 1e9;
		if (peer->ops == 0 || peer_s <= 0)
			return failure("the server's writers measured nothing");
		row.ops += peer->ops;
		row.bytes += peer->bytes;
		row.mbps += static_cast<double>(peer->bytes) / 1e6 / peer_s;
	}
	auto l = summarize(lat);
	if (test == Test::PingPong) {
		row.rtt_median_us = l.median_us;
		row.rtt_p99_us = l.p99_us;
		row.lat_median_us = l.median_us / 2;
		row.lat_p99_us = l.p99_us / 2;
		row.lat_mean_us = l.mean_us / 2;
	} else {
		row.lat_median_us = l.median_us;
		row.lat_p99_us = l.p99_us;
		row.lat_mean_us = l.mean_us;
	}
	row.ops_per_s = static_cast<double>(row.ops) / row.seconds;
	if (test == Test::OpRate) {
		row.door = door_name(o.door);
		row.batch = o.door == Door::Uring || o.batch > 1 ? o.batch : 0;
		if (row.ops)
			row.calls_per_op = static_cast<double>(calls) / static_cast<double>(row.ops);
		row.post_syscall_us = syscall_us;
	}
	if (phase.cpu_ok) {
		row.cpu_util = cpu_util(phase.cpu_start, phase.cpu_end);
		row.cpu_us_per_mb = cpu_us_per_mb(phase.cpu_start, phase.cpu_end, row.bytes);
		row.cpu_us_per_op = cpu_us_per_op(phase.cpu_start, phase.cpu_end, row.ops);
	}
	if (!phase.stats_start.empty() && !phase.stats_end.empty() && row.ops) {
		auto delta = [&](const char *name) -> std::uint64_t {
			std::uint64_t a = counter(phase.stats_start, name);
			std::uint64_t b = counter(phase.stats_end, name);
			return b >= a ? b - a : 0;
		};
		const std::uint64_t data = delta("tx_data");
		const std::uint64_t rtx = delta("tx_rtx_loss") + delta("tx_rtx_rto") +
					  delta("tx_rtx_fail");
		const std::uint64_t sent = frames_sent(phase.stats_end) - frames_sent(phase.stats_start);
		row.pkts_per_op = static_cast<double>(sent) / static_cast<double>(row.ops);
		if (data)
			row.rtx_pct = 100.0 * static_cast<double>(rtx) / static_cast<double>(data);
		row.rto_per_s = static_cast<double>(delta("rto_fired")) / row.seconds;
	}
	if (peer->cpu_total)
		row.peer_cpu_util = 100.0 * static_cast<double>(peer->cpu_busy) /
				    static_cast<double>(peer->cpu_total);
	// The server's busy time over Begin..End, scaled to the measured
	// window (its busy share is taken to be the same in both).
	if (peer->cpu_total && peer->window_ns && row.ops)
		row.peer_cpu_us_per_op = ticks_to_us(peer->cpu_busy) /
					 (static_cast<double>(peer->window_ns) / 1e9) * row.seconds /
					 static_cast<double>(row.ops);
	if (peer->frames != kNoFrames && peer->window_ns && row.ops)
		row.peer_pkts_per_op = static_cast<double>(peer->frames) /
				       (static_cast<double>(peer->window_ns) / 1e9) * row.seconds /
				       static_cast<double>(row.ops);
	return cx.sink.write(row);
}

me::Status session(const Context &cx, Test test)
{
	const Options &o = cx.opts;
	const std::uint64_t session = random64();
	const unsigned depth = test == Test::PingPong ? 1 : o.depth;
	const std::size_t slots = static_cast<std::size_t>(depth) * o.max_size;
	// Only twoway and pingpong write into the client.
	const bool written = test == Test::TwoWay || test == Test::PingPong;
	const std::size_t dst_len = written ? slots : 0;

	std::vector<std::unique_ptr<Endpoint>> eps;
	Msg hello = make_msg(Kind::Hello, session);
	hello.test = test;
	hello.threads = o.threads;
	hello.depth = depth;
	hello.max_size = o.max_size;
	for (unsigned t = 0; t < o.threads; t++) {
		auto ep = Endpoint::create(cx.server.node_id, slots + o.misalign, dst_len);
		if (!ep)
			return ep.error();
		if (dst_len)
			hello.regions[t] = {ep.value()->dst->id(), 0, ep.value()->dst->key()};
		eps.push_back(std::move(ep).value());
	}
	if (auto st = cx.chan.send(hello); !st)
		return st;
	auto ready = await(cx, Kind::Ready, session, std::chrono::seconds(120));
	if (!ready)
		return ready.error();
	std::vector<me::RemoteRegion> targets;
	for (unsigned t = 0; t < o.threads; t++)
		targets.push_back({ready->regions[t].id, ready->regions[t].key, slots});

	for (auto size : sweep_sizes(o))
		if (auto st = measure(cx, test, session, depth, eps, targets, size); !st) {
			(void)cx.chan.send(make_msg(Kind::Bye, session));
			return st;
		}
	return cx.chan.send(make_msg(Kind::Bye, session));
}

me::Status client(const Options &o)
{
	auto started = start_role(o, "client", "the server");
	if (!started)
		return started.error();
	me::Device &dev = started->dev;
	const me::PeerInfo &server = started->peer;
	auto links = dev.links();
	if (!links)
		return links.error();
	auto chan = Channel::open(dev, server.node_id);
	if (!chan)
		return chan.error();
	auto sink = Sink::open(o.csv, o.json);
	if (!sink)
		return sink.error();
	std::printf("me_bench client: server is node %u, %zu link%s\n", server.node_id,
		    links->size(), links->size() == 1 ? "" : "s");

	Context cx{o, dev, server, chan.value(), sink.value(),
		   static_cast<unsigned>(links->size())};
	me::Status result;
	for (Test t : o.tests) {
		result = session(cx, t);
		if (!result)
			break;
	}
	if (!o.keep_server || !result) {
		Msg bye = make_msg(Kind::Bye, 0);
		bye.finished = 1;
		bye.status = result ? 0 : 1;
		if (auto st = chan->send(bye); !st && result)
			return st;
	}
	return result;
}

} // namespace

int run_client(const Options &opts)
{
	if (auto st = client(opts); !st) {
		std::fprintf(stderr, "me_bench: %s\n", st.error().message().c_str());
		return 1;
	}
	return 0;
}

} // namespace bench
