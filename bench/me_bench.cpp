// me_bench: micro-benchmarks of multiedge (after §4.1 of the MultiEdge
// paper): one-way and two-way remote-write throughput, ping-pong latency,
// and for reference the machine's memory-copy bandwidth and TCP's
// ping-pong.  This file holds the command line; the parts are
//   client.cpp   sessions and measurements, rows
//   server.cpp   serving sessions
//   workers.cpp  the measuring loops (writer, ping-pong, echo, op rate)
//   control.cpp  discovery and control messages
//   memcpy.cpp   the memory-copy reference
//   tcp.cpp      TCP's ping-pong, timed as multiedge's
//   report.cpp   CSV / JSON Lines / progress lines;  cpu.cpp  /proc/stat
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "options.hpp"

namespace bench {

std::vector<std::uint64_t> sweep_sizes(const Options &o)
{
	if (!o.size_list.empty())
		return o.size_list;
	std::vector<std::uint64_t> out;
	for (std::uint64_t s = o.min_size; s <= o.max_size; s *= 2)
		out.push_back(s);
	return out;
}

} // namespace bench

namespace {

using bench::Options;
using bench::Test;

void usage(FILE *out)
{
	std::fputs(
		"usage: me_bench server [--discover S] [--idle S] [--peer NODE] [--numa NODE] [--target T]\n"
		"       me_bench client --test oneway|twoway|pingpong|oprate|read[,...] [options]\n"
		"       me_bench memcpy [options]\n"
		"       me_bench tcp-echo [--port P] [--idle S]\n"
		"       me_bench tcp-pingpong --connect HOST [--port P] [options]\n"
		"\n"
		"Micro-benchmarks of multiedge between two nodes (multiedge.ko loaded, the same\n"
		"links attached on both).  Start `me_bench server` on one node and\n"
		"`me_bench client` on the other; both wait until discovery shows the other\n"
		"alive on every attached link.\n"
		"\n"
		"  oneway    back-to-back remote writes client -> server (throughput)\n"
		"  twoway    both sides write to each other at once; MB/s is the sum of both\n"
		"            directions, latencies are the client's\n"
		"  pingpong  the client writes SIZE bytes with write_notify, the server writes\n"
		"            them back with write_notify on the notification; latency = RTT/2\n"
		"  oprate    back-to-back remote writes client -> server, as oneway, posted\n"
		"            through --door: ioctl (one ME_IOC_POST ioctl per write,\n"
		"            completions harvested in batches by Device::wait) or uring\n"
		"            (IORING_OP_URING_CMD: --batch writes prepared, one submit, then\n"
		"            at least --batch completions reaped before the freed slots are\n"
		"            refilled); --depth writes in flight either way.  Rows carry\n"
		"            ops/s and CPU-us per operation\n"
		"  read      back-to-back remote reads of the server's region into the\n"
		"            client's (throughput; the server's CPU is the responder's)\n"
		"  memcpy    memory-copy bandwidth of this machine (no module needed): chunks\n"
		"            of SIZE copied between two 64 MiB rings per thread\n"
		"  tcp-pingpong  TCP's ping-pong for reference (no module needed): SIZE bytes\n"
		"            sent over one TCP connection (TCP_NODELAY, blocking reads) to\n"
		"            `me_bench tcp-echo` on HOST and read back, timed and summarised\n"
		"            as pingpong is (RTT/2 median, p99, mean); each echo's stamp is\n"
		"            checked.  The echo server exits when a client ends (unless\n"
		"            --keep-server) or after --idle seconds without one; a client silent\n"
		"            that long is dropped\n"
		"\n"
		"The server serves one client session (test) at a time and exits 0 when a\n"
		"client says it is finished, which a client does when it ends (unless\n"
		"--keep-server).  Every size runs --seconds after a --warmup, and at least\n"
		"--min-iters operations.  After each size the client (and, for twoway, the\n"
		"server) reads back the first and last 64 bytes of every slot's last write,\n"
		"which carry a stamp unique to that operation; pingpong checks every echo.\n"
		"A mismatch ends the run with status 1 and no row.\n"
		"\n"
		"options:\n"
		"  --test T[,T...]   client: oneway, twoway, pingpong, oprate, read (all: the first\n"
		"                    three): one session each\n"
		"  --sizes MIN:MAX   bytes per operation, powers of two, K/M/G suffixes allowed;\n"
		"                    a single SIZE runs just that, S1,S2,... just those, in\n"
		"                    that order (default 8:4194304)\n"
		"  --threads N       threads, each with its own connection and region slice\n"
		"                    (default 1, at most 32); the server mirrors them for twoway\n"
		"  --depth D         operations in flight per thread (default 8; pingpong 1)\n"
		"  --door ioctl|uring  oprate: how writes are posted (default ioctl)\n"
		"  --batch B         oprate --door uring: SQEs per submit, 1..depth (default 1);\n"
		"                    --door ioctl: writes posted together go B at a time, all but\n"
		"                    the last of each with Post::More (sent packed)\n"
		"  --seconds S       measured time per size (default 1.0)\n"
		"  --warmup S        unmeasured time before it (default 0.1)\n"
		"  --min-iters N     at least N operations per size, over all threads (default 20)\n"
		"  --numa NODE       bind threads and buffers to NUMA node NODE (libnuma)\n"
		"  --csv FILE        append one CSV row per size (header if the file is empty)\n"
		"  --json FILE       append one JSON object per size (JSON Lines: one per line)\n"
		"  --label TEXT      the label column of the rows\n"
		"  --discover S      wait up to S seconds for the peer (default 60)\n"
		"  --peer NODE       the other side's node id (default: the one discovery finds)\n"
		"  --keep-server     client: leave the server running for another client\n"
		"  --idle S          server: give up after S seconds without a client (default 600)\n"
		"  --target T        server: what oneway writes land in: pinned (registered\n"
		"                    ordinary memory, default), area-copy, area-lazy, area-eager\n"
		"                    (a receive area placed by copy, or by page flip with lazy\n"
		"                    or eager TLB invalidation)\n"
		"  --misalign N      client, oneway: write N bytes (0..4095) past each slot's\n"
		"                    start, on both sides (unaligned transfers)\n"
		"  --connect HOST    tcp-pingpong: the host running `me_bench tcp-echo`\n"
		"  --port P          tcp-pingpong, tcp-echo: TCP port (default 18516)\n"
		"\n"
		"Columns: label,test,size,threads,depth,ops,bytes,seconds,mbps,lat_median_us,\n"
		"lat_p99_us,cpu_util,cpu_us_per_mb,links,rtt_median_us,rtt_p99_us,peer_cpu_util,\n"
		"door,batch,ops_per_s,cpu_us_per_op,peer_cpu_us_per_op,calls_per_op,post_syscall_us,\n"
		"pkts_per_op,rtx_pct,rto_per_s,peer_pkts_per_op,lat_mean_us\n"
		"  mbps           payload, 1e6 bytes/s (twoway: both directions summed)\n"
		"  lat_*_us       per operation, post to completion; pingpong: RTT/2\n"
		"  cpu_util       % of all CPUs of this machine busy during the measurement\n"
		"                 (/proc/stat: (total - idle - iowait) / total)\n"
		"  cpu_us_per_mb  busy CPU-microseconds of this machine per MB moved\n"
		"  links          links attached on this node\n"
		"  rtt_*_us       pingpong: the round trip itself\n"
		"  peer_cpu_util  cpu_util of the server's machine over the same size\n"
		"  door, batch    oprate: ioctl or uring, SQEs per submit (empty otherwise)\n"
		"  ops_per_s      operations completed per second (twoway: both directions)\n"
		"  cpu_us_per_op  busy CPU-microseconds of this machine per operation\n"
		"  peer_cpu_us_per_op  the same for the server's machine (its busy share\n"
		"                 over Begin..End applied to the measured time)\n"
		"  calls_per_op   oprate: the door's calls per operation (ioctl: posts plus\n"
		"                 Device::wait calls; uring: submit() plus reap() calls)\n"
		"  post_syscall_us  oprate: wall-clock us of one ME_IOC_POST ioctl the module\n"
		"                 refuses at its first check (len 0), timed before the size:\n"
		"                 the system call and argument copy a post pays on the ioctl door\n"
		"  pkts_per_op    frames this node's engine sent per operation (data,\n"
		"                 retransmissions, acks), from Device::stats over the window\n"
		"  rtx_pct        retransmitted data packets per 100 sent for the first time\n"
		"  rto_per_s      retransmission timeouts per second\n"
		"  peer_pkts_per_op  pkts_per_op of the server's engine (over Begin..End,\n"
		"                 scaled to the measured time as peer_cpu_us_per_op is)\n"
		"  lat_mean_us    the mean of what lat_median_us is the median of\n"
		"Unknown values are empty in CSV and null in JSON.\n"
		"\n"
		"Exit status: 0 on success, 1 on any failure (including a data mismatch),\n"
		"2 on bad usage.\n",
		out);
}

[[noreturn]] void bad_usage(const std::string &msg)
{
	std::fprintf(stderr, "me_bench: %s (see me_bench --help)\n", msg.c_str());
	std::exit(2);
}

// A byte count with an optional binary K/M/G suffix.
bool parse_bytes(std::string_view s, std::uint64_t &out)
{
	std::string str(s);
	char *end = nullptr;
	errno = 0;
	unsigned long long v = std::strtoull(str.c_str(), &end, 10);
	if (errno || end == str.c_str())
		return false;
	std::string_view rest(end);
	unsigned shift = 0;
	if (rest == "K" || rest == "k" || rest == "KiB")
		shift = 10;
	else if (rest == "M" || rest == "MiB")
		shift = 20;
	else if (rest == "G" || rest == "GiB")
		shift = 30;
	else if (!rest.empty())
		return false;
	if (v > (1ull << 40) >> shift)
		return false;
	out = v << shift;
	return true;
}

bool power_of_two(std::uint64_t v)
{
	return v && !(v & (v - 1));
}

std::uint64_t parse_uint(const char *opt, const char *s, std::uint64_t min, std::uint64_t max)
{
	char *end = nullptr;
	errno = 0;
	unsigned long long v = std::strtoull(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max || s[0] == '-')
		bad_usage(std::string(opt) + " needs a whole number from " + std::to_string(min) +
			  " to " + std::to_string(max));
	return v;
}

double parse_seconds(const char *opt, const char *s, double min)
{
	char *end = nullptr;
	errno = 0;
	double v = std::strtod(s, &end);
	if (errno || end == s || *end || !std::isfinite(v) || v < min || v > 86400)
		bad_usage(std::string(opt) + " needs a number of seconds" +
			  (min > 0 ? " above 0" : " from 0"));
	return v;
}

std::vector<Test> parse_tests(std::string_view s)
{
	std::vector<Test> out;
	while (!s.empty()) {
		auto comma = s.find(',');
		auto name = s.substr(0, comma);
		if (name == "oneway")
			out.push_back(Test::OneWay);
		else if (name == "twoway")
			out.push_back(Test::TwoWay);
		else if (name == "pingpong")
			out.push_back(Test::PingPong);
		else if (name == "oprate")
			out.push_back(Test::OpRate);
		else if (name == "read")
			out.push_back(Test::Read);
		else if (name == "all")
			out.insert(out.end(), {Test::OneWay, Test::TwoWay, Test::PingPong});
		else
			bad_usage("unknown test '" + std::string(name) +
				  "' (oneway, twoway, pingpong, oprate, read or all)");
		if (comma == std::string_view::npos)
			break;
		s.remove_prefix(comma + 1);
	}
	if (out.empty())
		bad_usage("--test needs a test name");
	return out;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const std::string_view mode = argv[1];
	if (mode == "-h" || mode == "--help" || mode == "help") {
		usage(stdout);
		return 0;
	}
	if (mode != "server" && mode != "client" && mode != "memcpy" && mode != "tcp-echo" &&
	    mode != "tcp-pingpong")
		bad_usage("unknown mode '" + std::string(mode) +
			  "' (server, client, memcpy, tcp-echo or tcp-pingpong)");
	const bool server = mode == "server", client = mode == "client", copy = mode == "memcpy";
	const bool echo = mode == "tcp-echo", tcp = mode == "tcp-pingpong";

	Options o;
	for (int i = 2; i < argc; i++) {
		const std::string_view a = argv[i];
		if (a == "-h" || a == "--help") {
			usage(stdout);
			return 0;
		}
		if (a == "--keep-server" && (client || tcp)) {
			o.keep_server = true;
			continue;
		}
		// Every other option takes a value; `ok` says in which modes.
		auto takes = [&](bool ok) {
			if (!ok)
				bad_usage(std::string(a) + " does not apply to `me_bench " +
					  std::string(mode) + "`");
			if (i + 1 >= argc)
				bad_usage(std::string(a) + " needs a value");
			return argv[++i];
		};
		if (a == "--test") {
			o.tests = parse_tests(takes(client));
		} else if (a == "--sizes") {
			std::string_view v = takes(client || copy || tcp);
			if (v.find(',') != std::string_view::npos) {
				o.size_list.clear();
				o.min_size = UINT64_MAX;
				o.max_size = 0;
				while (true) {
					auto comma = v.find(',');
					std::uint64_t one = 0;
					if (!parse_bytes(v.substr(0, comma), one) || !one ||
					    one > (256u << 20))
						bad_usage("--sizes S1,S2,... needs sizes from 1 to 256M");
					o.size_list.push_back(one);
					o.min_size = std::min(o.min_size, one);
					o.max_size = std::max(o.max_size, one);
					if (comma == std::string_view::npos)
						break;
					v.remove_prefix(comma + 1);
				}
				continue;
			}
			o.size_list.clear();
			auto colon = v.find(':');
			auto lo = v.substr(0, colon);
			auto hi = colon == std::string_view::npos ? lo : v.substr(colon + 1);
			if (!parse_bytes(lo, o.min_size) || !parse_bytes(hi, o.max_size) ||
			    !power_of_two(o.min_size) || !power_of_two(o.max_size) ||
			    o.min_size > o.max_size || o.max_size > (256u << 20))
				bad_usage("--sizes needs MIN:MAX, powers of two, MIN <= MAX <= 256M");
		} else if (a == "--threads") {
			o.threads = static_cast<unsigned>(
				parse_uint(argv[i], takes(client || copy), 1, bench::kMaxThreads));
		} else if (a == "--depth") {
			o.depth = static_cast<unsigned>(parse_uint(argv[i], takes(client), 1, 1024));
		} else if (a == "--door") {
			std::string_view v = takes(client);
			if (v == "ioctl")
				o.door = bench::Door::Ioctl;
			else if (v == "uring")
				o.door = bench::Door::Uring;
			else
				bad_usage("--door needs ioctl or uring");
		} else if (a == "--batch") {
			o.batch = static_cast<unsigned>(parse_uint(argv[i], takes(client), 1, 1024));
		} else if (a == "--seconds") {
			o.seconds = parse_seconds(argv[i], takes(client || copy || tcp), 1e-3);
		} else if (a == "--warmup") {
			o.warmup = parse_seconds(argv[i], takes(client || copy || tcp), 0);
		} else if (a == "--min-iters") {
			o.min_iters = parse_uint(argv[i], takes(client || copy || tcp), 1, 1ull << 40);
		} else if (a == "--numa") {
			o.numa = static_cast<int>(parse_uint(argv[i], takes(true), 0, 4095));
		} else if (a == "--csv") {
			o.csv = takes(client || copy || tcp);
		} else if (a == "--json") {
			o.json = takes(client || copy || tcp);
		} else if (a == "--label") {
			o.label = takes(client || copy || tcp);
		} else if (a == "--discover") {
			o.discover = std::chrono::seconds(
				parse_uint(argv[i], takes(server || client || tcp), 1, 86400));
		} else if (a == "--peer") {
			o.peer = static_cast<std::uint32_t>(
				parse_uint(argv[i], takes(server || client), 1, UINT32_MAX));
		} else if (a == "--target") {
			std::string_view v = takes(server);
			if (v == "pinned")
				o.target = bench::Target::Pinned;
			else if (v == "area-copy")
				o.target = bench::Target::AreaCopy;
			else if (v == "area-lazy")
				o.target = bench::Target::AreaLazy;
			else if (v == "area-eager")
				o.target = bench::Target::AreaEager;
			else
				bad_usage("--target needs pinned, area-copy, area-lazy or area-eager");
		} else if (a == "--misalign") {
			o.misalign = parse_uint(argv[i], takes(client), 0, 4095);
		} else if (a == "--idle") {
			o.idle = std::chrono::seconds(
				parse_uint(argv[i], takes(server || echo), 1, 86400 * 7));
		} else if (a == "--connect") {
			o.connect = takes(tcp);
			if (o.connect.empty())
				bad_usage("--connect needs a host name or address");
		} else if (a == "--port") {
			o.port = static_cast<std::uint16_t>(parse_uint(argv[i], takes(tcp || echo), 1, 65535));
		} else {
			bad_usage("unknown option '" + std::string(a) + "'");
		}
	}
	if (tcp && o.connect.empty())
		bad_usage("tcp-pingpong needs --connect HOST (where `me_bench tcp-echo` runs)");
	if (client && o.tests.empty())
		bad_usage("the client needs --test oneway|twoway|pingpong|oprate|read");
	if (client && o.batch > o.depth)
		bad_usage("--batch must not exceed --depth (the writes in flight)");
	if (client && o.misalign &&
	    (o.tests.size() != 1 || o.tests[0] != bench::Test::OneWay))
		bad_usage("--misalign applies to --test oneway alone");
	if (client && o.max_size * o.depth > (1ull << 30))
		bad_usage("--depth x the largest size must not exceed 1 GiB (one region per thread)");
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	if (server)
		return bench::run_server(o);
	if (client)
		return bench::run_client(o);
	if (echo)
		return bench::run_tcp_echo(o);
	if (tcp)
		return bench::run_tcp_pingpong(o);
	return bench::run_memcpy(o);
}
