#include "report.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <utility>

namespace bench {

namespace {

constexpr const char *kCsvHeader =
	"label,test,size,threads,depth,ops,bytes,seconds,mbps,lat_median_us,lat_p99_us,"
	"cpu_util,cpu_us_per_mb,links,rtt_median_us,rtt_p99_us,peer_cpu_util,door,batch,ops_per_s,"
	"cpu_us_per_op,peer_cpu_us_per_op,calls_per_op,post_syscall_us,pkts_per_op,rtx_pct,"
	"rto_per_s,peer_pkts_per_op,lat_mean_us\n";

std::string csv_text(const std::string &s)
{
	if (s.find_first_of(",\"\n\r") == std::string::npos)
		return s;
	std::string out = "\"";
	for (char c : s) {
		if (c == '"')
			out += '"';
		out += c;
	}
	return out + "\"";
}

std::string json_text(const std::string &s)
{
	std::string out = "\"";
	for (unsigned char c : s) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += static_cast<char>(c);
		} else if (c < 0x20) {
			char e[8];
			std::snprintf(e, sizeof(e), "\\u%04x", c);
			out += e;
		} else {
			out += static_cast<char>(c);
		}
	}
	return out + "\"";
}

// A number, or the empty CSV field / JSON null when it is not known.
std::string num(double v, bool json)
{
	if (!std::isfinite(v))
		return json ? "null" : "";
	char s[64];
	std::snprintf(s, sizeof(s), "%.6g", v);
	return s;
}

me::Result<std::FILE *> open_append(const std::string &path)
{
	std::FILE *f = std::fopen(path.c_str(), "ae");
	if (!f)
		return me::Error::from_errno(errno, "cannot open " + path + " for appending");
	return f;
}

} // namespace

me::Result<Sink> Sink::open(const std::string &csv_path, const std::string &json_path)
{
	Sink s;
	s.csv_path_ = csv_path;
	s.json_path_ = json_path;
	if (!csv_path.empty()) {
		auto f = open_append(csv_path);
		if (!f)
			return f.error();
		s.csv_ = f.value();
		struct stat st {};
		if (::fstat(fileno(s.csv_), &st) == 0 && st.st_size == 0) {
			std::fputs(kCsvHeader, s.csv_);
			std::fflush(s.csv_);
		}
	}
	if (!json_path.empty()) {
		auto f = open_append(json_path);
		if (!f)
			return f.error();
		s.json_ = f.value();
	}
	return s;
}

Sink::Sink(Sink &&o) noexcept
	: csv_(std::exchange(o.csv_, nullptr)), json_(std::exchange(o.json_, nullptr)),
	  csv_path_(std::move(o.csv_path_)), json_path_(std::move(o.json_path_))
{
}

Sink::~Sink()
{
	if (csv_)
		std::fclose(csv_);
	if (json_)
		std::fclose(json_);
}

me::Status Sink::write(const Row &r)
{
	std::printf("%s\n", progress_line(r).c_str());
	std::fflush(stdout);
	if (csv_) {
		std::fprintf(csv_,
			     "%s,%s,%" PRIu64 ",%u,%u,%" PRIu64 ",%" PRIu64
			     ",%s,%s,%s,%s,%s,%s,%u,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
			     csv_text(r.label).c_str(), csv_text(r.test).c_str(), r.size, r.threads,
			     r.depth, r.ops, r.bytes, num(r.seconds, false).c_str(),
			     num(r.mbps, false).c_str(), num(r.lat_median_us, false).c_str(),
			     num(r.lat_p99_us, false).c_str(), num(r.cpu_util, false).c_str(),
			     num(r.cpu_us_per_mb, false).c_str(), r.links,
			     num(r.rtt_median_us, false).c_str(), num(r.rtt_p99_us, false).c_str(),
			     num(r.peer_cpu_util, false).c_str(), csv_text(r.door).c_str(),
			     r.batch ? std::to_string(r.batch).c_str() : "",
			     num(r.ops_per_s, false).c_str(), num(r.cpu_us_per_op, false).c_str(),
			     num(r.peer_cpu_us_per_op, false).c_str(),
			     num(r.calls_per_op, false).c_str(),
			     num(r.post_syscall_us, false).c_str(), num(r.pkts_per_op, false).c_str(),
			     num(r.rtx_pct, false).c_str(), num(r.rto_per_s, false).c_str(),
			     num(r.peer_pkts_per_op, false).c_str(), num(r.lat_mean_us, false).c_str());
		if (std::fflush(csv_) != 0 || std::ferror(csv_))
			return me::Error::from_errno(errno, "cannot write to " + csv_path_);
	}
	if (json_) {
		std::fprintf(json_,
			     "{\"label\":%s,\"test\":%s,\"size\":%" PRIu64 ",\"threads\":%u,"
			     "\"depth\":%u,\"ops\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"seconds\":%s,"
			     "\"mbps\":%s,\"lat_median_us\":%s,\"lat_p99_us\":%s,\"cpu_util\":%s,"
			     "\"cpu_us_per_mb\":%s,\"links\":%u,\"rtt_median_us\":%s,"
			     "\"rtt_p99_us\":%s,\"peer_cpu_util\":%s,\"door\":%s,\"batch\":%s,"
			     "\"ops_per_s\":%s,\"cpu_us_per_op\":%s,\"peer_cpu_us_per_op\":%s,"
			     "\"calls_per_op\":%s,\"post_syscall_us\":%s,\"pkts_per_op\":%s,"
			     "\"rtx_pct\":%s,\"rto_per_s\":%s,\"peer_pkts_per_op\":%s,\"lat_mean_us\":%s}\n",
			     json_text(r.label).c_str(), json_text(r.test).c_str(), r.size, r.threads,
			     r.depth, r.ops, r.bytes, num(r.seconds, true).c_str(),
			     num(r.mbps, true).c_str(), num(r.lat_median_us, true).c_str(),
			     num(r.lat_p99_us, true).c_str(), num(r.cpu_util, true).c_str(),
			     num(r.cpu_us_per_mb, true).c_str(), r.links,
			     num(r.rtt_median_us, true).c_str(), num(r.rtt_p99_us, true).c_str(),
			     num(r.peer_cpu_util, true).c_str(),
			     r.door.empty() ? "null" : json_text(r.door).c_str(),
			     r.batch ? std::to_string(r.batch).c_str() : "null",
			     num(r.ops_per_s, true).c_str(), num(r.cpu_us_per_op, true).c_str(),
			     num(r.peer_cpu_us_per_op, true).c_str(),
			     num(r.calls_per_op, true).c_str(),
			     num(r.post_syscall_us, true).c_str(), num(r.pkts_per_op, true).c_str(),
			     num(r.rtx_pct, true).c_str(), num(r.rto_per_s, true).c_str(),
			     num(r.peer_pkts_per_op, true).c_str(), num(r.lat_mean_us, true).c_str());
		if (std::fflush(json_) != 0 || std::ferror(json_))
			return me::Error::from_errno(errno, "cannot write to " + json_path_);
	}
	return {};
}

