// Guest tests: streams of writes between nodes of a Cluster.
//
// Each stream keeps `depth` writes of `len` bytes in flight from one node
// to another, checks the bytes of each at the target when it completes,
// records when each completed, and posts the next (the source changes a
// byte each time, so a write is told apart from the one before).  One
// thread per sending node drives that node's Device.
//
//   Streams st(c, {{1, 0}, {2, 0}}, seed);      // two writers into node 0
//   ASSERT_TRUE(st.start());
//   ... sleep, measure ...
//   st.stop();                                  // waits for what is in flight
//   for (const Stream &s : st.streams()) EXPECT_TRUE(s.failures.empty());
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster.hpp"

namespace metest {

struct Stream {
	int from = 0, to = 0;
	std::vector<std::chrono::steady_clock::time_point> done;	// completion times
	std::vector<std::string> failures;
	std::uint64_t ops = 0;
};

class Streams {
public:
	using Clock = std::chrono::steady_clock;
	static constexpr auto kOpTimeout = std::chrono::seconds(30);

	Streams(Cluster &c, const std::vector<std::pair<int, int>> &pairs, std::uint64_t seed,
		unsigned depth = 4, std::uint32_t len = 32u << 10)
		: c_(c), seed_(seed), depth_(depth), len_(len)
	{
		for (auto [a, b] : pairs) {
			Stream s;
			s.from = a;
			s.to = b;
			streams_.push_back(s);
		}
	}

	Streams(const Streams &) = delete;
	Streams &operator=(const Streams &) = delete;

	::testing::AssertionResult start()
	{
		for (auto &s : streams_) {
			auto src = std::make_unique<Buffer>(size_t{len_} * depth_);
			auto dst = std::make_unique<Buffer>(size_t{len_} * depth_);
			fill_random(src->data(), src->size(),
				    seed_ + static_cast<unsigned>(s.from * 16 + s.to));
			auto ms = c_.dev(s.from).register_memory(src->data(), src->size(),
								 multiedge::Access::None);
			auto md = c_.dev(s.to).register_memory(dst->data(), dst->size(),
							       multiedge::Access::RemoteWrite);
			if (!ms || !md)
				return ::testing::AssertionFailure() << "cannot register stream memory";
			auto conn = c_.dev(s.from).connect(c_.id(s.to));
			if (!conn)
				return ::testing::AssertionFailure() << conn.error().message();
			res_.push_back(std::make_unique<Res>(Res{std::move(src), std::move(dst),
								  std::move(ms).value(), std::move(md).value(),
								  std::move(conn).value()}));
		}
		// One thread per sending node: a Device is driven by one thread.
		std::map<int, std::vector<size_t>> by_node;
		for (size_t k = 0; k < streams_.size(); k++)
			by_node[streams_[k].from].push_back(k);
		for (auto &[n, ks] : by_node)
			threads_.emplace_back([this, n = n, ks = ks] { drive(n, ks); });
		return ::testing::AssertionSuccess();
	}

	void stop()
	{
		stop_ = true;
		for (auto &t : threads_)
			t.join();
		threads_.clear();
	}

	~Streams()
	{
		if (!threads_.empty())
			stop();
	}

	const std::vector<Stream> &streams() const { return streams_; }
	std::uint32_t len() const { return len_; }

	static double ms_between(Clock::time_point t0, Clock::time_point t)
	{
		return std::chrono::duration<double, std::milli>(t - t0).count();
	}

	// The longest time without a completion of s in [t0, t1].
	static double longest_gap_ms(const Stream &s, Clock::time_point t0, Clock::time_point t1)
	{
		double gap = 0;
		Clock::time_point prev = t0;
		for (auto t : s.done) {
			if (t < t0)
				continue;
			if (t > t1)
				break;
			gap = std::max(gap, ms_between(prev, t));
			prev = t;
		}
		return std::max(gap, ms_between(prev, t1));
	}

	// Operations s completed after t.
	static std::uint64_t done_after(const Stream &s, Clock::time_point t)
	{
		return static_cast<std::uint64_t>(
			s.done.end() - std::lower_bound(s.done.begin(), s.done.end(), t));
	}

	// Operations s completed in [t0, t1).
	static std::uint64_t done_between(const Stream &s, Clock::time_point t0, Clock::time_point t1)
	{
		return done_after(s, t0) - done_after(s, t1);
	}

	void release() { res_.clear(); }

private:
	struct Res {
		std::unique_ptr<Buffer> src, dst;
		multiedge::MemoryRegion ms, md;
		multiedge::Connection conn;
	};

	void drive(int n, const std::vector<size_t> &ks)
	{
		multiedge::Device &dev = c_.dev(n);
		const size_t len = len_;
		// Per stream and slot: the cookie in flight there (0: free).
		std::vector<std::vector<std::uint64_t>> slot(ks.size(),
							     std::vector<std::uint64_t>(depth_, 0));
		std::uint64_t cookie = 1;
		std::map<std::uint64_t, std::pair<size_t, unsigned>> where;
		auto post = [&](size_t i, unsigned k) {
			Res &r = *res_[ks[i]];
			std::uint64_t ck = cookie++;
			auto st = r.conn.write(r.ms, k * len, multiedge::remote_of(r.md), k * len,
					       len_, ck);
			if (!st) {
				streams_[ks[i]].failures.push_back("post: " + st.error().message());
				return;
			}
			slot[i][k] = ck;
			where[ck] = {i, k};
		};
		for (size_t i = 0; i < ks.size(); i++)
			for (unsigned k = 0; k < depth_; k++)
				post(i, k);
		std::optional<Clock::time_point> stopped;
		while (!where.empty()) {
			if (stop_ && !stopped)
				stopped = Clock::now();
			if (stopped && Clock::now() - *stopped > kOpTimeout) {
				streams_[ks[0]].failures.push_back(std::to_string(where.size()) +
								   " write(s) never completed");
				return;
			}
			auto cs = dev.wait(16, std::chrono::milliseconds(100));
			if (!cs) {
				streams_[ks[0]].failures.push_back("wait: " + cs.error().message());
				return;
			}
			for (const multiedge::Completion &comp : cs.value()) {
				auto it = where.find(comp.cookie);
				if (it == where.end())
					continue;
				auto [i, k] = it->second;
				where.erase(it);
				Stream &s = streams_[ks[i]];
				Res &r = *res_[ks[i]];
				if (!comp.ok()) {
					s.failures.push_back(comp.describe());
					continue;
				}
				long diff = first_difference(r.dst->data() + k * len,
							     r.src->data() + k * len, len);
				if (diff >= 0)
					s.failures.push_back("target differs at byte " + std::to_string(diff));
				s.done.push_back(Clock::now());
				s.ops++;
				r.src->data()[k * len + s.ops % len] ^= 0x5a;
				if (!stop_)
					post(i, k);
			}
		}
	}

	Cluster &c_;
	std::uint64_t seed_;
	unsigned depth_;
	std::uint32_t len_;
	std::vector<Stream> streams_;
	std::vector<std::unique_ptr<Res>> res_;
	std::vector<std::thread> threads_;
	std::atomic<bool> stop_{false};
};

}  // namespace metest
