// me_bench server: serves one client session at a time until a client
// says it is finished.
#include <cinttypes>
#include <cstdio>
#include <thread>

#include "control.hpp"
#include "cpu.hpp"
#include "options.hpp"
#include "workers.hpp"

namespace bench {

namespace {

constexpr std::uint64_t kMaxRegion = 1ull << 30;	// the module's limit per region

struct Served {
	bool finished = false;	// the client asked the server to exit
};

me::Status check_hello(const Msg &h)
{
	if (h.test != Test::OneWay && h.test != Test::TwoWay && h.test != Test::PingPong &&
	    h.test != Test::OpRate && h.test != Test::Read)
		return failure("unknown test " + std::to_string(static_cast<unsigned>(h.test)));
	if (h.threads < 1 || h.threads > kMaxThreads)
		return failure("threads must be 1-" + std::to_string(kMaxThreads));
	if (h.depth < 1 || h.depth > 1024)
		return failure("depth must be 1-1024");
	if (h.max_size < 1 || h.max_size > kMaxRegion / h.depth)
		return failure("depth x largest size must not exceed 1 GiB");
	return {};
}

// The server's writers of one twoway measurement, started at Begin.
struct Writers {
	std::unique_ptr<Phase> phase;
	std::vector<std::optional<me::Result<ThreadResult>>> results;
	std::vector<std::jthread> threads;
};

me::Result<Served> serve(const me::Device &dev, const Msg &hello,
			 std::uint32_t client, Target target)
{
	const std::uint64_t session = hello.session;
	me::PeerInfo peer{};
	peer.node_id = client;
	if (auto peers = dev.peers())
		for (const auto &p : peers.value())
			if (p.node_id == client)
				peer = p;

	// A connection of its own for every session: the client may be a new
	// process on the same node (the last one ran with --keep-server), and
	// what went on its predecessor's connection reached a device that is
	// gone.
	auto chan = Channel::open(dev, client);
	if (!chan)
		return chan.error();
	auto refuse = [&](const me::Error &e) -> me::Result<Served> {
		Msg m = make_msg(Kind::Ready, session);
		m.status = 1;
		set_text(m, e.message());
		(void)chan->send(m);
		return e;
	};
	if (auto st = check_hello(hello); !st)
		return refuse(st.error());

	const Test test = hello.test;
	const unsigned n = hello.threads;
	const std::size_t slots = static_cast<std::size_t>(hello.depth) * hello.max_size;
	std::vector<std::unique_ptr<Endpoint>> eps;
	std::vector<me::RemoteRegion> back;
	Msg ready = make_msg(Kind::Ready, session);
	for (unsigned t = 0; t < n; t++) {
		// A page more than the slots: room for the client's --misalign.
		auto ep = Endpoint::create(client, test == Test::TwoWay ? slots : 4096, slots + 4096,
					   test == Test::OneWay ? target : Target::Pinned);
		if (!ep)
			return refuse(ep.error());
		ready.regions[t] = {ep.value()->dst->id(), 0, ep.value()->dst->key()};
		back.push_back({hello.regions[t].id, hello.regions[t].key, slots});
		eps.push_back(std::move(ep).value());
	}
	std::printf("me_bench server: session %016" PRIx64 " from node %u: %s, %u thread%s, depth %u\n",
		    session, client, test_name(test), n, n == 1 ? "" : "s", hello.depth);
	std::fflush(stdout);

	std::atomic<bool> stop_echo{false};
	std::vector<me::Status> echo_status(n);
	std::vector<std::jthread> echoes;
	struct StopEchoes {	// joins the echo threads on every way out
		std::atomic<bool> &stop;
		std::vector<std::jthread> &threads;
		~StopEchoes()
		{
			stop = true;
			threads.clear();
		}
	} stopper{stop_echo, echoes};
	if (test == Test::PingPong)
		for (unsigned t = 0; t < n; t++)
			echoes.emplace_back([&, t] { echo_status[t] = run_echo(*eps[t], back[t], stop_echo); });
	if (auto st = chan->send(ready); !st)
		return st.error();

	std::optional<Writers> writers;
	CpuTimes cpu0;
	bool cpu0_ok = false;
	std::uint64_t frames0 = kNoFrames;	// frames_sent() at Begin
	Clock::time_point begun = Clock::now();
	std::uint64_t sizes = 0;
	int absent = 0;
	for (;;) {
		auto r = receive(dev, client, std::chrono::seconds(1));
		if (!r)
			return r.error();
		if (!r->has_value()) {
			if (!still_there(dev, peer, absent))
				return failure("the client node " + std::to_string(client) +
					       " went away mid-session");
			continue;
		}
		const Msg &m = r->value().msg;
		if (m.kind == Kind::Bye && (m.finished || m.session == session)) {
			stop_echo = true;
			echoes.clear();
			for (auto &st : echo_status)
				if (!st)
					return st.error();
			std::printf("me_bench server: session %016" PRIx64 " over (%" PRIu64
				    " sizes)%s\n",
				    session, sizes, m.finished ? "; the client is finished" : "");
			return Served{m.finished != 0};
		}
		if (m.session != session) {
			std::fprintf(stderr, "me_bench server: ignoring a message of another session\n");
			continue;
		}
		if (m.kind == Kind::Begin) {
			sizes++;
			begun = Clock::now();
			auto c = read_cpu_times();
			cpu0_ok = c.ok();
			if (c)
				cpu0 = c.value();
			frames0 = kNoFrames;
			if (auto st = dev.stats())
				frames0 = frames_sent(st.value());
			if (test == Test::TwoWay) {
				RunSpec spec;
				spec.size = m.size;
				spec.depth = hello.depth;
				spec.seconds = static_cast<double>(m.seconds_ns) / 1e9;
				spec.warmup = static_cast<double>(m.warmup_ns) / 1e9;
				spec.min_ops = m.min_ops;
				spec.salt = session * 0x9e3779b97f4a7c15ull + m.size;
				if (m.size < 1 || m.size > hello.max_size)
					return failure("Begin: size out of range");
				writers.emplace();
				writers->phase = std::make_unique<Phase>(n);
				writers->results.resize(n);
				for (unsigned t = 0; t < n; t++)
					writers->threads.emplace_back([&w = *writers, &eps, &back, t, spec] {
						w.results[t] = run_writer(*eps[t], back[t], t, spec, *w.phase);
					});
			}
		} else if (m.kind == Kind::End) {
			Msg res = make_msg(Kind::Result, session);
			if (writers) {
				writers->threads.clear();	// joins
				std::vector<std::uint64_t> lat;
				for (auto &wr : writers->results) {
					if (!wr->ok()) {
						if (!res.status)
							set_text(res, wr->error().message());
						res.status = 1;
						continue;
					}
					res.ops += wr->value().ops;
					res.bytes += wr->value().bytes;
					lat.insert(lat.end(), wr->value().lat_ns.begin(),
						   wr->value().lat_ns.end());
				}
				res.elapsed_ns = ns_between(writers->phase->start, writers->phase->end);
				auto l = summarize(lat);
				if (!lat.empty()) {
					res.lat_median_ns = static_cast<std::uint64_t>(l.median_us * 1e3);
					res.lat_p99_ns = static_cast<std::uint64_t>(l.p99_us * 1e3);
				}
				writers.reset();
			}
			auto c = read_cpu_times();
			if (c && cpu0_ok) {
				res.cpu_busy = c->busy - cpu0.busy;
				res.cpu_total = c->total - cpu0.total;
			}
			res.window_ns = ns_between(begun, Clock::now());
			res.frames = kNoFrames;
			if (auto st = dev.stats(); st && frames0 != kNoFrames)
				res.frames = frames_sent(st.value()) - frames0;
			if (auto st = chan->send(res); !st)
				return st.error();
			if (res.status)
				std::fprintf(stderr, "me_bench server: %s\n", res.text);
		}
	}
}

me::Status server(const Options &o)
{
	auto started = start_role(o, "server", "a peer");
	if (!started)
		return started.error();
	me::Device &dev = started->dev;
	std::printf("me_bench server: peer %u is alive on every link; serving (idle limit %llds)\n",
		    started->peer.node_id, static_cast<long long>(o.idle.count()));
	std::fflush(stdout);

	auto idle_until = Clock::now() + o.idle;
	for (;;) {
		auto r = receive(dev, o.peer, std::chrono::seconds(1));
		if (!r)
			return r.error();
		if (!r->has_value()) {
			if (Clock::now() >= idle_until)
				return failure("no client for " + std::to_string(o.idle.count()) + " s");
			continue;
		}
		const Received &got = r->value();
		if (got.msg.kind == Kind::Bye && got.msg.finished) {
			std::printf("me_bench server: the client is finished%s\n",
				    got.msg.status ? " (it reported a failure)" : "");
			return {};
		}
		if (got.msg.kind != Kind::Hello) {
			std::fprintf(stderr, "me_bench server: ignoring a message outside a session\n");
			continue;
		}
		auto served = serve(dev, got.msg, got.peer, o.target);
		if (!served)
			std::fprintf(stderr, "me_bench server: session failed: %s\n",
				     served.error().message().c_str());
		else if (served->finished)
			return {};
		idle_until = Clock::now() + o.idle;
	}
}

} // namespace

int run_server(const Options &opts)
{
	if (auto st = server(opts); !st) {
		std::fprintf(stderr, "me_bench: %s\n", st.error().message().c_str());
		return 1;
	}
	return 0;
}

} // namespace bench
