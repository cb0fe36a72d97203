// me_bench memcpy: this machine's memory-copy bandwidth, the limit of a
// data path that copies every byte once.  Each thread copies chunks of
// the given size from one ring to another, both larger than the caches.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cpu.hpp"
#include "options.hpp"
#include "report.hpp"
#include "workers.hpp"

namespace bench {

namespace {

constexpr std::size_t kRing = 64u << 20;	// per buffer and thread
constexpr std::uint64_t kBatchBytes = 256u << 10;	// copies timed together

struct Rings {
	Buffer src, dst;
};

// Copies `size`-byte chunks for the warm-up, then the measured window.
// Small copies are timed in batches of about kBatchBytes; each batch
// gives one latency sample (its time divided by its copies).
ThreadResult copy_loop(Rings &r, std::uint64_t size, const Options &o, Phase &phase)
{
	const std::uint64_t ring = r.src.size() / size * size;
	const std::uint64_t batch = std::max<std::uint64_t>(1, kBatchBytes / size);
	ThreadResult res;
	std::uint64_t off = 0;
	bool said_warm = false, measuring = false;
	const auto begin = Clock::now();
	Clock::time_point t0;
	for (;;) {
		const auto a = Clock::now();
		for (std::uint64_t i = 0; i < batch; i++) {
			std::memcpy(r.dst.data() + off, r.src.data() + off, size);
			asm volatile("" : : "r"(r.dst.data()) : "memory");
			off += size;
			if (off >= ring)
				off = 0;
		}
		const auto b = Clock::now();
		if (!measuring) {
			if (!said_warm && seconds_between(begin, b) >= o.warmup) {
				said_warm = true;
				phase.warm();
			}
			if (phase.measuring()) {
				measuring = true;
				t0 = b;
			}
			continue;
		}
		res.ops += batch;
		res.bytes += batch * size;
		res.lat_ns.push_back(ns_between(a, b) / batch);
		if (res.ops >= o.min_iters && seconds_between(t0, b) >= o.seconds) {
			phase.finished();
			return res;
		}
	}
}

me::Status run(const Options &o)
{
	if (auto st = bind_numa(o); !st)
		return st;
	auto sink = Sink::open(o.csv, o.json);
	if (!sink)
		return sink.error();
	const std::size_t len = std::max<std::size_t>(kRing, o.max_size);
	std::vector<Rings> rings(o.threads);
	for (auto &r : rings) {
		auto s = Buffer::map(len, "a copy source");
		if (!s)
			return s.error();
		auto d = Buffer::map(len, "a copy target");
		if (!d)
			return d.error();
		r.src = std::move(s).value();
		r.dst = std::move(d).value();
		std::memset(r.src.data(), 0xa5, r.src.size());
		std::memset(r.dst.data(), 0x5a, r.dst.size());
	}
	for (auto size : sweep_sizes(o)) {
		Phase phase(o.threads);
		std::vector<ThreadResult> results(o.threads);
		{
			std::vector<std::jthread> threads;
			for (unsigned t = 0; t < o.threads; t++)
				threads.emplace_back([&, t] {
					results[t] = copy_loop(rings[t], size, o, phase);
				});
		}
		Row row;
		row.label = o.label;
		row.test = "memcpy";
		row.size = size;
		row.threads = o.threads;
		row.depth = 1;
		std::vector<std::uint64_t> lat;
		for (auto &r : results) {
			row.ops += r.ops;
			row.bytes += r.bytes;
			lat.insert(lat.end(), r.lat_ns.begin(), r.lat_ns.end());
		}
		row.seconds = seconds_between(phase.start, phase.end);
		row.mbps = static_cast<double>(row.bytes) / 1e6 / row.seconds;
		auto l = summarize(lat);
		row.lat_median_us = l.median_us;
		row.lat_p99_us = l.p99_us;
		row.lat_mean_us = l.mean_us;
		if (phase.cpu_ok) {
			row.cpu_util = cpu_util(phase.cpu_start, phase.cpu_end);
			row.cpu_us_per_mb = cpu_us_per_mb(phase.cpu_start, phase.cpu_end, row.bytes);
		}
		if (std::memcmp(rings[0].src.data(), rings[0].dst.data(), size) != 0)
			return failure("memcpy: the copy differs from its source");
		if (auto st = sink->write(row); !st)
			return st;
	}
	return {};
}

} // namespace

int run_memcpy(const Options &opts)
{
	if (auto st = run(opts); !st) {
		std::fprintf(stderr, "me_bench: %s\n", st.error().message().c_str());
		return 1;
	}
	return 0;
}

} // namespace bench
