// me_bench: the command line, parsed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"
#include "control.hpp"

namespace bench {

struct Options {
	// All modes
	std::uint64_t min_size = 8;
	std::uint64_t max_size = 4u << 20;
	std::vector<std::uint64_t> size_list;	// --sizes A,B,...: these instead of a sweep
	unsigned threads = 1;
	double seconds = 1.0;
	std::string csv, json, label;
	int numa = -1;			// node to bind to, -1: none

	// client and server
	std::chrono::seconds discover{60};
	std::uint32_t peer = 0;		// node id of the other side, 0: the one discovery finds

	// client
	std::vector<Test> tests;
	unsigned depth = 8;
	std::uint64_t min_iters = 20;
	double warmup = 0.1;
	bool keep_server = false;
	// oprate: how operations are posted
	Door door = Door::Ioctl;
	unsigned batch = 1;		// uring: SQEs prepared per submit; ioctl:
					// posts per Post::More group
	std::uint64_t misalign = 0;	// oneway: bytes past each slot's page start

	// server
	std::chrono::seconds idle{600};
	Target target = Target::Pinned;	// what the client writes into

	// tcp-pingpong and tcp-echo
	std::string connect;		// tcp-pingpong: the echo server's host
	std::uint16_t port = 18516;
};

// Binds this thread (and the threads and memory it creates later) to
// NUMA node opts.numa, when one was asked for.
me::Status bind_numa(const Options &opts);

// The sizes to measure: size_list when given, else powers of two from
// min_size to max_size.
std::vector<std::uint64_t> sweep_sizes(const Options &opts);

int run_client(const Options &opts);
int run_server(const Options &opts);
int run_memcpy(const Options &opts);
int run_tcp_echo(const Options &opts);
int run_tcp_pingpong(const Options &opts);

} // namespace bench
