// me_bench: one result row per (test, size, threads), written as a CSV
// row, a JSON Lines object and a progress line on stdout.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common.hpp"

namespace bench {

struct Row {
	std::string label;
	std::string test;		// oneway, twoway, pingpong, oprate, read, memcpy, tcp-pingpong
	std::uint64_t size = 0;		// bytes per operation
	unsigned threads = 1;
	unsigned depth = 1;
	std::uint64_t ops = 0;		// operations measured (both directions for twoway)
	std::uint64_t bytes = 0;	// payload bytes measured (both directions for twoway)
	double seconds = 0;		// measured time
	double mbps = 0;		// 1e6 bytes/s of payload
	double lat_median_us = NAN;	// per op; pingpong: one-way latency = RTT/2
	double lat_p99_us = NAN;
	double cpu_util = NAN;		// % of all CPUs of this machine busy
	double cpu_us_per_mb = NAN;	// busy CPU-us of this machine per MB moved
	unsigned links = 0;		// links attached on this node
	// Columns after the required ones.
	double rtt_median_us = NAN;	// pingpong: the round trip itself
	double rtt_p99_us = NAN;
	double peer_cpu_util = NAN;	// the server machine's CPUs (client runs only)
	std::string door;		// oprate: ioctl or uring
	unsigned batch = 0;		// oprate uring: SQEs per submit (0: not applicable)
	double ops_per_s = NAN;		// operations completed per second
	double cpu_us_per_op = NAN;	// busy CPU-us of this machine per operation
	double peer_cpu_us_per_op = NAN;	// the same, server machine
	double calls_per_op = NAN;	// oprate: door calls (post/wait, submit/reap) per op
	double post_syscall_us = NAN;	// oprate: one refused ME_IOC_POST ioctl, wall-clock us
	// This node's engine over the measured window (Device::stats):
	double pkts_per_op = NAN;	// frames sent (data, retransmissions, acks) per op
	double rtx_pct = NAN;		// retransmissions per 100 data packets sent
	double rto_per_s = NAN;		// retransmission timeouts per second
	double peer_pkts_per_op = NAN;	// pkts_per_op of the server's engine
	double lat_mean_us = NAN;	// per op, as lat_median_us (qperf reports a mean)
};

// Where rows go.  Both files are opened in append mode; the CSV header is
// written only when the file is empty.  Each write is flushed at once, so
// an interrupted sweep keeps the rows it finished.
class Sink {
public:
	// Empty paths mean "no such file".  Fails with the errno of fopen.
	static me::Result<Sink> open(const std::string &csv_path, const std::string &json_path);

	Sink() = default;
	Sink(Sink &&o) noexcept;
	Sink &operator=(Sink &&) = delete;
	Sink(const Sink &) = delete;
	Sink &operator=(const Sink &) = delete;
	~Sink();

	// Writes the row to the files and the progress line to stdout.
	me::Status write(const Row &row);

private:
	std::FILE *csv_ = nullptr;
	std::FILE *json_ = nullptr;
	std::string csv_path_, json_path_;
};

// "oneway     64 KiB  x1: 15.2 MB/s  median 410 us  p99 900 us  cpu 93%";
// oprate: "oprate uring b=16   8 B  x1: 5321 ops/s  0.0 MB/s  188 cpu-us/op ..."
std::string progress_line(const Row &row);

} // namespace bench
