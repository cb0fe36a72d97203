// Guest tests of the io_uring door (IORING_OP_URING_CMD, ABI 5) through
// libmultiedge's UringQueue and through raw SQEs: data land and every
// operation completes exactly once, on own and application rings, 64- and
// 128-byte SQEs; bad commands; thousands in flight; the ring torn down, the
// descriptor closed and the process killed with operations in flight; a
// process where io_uring is forbidden keeps the ioctl path.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <liburing.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <map>
#include <set>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using multiedge::Access;
using multiedge::Completion;
using multiedge::CompletionType;
using multiedge::MemoryRegion;
using multiedge::RemoteRegion;
using multiedge::UringQueue;

namespace {

class UringTest : public ClusterTest {
protected:
	// Nodes 0 and 1 on `links` links, a connection 0 -> 1, a local region
	// on node 0 and a target region on node 1, both kLen, random contents.
	void SetUpPair(unsigned links = 1)
	{
		ASSERT_NO_FATAL_FAILURE(make_pair(links));
		local_.emplace(kLen);
		target_.emplace(kLen);
		fill_random(local_->data(), kLen, 11);
		fill_random(target_->data(), kLen, 12);
		auto l = c_->dev(0).register_memory(local_->data(), kLen, Access::None);
		ME_ASSERT_OK(l);
		mr_local_.emplace(std::move(l).value());
		auto t = c_->dev(1).register_memory(target_->data(), kLen, Access::RemoteReadWrite);
		ME_ASSERT_OK(t);
		mr_target_.emplace(std::move(t).value());
		remote_ = multiedge::remote_of(*mr_target_);
		auto cn = c_->dev(0).connect(c_->id(1));
		ME_ASSERT_OK(cn);
		conn_.emplace(std::move(cn).value());
	}

	void TearDown() override
	{
		conn_.reset();
		mr_local_.reset();
		mr_target_.reset();
		ClusterTest::TearDown();
	}

	// Reaps exactly `n` completions (at most 60 s), each user_data once.
	std::vector<Completion> reap_all(UringQueue &q, size_t n)
	{
		std::vector<Completion> all;
		auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
		while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
			auto r = q.reap(n - all.size(), 1, std::chrono::seconds(5));
			if (!r) {
				ADD_FAILURE() << r.error().message();
				break;
			}
			all.insert(all.end(), r->begin(), r->end());
		}
		EXPECT_EQ(all.size(), n) << "completions missing";
		std::set<uint64_t> seen;
		for (auto &c : all)
			EXPECT_TRUE(seen.insert(c.cookie).second) << "completed twice: " << c.describe();
		return all;
	}

	static constexpr size_t kLen = 1 << 20;
	std::optional<Buffer> local_, target_;
	std::optional<MemoryRegion> mr_local_, mr_target_;
	std::optional<multiedge::Connection> conn_;
	RemoteRegion remote_;
};

} // namespace

TEST_F(UringTest, ModuleReportsTheFeature)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	auto info = c_->dev(0).query();
	ME_ASSERT_OK(info);
	EXPECT_EQ(info->abi_version, static_cast<unsigned>(ME_ABI_VERSION));
	EXPECT_TRUE(info->features & ME_FEATURE_URING_CMD);
}

class UringSqe : public UringTest, public ::testing::WithParamInterface<bool> {};

TEST_P(UringSqe, WritesAndReadsLandAndCompleteOnce)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair());
	UringQueue::Options o;
	o.sqe128 = GetParam();
	auto q = UringQueue::create(c_->dev(0), o);
	ME_ASSERT_OK(q);

	// 64 writes of 4 KiB at distinct offsets, one submit.
	constexpr uint32_t kN = 64, kSz = 4096;
	for (uint32_t i = 0; i < kN; i++)
		ME_ASSERT_OK(q->write(*conn_, *mr_local_, i * kSz, remote_, i * kSz, kSz, 1000 + i));
	EXPECT_EQ(q->inflight(), kN);
	auto sub = q->submit();
	ME_ASSERT_OK(sub);
	EXPECT_EQ(sub.value(), kN);
	for (auto &c : reap_all(q.value(), kN)) {
		EXPECT_TRUE(c.ok()) << c.describe();
		EXPECT_EQ(c.type, CompletionType::Write);
		EXPECT_EQ(c.len, kSz);
		EXPECT_EQ(c.conn, conn_->id());
		EXPECT_EQ(c.peer, c_->id(1));
		EXPECT_GE(c.cookie, 1000u);
		EXPECT_LT(c.cookie, 1000u + kN);
	}
	EXPECT_EQ(q->inflight(), 0u);
	EXPECT_EQ(first_difference(local_->data(), target_->data(), kN * kSz), -1);

	// Read the target's second half back into the local first half.
	fill_random(target_->data() + kLen / 2, kLen / 2, 99);
	ME_ASSERT_OK(q->read(*conn_, *mr_local_, 0, remote_, kLen / 2, kLen / 2, 7));
	auto r = reap_all(q.value(), 1);
	ASSERT_EQ(r.size(), 1u);
	EXPECT_TRUE(r[0].ok()) << r[0].describe();
	EXPECT_EQ(r[0].type, CompletionType::Read);
	EXPECT_EQ(r[0].len, kLen / 2);
	EXPECT_EQ(first_difference(local_->data(), target_->data() + kLen / 2, kLen / 2), -1);
}

INSTANTIATE_TEST_SUITE_P(SqeSize, UringSqe, ::testing::Values(false, true),
			 [](const auto &info) { return info.param ? "Sqe128" : "Sqe64"; });