std::string progress_line(const Row &r)
{
	auto us = [](double v) {
		if (!std::isfinite(v))
			return std::string("-");
		char s[32];
		std::snprintf(s, sizeof(s), v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
		return std::string(s);
	};
	char s[256];
	std::string out;
	if (!r.door.empty()) {
		std::string variant = r.test + " " + r.door;
		if (r.batch)
			variant += " b=" + std::to_string(r.batch);
		int n = std::snprintf(s, sizeof(s),
				      "%-18s %7s  x%u: %.0f ops/s  %.2f MB/s  %s cpu-us/op  "
				      "%.2f calls/op  median %s us  cpu %.0f%%",
				      variant.c_str(), human_size(r.size).c_str(), r.threads,
				      r.ops_per_s, r.mbps, us(r.cpu_us_per_op).c_str(), r.calls_per_op,
				      us(r.lat_median_us).c_str(), r.cpu_util);
		out.assign(s, static_cast<std::size_t>(std::max(0, std::min<int>(n, sizeof(s) - 1))));
		if (std::isfinite(r.peer_cpu_util)) {
			std::snprintf(s, sizeof(s), "  server cpu %.0f%% (%s us/op)", r.peer_cpu_util,
				      us(r.peer_cpu_us_per_op).c_str());
			out += s;
		}
		if (std::isfinite(r.pkts_per_op)) {
			std::snprintf(s, sizeof(s), "  %.2f frames/op  rtx %.1f%%  %.0f rto/s",
				      r.pkts_per_op, r.rtx_pct, r.rto_per_s);
			out += s;
		}
		if (std::isfinite(r.peer_pkts_per_op)) {
			std::snprintf(s, sizeof(s), "  server %.2f frames/op", r.peer_pkts_per_op);
			out += s;
		}
		if (std::isfinite(r.post_syscall_us))
			out += "  (a refused ioctl: " + us(r.post_syscall_us) + " us)";
		return out;
	}
	int n = std::snprintf(s, sizeof(s), "%-8s %7s  x%u: %.1f MB/s  median %s us  p99 %s us  cpu %.0f%%",
			      r.test.c_str(), human_size(r.size).c_str(), r.threads, r.mbps,
			      us(r.lat_median_us).c_str(), us(r.lat_p99_us).c_str(), r.cpu_util);
	out.assign(s, static_cast<std::size_t>(std::max(0, std::min<int>(n, sizeof(s) - 1))));
	if (std::isfinite(r.rtt_median_us))
		out += "  (rtt median " + us(r.rtt_median_us) + " us, p99 " + us(r.rtt_p99_us) + " us)";
	if (std::isfinite(r.lat_mean_us))
		out += "  mean " + us(r.lat_mean_us) + " us";
	if (std::isfinite(r.peer_cpu_util)) {
		std::snprintf(s, sizeof(s), "  server cpu %.0f%%", r.peer_cpu_util);
		out += s;
	}
	return out;
}

} // namespace bench
