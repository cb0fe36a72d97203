#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Incast in the simulator over many seeds and warm-ups (not part of make bench).

Runs the host test Incast.many_senders_one_port (tests/unit/test_incast.cpp:
N senders write 64 KiB messages into one 10 Gbit/s port with a 256 KiB
queue) once per seed, warm-up and count of senders, and prints each run and
a summary per case: goodput (share of the port), packets resent, Jain's
fairness, senders that moved nothing in the measured time, the prober's
P99.  One seed says little (the start order decides who starves); tune
congestion control against the spread of many.

  bench/incast-sweep.py [--seeds 10] [--warm-ms 5,60] [--senders 4,16,64]
                        [--measure-ms 20] [--bin build/bin/me_unit] [--csv F]

Other environment variables reach the test unchanged (a branch's knobs).
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASE = {4: 0, 16: 1, 64: 2}	# the test's parameter index of the first seed
LINE = re.compile(r'incast +(\d+)->1 .*goodput +([\d.]+)% .*rtx +([\d.]+)%, '
		  r'Jain ([\d.]+), drops (\d+).*P99 (\d+) us')
SENDER = re.compile(r'sender \d+: (\d+) KiB')


def run_one(binp, senders, seed, warm_ns, measure_ns):
	"""One run; returns a dict of its figures, or raises on no result."""
	env = dict(os.environ, INCAST_SEED=str(seed), INCAST_WARM=str(warm_ns),
		   INCAST_MEASURE=str(measure_ns), INCAST_DEBUG='1')
	# Parameter index: senders-major, three seeds each; any index of the
	# count does, INCAST_SEED replaces its seed.
	flt = '*Incast.many_senders_one_port/%d' % (CASE[senders] * 3)
	p = subprocess.run([binp, '--gtest_filter=' + flt], env=env,
			   capture_output=True, text=True, check=False)
	starved = 0
	for line in p.stdout.splitlines():
		m = SENDER.search(line)
		if m:
			starved += m.group(1) == '0'
			continue
		m = LINE.search(line)
		if m:
			return {'senders': senders, 'seed': seed, 'warm_ms': warm_ns // 1000000,
				'goodput': float(m.group(2)), 'rtx': float(m.group(3)),
				'jain': float(m.group(4)), 'drops': int(m.group(5)),
				'p99_us': int(m.group(6)), 'starved': starved,
				'passed': p.returncode == 0}
	raise RuntimeError('no result from %s (exit %d):\n%s' % (flt, p.returncode,
								  p.stdout[-2000:] + p.stderr[-2000:]))


def main():
	ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
	ap.add_argument('--seeds', type=int, default=10)
	ap.add_argument('--warm-ms', default='5,60')
	ap.add_argument('--senders', default='4,16,64')
	ap.add_argument('--measure-ms', type=int, default=20)
	ap.add_argument('--bin', default=os.path.join(TOP, 'build/bin/me_unit'))
	ap.add_argument('--csv')
	a = ap.parse_args()
	try:
		senders = [int(s) for s in a.senders.split(',')]
		warms = [int(w) for w in a.warm_ms.split(',')]
	except ValueError:
		sys.exit('incast-sweep: --senders and --warm-ms take comma-separated integers')
	bad = [s for s in senders if s not in CASE]
	if bad:
		sys.exit('incast-sweep: the test has %s senders, not %s' % (sorted(CASE), bad))
	if a.seeds < 1 or a.measure_ms < 1 or min(warms) < 0:
		sys.exit('incast-sweep: --seeds and --measure-ms at least 1, --warm-ms at least 0')
	if not os.access(a.bin, os.X_OK):
		sys.exit('incast-sweep: %s is not built (make %s)' % (a.bin, a.bin))

	rows = []
	total = len(senders) * len(warms) * a.seeds
	for n in senders:
		for w in warms:
			for seed in range(1, a.seeds + 1):
				try:
					r = run_one(a.bin, n, seed, w * 1000000, a.measure_ms * 1000000)
				except RuntimeError as e:
					sys.exit('incast-sweep: %s' % e)
				rows.append(r)
				print('[%3d/%d] %2d->1 warm %2d ms seed %2d: goodput %5.1f%%, resent %5.2f%%, '
				      'Jain %.3f, starved %2d, P99 %5d us%s' %
				      (len(rows), total, n, w, seed, r['goodput'], r['rtx'], r['jain'],
				       r['starved'], r['p99_us'], '' if r['passed'] else '  (test failed)'),
				      flush=True)
	if a.csv:
		with open(a.csv, 'w', newline='') as f:
			wr = csv.DictWriter(f, fieldnames=list(rows[0]))
			wr.writeheader()
			wr.writerows(rows)

	print('\n| senders | warm-up | goodput median (min) | resent median (max) | '
	      'Jain median (min) | starved mean | P99 median | test failed |')
	print('|---:|---:|---|---|---|---:|---:|---:|')
	for n in senders:
		for w in warms:
			c = [r for r in rows if r['senders'] == n and r['warm_ms'] == w]
			g = [r['goodput'] for r in c]
			x = [r['rtx'] for r in c]
			j = [r['jain'] for r in c]
			print('| %d | %d ms | %.1f%% (%.1f) | %.2f%% (%.2f) | %.3f (%.3f) | %.1f | %d us | %d of %d |' %
			      (n, w, statistics.median(g), min(g), statistics.median(x), max(x),
			       statistics.median(j), min(j), statistics.mean(r['starved'] for r in c),
			       statistics.median(r['p99_us'] for r in c),
			       sum(not r['passed'] for r in c), len(c)))


if __name__ == '__main__':
	main()
