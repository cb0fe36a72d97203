# Shared by the benchmark scripts that take a guest's busy CPU from
# /proc/stat (scripts/bench-guest, ab-ns.sh, pingpong-cost.sh): the
# whole time by the clock and the idle ticks.  A TCG guest's busy ticks
# miss time (a tick counts one jiffy to what the CPU was doing, and a
# vCPU's ticks come late while QEMU emulates a device for it or the host
# runs the other guest), while idle time is measured by the clock
# (benchmarks.md, 2026-12-06); busy is the first less the second.
# me_bench does the same (bench/cpu.cpp); profile-pair.sh reads the same
# files with shell builtins (no process inside its window).

# One line: the uptime times the CPUs online and the idle plus iowait
# ticks, both in 1/100 s.
cpu_clock() {
	awk -v nc="$(getconf _NPROCESSORS_ONLN)" 'FNR == NR {up = $1; next}
		$1 == "cpu" {printf "%.0f %d\n", up * 100 * nc, $5 + $6; exit}' /proc/uptime /proc/stat
}
