#!/usr/bin/env python3
"""Plots of `make bench`, after the paper's Figures 7-9.

    bench/plot.py [DIR]          (default build/bench; reads DIR/results.csv)

Writes into DIR:
  fig7-throughput.png   one-way throughput by message size, 1 link: multiedge
                        (one-way, two-way), TCP, Soft-RoCE write/read, memcpy
  fig8-latency.png      ping-pong latency by size: multiedge, TCP, Soft-RoCE
  cpu.png               CPU per MB moved and CPU busy by size (sender guest)
  fig9-links.png        1/2/4 tbf-limited links against n x one link
  loss.png              0% against 1% loss, multiedge and TCP
  netns.png             namespace testbed: multiedge against memcpy, TCP
  oprate.png            operation rate and CPU per operation, 8 B and 4 KiB
                        writes: the ioctl door against io_uring batches
  fig9-flip.png         receive placement (phase F): throughput and CPU per
                        MB by size into pinned memory and a receive area by
                        copy, lazy and eager page flip; aligned and not
Fails with a message naming what is missing when an input is absent.
"""
import csv
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from collect import phases_run  # noqa: E402

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
except ImportError:
    sys.exit("plot.py: python3-matplotlib is missing (scripts/deps installs it)")

MIB = 1048576


def die(msg):
    sys.exit(f"plot.py: {msg}")


def load(d):
    p = os.path.join(d, "results.csv")
    if not os.path.exists(p):
        die(f"{p} is missing: run bench/collect.py {d} (scripts/bench does) first")
    rows = []
    with open(p) as f:
        for r in csv.DictReader(f):
            for k in ("size", "links"):
                r[k] = int(r[k]) if r[k] else None
            for k in ("mbps", "lat_us", "lat_p99_us", "cpu_util", "cpu_us_per_mb", "peer_cpu_util",
                      "ops_per_s", "cpu_us_per_op", "peer_cpu_us_per_op"):
                r[k] = float(r[k]) if r.get(k) else None
            rows.append(r)
    ran = phases_run(d)
    if not rows and ran - {"I", "M"}:
        die(f"{p} has no rows")
    return rows


def series(rows, key, **kw):
    pts = sorted((r["size"], r[key]) for r in rows
                 if all(r.get(k) == v for k, v in kw.items()) and r[key] is not None)
    return [p[0] for p in pts], [p[1] for p in pts]


def med(xs):
    """Median of the values that are not None (None if there are none)."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def size_label(s, _=None):
    s = int(round(s))
    if s >= MIB:
        return f"{s // MIB}M"
    if s >= 1024:
        return f"{s // 1024}K"
    return str(s)


def size_axis(ax):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("message size (bytes)")
    ax.grid(True, which="major", alpha=0.3)


def need(name, xs):
    if not xs:
        die(f"no data for {name} in results.csv (was its phase run? see build/bench/logs/)")


def save(fig, d, name):
    fig.tight_layout()
    p = os.path.join(d, name)
    fig.savefig(p, dpi=90)
    plt.close(fig)
    print(f"plot.py: wrote {p}")


def fig7(rows, d):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = [("multiedge one-way", dict(system="multiedge", test="oneway", phase="A"), "o-", True),
             ("multiedge two-way (sum)", dict(system="multiedge", test="twoway", phase="A"), "o--", False),
             ("TCP (iperf3 -l)", dict(system="tcp", test="oneway", phase="A"), "s-", True),
             ("Soft-RoCE ib_write_bw", dict(system="softroce", test="write_bw", phase="A"), "^-", True),
             ("Soft-RoCE ib_read_bw", dict(system="softroce", test="read_bw", phase="A"), "v--", False),
             ("memcpy (same guest)", dict(system="memcpy", phase="A"), ":", True)]
    for name, sel, style, required in lines:
        xs, ys = series(rows, "mbps", **sel)
        if required:
            need(name, xs)
        if xs:
            ax.plot(xs, ys, style, label=name, markersize=4)
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("throughput (MB/s, 1e6 B/s)")
    ax.set_title("One-way throughput, two guests, 1 link (TCG emulation)")
    ax.legend(fontsize=8)
    save(fig, d, "fig7-throughput.png")


def fig8(rows, d):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = [("multiedge ping-pong (RTT/2, median)", dict(system="multiedge", test="pingpong", phase="A"), "o-", True),
             ("TCP me_bench tcp-pingpong (RTT/2, median)", dict(system="tcp", test="tcp-pingpong", phase="A"), "s-", False),
             ("TCP qperf tcp_lat (RTT/2, mean)", dict(system="tcp", test="pingpong", phase="A"), "s:", True),
             ("Soft-RoCE ib_write_lat (RTT/2, busy-poll)", dict(system="softroce", test="write_lat", phase="A"), "^-", False),
             ("Soft-RoCE ib_send_lat -e (RTT/2, events)", dict(system="softroce", test="send_lat", phase="A"), "^--", False),
             ("Soft-RoCE ib_read_lat (full RTT)", dict(system="softroce", test="read_lat", phase="A"), "v:", False)]
    for name, sel, style, required in lines:
        xs, ys = series(rows, "lat_us", **sel)
        if required:
            need(name, xs)
        if xs:
            ax.plot(xs, ys, style, label=name, markersize=4)
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("latency (us, median / typical)")
    ax.set_title("Ping-pong latency, two guests, 1 link (TCG emulation)")
    ax.legend(fontsize=8)
    save(fig, d, "fig8-latency.png")


def cpu(rows, d):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lines = [("multiedge one-way", dict(system="multiedge", test="oneway", phase="A"), "o-"),
             ("TCP (iperf3)", dict(system="tcp", test="oneway", phase="A"), "s-"),
             ("Soft-RoCE ib_write_bw", dict(system="softroce", test="write_bw", phase="A"), "^-"),
             ("Soft-RoCE ib_read_bw", dict(system="softroce", test="read_bw", phase="A"), "v--")]
    for name, sel, style in lines:
        xs, ys = series(rows, "cpu_us_per_mb", **sel)
        if xs:
            a1.plot(xs, ys, style, label=name, markersize=4)
        xs, ys = series(rows, "cpu_util", **sel)
        if xs:
            a2.plot(xs, ys, style, label=name, markersize=4)
    xs, ys = series(rows, "peer_cpu_util", system="multiedge", test="oneway", phase="A")
    if xs:
        a2.plot(xs, ys, "o:", label="multiedge one-way, receiver", markersize=3)
    for a in (a1, a2):
        size_axis(a)
    a1.set_yscale("log")
    a1.set_ylabel("sender CPU-us per MB")
    a1.set_title("CPU cost per MB (sender guest)")
    a2.set_ylabel("CPU busy (% of the guest's vCPU)")
    a2.set_ylim(0, 105)
    a2.set_title("CPU utilisation during the run")
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    save(fig, d, "cpu.png")


def links(rows, d):
    agg = [r for r in rows if r["system"] == "multiedge" and r["phase"] == "B"
           and "unlimited" not in r["condition"] and r["mbps"] is not None]
    need("link aggregation (phase B)", agg)
    agg.sort(key=lambda r: r["links"])
    one = next((r["mbps"] for r in agg if r["links"] == 1), None)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    xs = [str(r["links"]) for r in agg]
    ax.bar(xs, [r["mbps"] for r in agg], color="tab:blue", label="multiedge one-way 64 KiB")
    if one:
        ax.plot(xs, [one * r["links"] for r in agg], "k_", markersize=30, mew=2,
                label="n x one link (ideal)")
        for i, r in enumerate(agg):
            ax.text(i, r["mbps"], f"{r['mbps'] / one:.2f}x", ha="center", va="bottom", fontsize=9)
    unl = [r for r in rows if r["system"] == "multiedge" and r["phase"] == "B"
           and "unlimited" in r["condition"]]
    tcp = [r for r in rows if r["system"] == "tcp" and r["phase"] == "B"]
    if tcp:
        ax.axhline(tcp[0]["mbps"], color="tab:orange", ls="--", label="TCP, one limited link")
    if unl:
        ax.axhline(unl[0]["mbps"], color="tab:gray", ls=":",
                   label=f"multiedge {unl[0]['links']} links, no limit")
    cond = agg[0]["condition"].split("rate=")[-1] if "rate=" in agg[0]["condition"] else ""
    ax.set_xlabel("links (each limited with tbf" + (f" to {cond})" if cond else ")"))
    ax.set_ylabel("throughput (MB/s)")
    ax.set_title("Link aggregation (two guests)")
    ax.legend(fontsize=8)
    save(fig, d, "fig9-links.png")


def loss(rows, d):
    c = [r for r in rows if r["phase"] == "C" and r["mbps"] is not None]
    need("loss (phase C)", c)
    groups = []
    for system in ("multiedge", "tcp"):
        for s in sorted({r["size"] for r in c if r["system"] == system and r["size"] in (65536, MIB)}):
            g = {r["condition"]: r["mbps"] for r in c if r["system"] == system and r["size"] == s}
            groups.append((f"{'multiedge' if system == 'multiedge' else 'TCP'}\n{size_label(s)}",
                           g.get("loss=0%"), g.get("loss=1%")))
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    xs = range(len(groups))
    ax.bar([x - 0.2 for x in xs], [g[1] or 0 for g in groups], 0.4, label="0% loss")
    ax.bar([x + 0.2 for x in xs], [g[2] or 0 for g in groups], 0.4, label="1% loss")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([g[0] for g in groups])
    ax.set_ylabel("one-way throughput (MB/s)")
    ax.set_title("Loss: netem 1% on the link (two guests)")
    ax.legend(fontsize=8)
    save(fig, d, "loss.png")


def netns(rows, d):
    # The sweep; its paired repetitions at two sizes are a table of their own.
    ns = [r for r in rows if r["phase"] == "D" and "rep=" not in r["condition"]]
    need("namespace testbed (phase D)", ns)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for cond in sorted({r["condition"] for r in ns if r["system"] == "multiedge"}):
        xs, ys = series(ns, "mbps", system="multiedge", test="oneway", condition=cond)
        ax.plot(xs, ys, "o-", label=f"multiedge one-way, {cond}", markersize=4)
        xs, ys = series(ns, "mbps", system="multiedge", test="read", condition=cond)
        if xs:  # results from before phase D measured reads have none
            ax.plot(xs, ys, "v--", label=f"multiedge remote read, {cond}", markersize=4)
    xs, ys = series(ns, "mbps", system="memcpy")
    need("memcpy in the namespace guest", xs)
    ax.plot(xs, ys, "k:", label="memcpy (same guest)")
    ax.plot(xs, [y * 0.8 for y in ys], color="gray", ls="--", lw=0.8, label="0.8 x memcpy")
    for cond in sorted({r["condition"] for r in ns if r["system"] == "tcp" and r["mbps"] is not None}):
        xs, ys = series(ns, "mbps", system="tcp", test="oneway", condition=cond)
        ax.plot(xs, ys, "s", label=f"TCP iperf3, {cond}")
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("throughput (MB/s)")
    ax.set_title("Namespace testbed: one guest, veth (TCG emulation)")
    ax.legend(fontsize=8)
    save(fig, d, "netns.png")


def oprate(rows, d):
    u = [r for r in rows if r["phase"] == "U" and r["test"] == "oprate" and r["ops_per_s"]]
    need("operation rate (phase U)", u)

    def variant(r):
        return " ".join(w for w in r["condition"].split() if not w.startswith(("depth=", "rep=")))

    def rep_of(r):
        return next((w for w in r["condition"].split() if w.startswith("rep=")), "")

    def name(s):
        return f"{s // 1024} KiB" if s >= 1024 else f"{s} B"

    order = ["ioctl", "uring batch=1", "uring batch=16", "uring batch=64"]
    order += sorted({variant(r) for r in u} - set(order))
    labels = {"ioctl": "ioctl", "uring batch=1": "uring\nb=1", "uring batch=16": "uring\nb=16",
              "uring batch=64": "uring\nb=64"}
    sizes = sorted({r["size"] for r in u})
    fig, axes = plt.subplots(2, len(sizes), figsize=(5 * len(sizes), 7), squeeze=False)
    for col, s in enumerate(sizes):
        vs = [v for v in order if any(variant(r) == v and r["size"] == s for r in u)]
        xs = list(range(len(vs)))
        a1, a2 = axes[0][col], axes[1][col]
        ops = [med([r["ops_per_s"] for r in u if r["size"] == s and variant(r) == v]) for v in vs]
        a1.bar(xs, ops, color=["tab:gray"] + ["tab:blue"] * (len(vs) - 1))
        for x, v in zip(xs, vs):
            pts = [r["ops_per_s"] for r in u if r["size"] == s and variant(r) == v]
            a1.plot([x] * len(pts), pts, "k.", markersize=4)
        # Each bar's label: the median over repetitions of its ratio to the
        # ioctl door of the same repetition (as bench/collect.py's table).
        base = {rep_of(r): r["ops_per_s"] for r in u if r["size"] == s and variant(r) == "ioctl"}
        for x, v, o in zip(xs, vs, ops):
            rs = [r["ops_per_s"] / base[rep_of(r)] for r in u if r["size"] == s and variant(r) == v
                  and base.get(rep_of(r))]
            if o and rs:
                a1.text(x, o, f"{med(rs):.2f}x", ha="center", va="bottom", fontsize=8)
        if s == 8 and base:
            a1.axhline(3 * med(list(base.values())), color="tab:red", ls="--", lw=1,
                       label="3 x ioctl (the target)")
            a1.legend(fontsize=8)
        a1.set_title(f"{name(s)} writes: operations per second\n(bars: median; dots: repetitions; "
                     "labels: paired ratio to ioctl)", fontsize=9)
        a1.set_ylabel("ops/s")
        cli = [med([r["cpu_us_per_op"] for r in u if r["size"] == s and variant(r) == v]) for v in vs]
        srv = [med([r["peer_cpu_us_per_op"] for r in u if r["size"] == s and variant(r) == v]) for v in vs]
        a2.bar([x - 0.2 for x in xs], [c or 0 for c in cli], 0.4, label="client guest")
        a2.bar([x + 0.2 for x in xs], [c or 0 for c in srv], 0.4, label="server guest")
        a2.set_title(f"{name(s)} writes: busy CPU-us per operation (median, whole guest)",
                     fontsize=9)
        a2.set_ylabel("CPU-us / op")
        a2.legend(fontsize=8)
        for a in (a1, a2):
            a.set_xticks(xs)
            a.set_xticklabels([labels.get(v, v) for v in vs], fontsize=8)
    fig.suptitle("ioctl door vs io_uring, two guests, 1 link (TCG emulation)", fontsize=10)
    save(fig, d, "oprate.png")


def flip(rows, d):
    import re
    fl = [r for r in rows if r["phase"] == "F" and r["test"] == "oneway"]
    need("receive placement (phase F)", fl)

    def key(r):
        m = re.match(r"(\S+) misalign=(\d+)", r["condition"])
        return (m.group(1), m.group(2)) if m else (None, None)

    def medians(t, mis, k):
        pts = [(s, med([r[k] for r in fl if r["size"] == s and key(r) == (t, mis)]))
               for s in sorted({r["size"] for r in fl})]
        pts = [p for p in pts if p[1] is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    names = [("pinned", "pinned, copy", "s-"), ("area-copy", "area, copy", "o-"),
             ("area-lazy", "area, flip lazy", "^-"), ("area-eager", "area, flip eager", "v--"),
             ("pinned-zc", "pinned, copy, zc tx", "s:"), ("area-lazy-zc", "area, flip lazy, zc tx", "^:")]
    for col, mis in enumerate(("0", "100")):
        for row_, k, ylabel in ((0, "mbps", "throughput (MB/s)"), (1, "cpu_us_per_mb", "CPU-us per MB (guest)")):
            ax = axes[row_][col]
            for t, name, style in names:
                xs, ys = medians(t, mis, k)
                if xs:
                    ax.plot(xs, ys, style, label=name, markersize=4)
            size_axis(ax)
            ax.set_yscale("log")
            ax.set_ylabel(ylabel)
            ax.set_title(("page-aligned" if mis == "0" else f"{mis} B past page starts")
                         + (": throughput" if k == "mbps" else ": CPU per MB"))
            ax.legend(fontsize=7)
    fig.suptitle("Receive placement, one guest, veth MTU 9000 (TCG emulation; medians)")
    save(fig, d, "fig9-flip.png")


def mpi(rows, d):
    """Phase M (raw/mpi.txt): MPI ping-pong over multiedge and over TCP."""
    path = os.path.join(d, "raw", "mpi.txt")
    runs = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) == 6 and f[0] == "mpi":
                runs.setdefault(f[1], {}).setdefault(int(f[3]), []).append(float(f[4]))
    need("phase M (MPI)", runs)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, style, label in (("multiedge", "o-", "Open MPI over multiedge (libfabric provider)"),
                               ("tcp", "s--", "Open MPI over TCP"),
                               ("mpich:multiedge", "^-", "MPICH over multiedge (libfabric provider)"),
                               ("mpich:tcp", "v--", "MPICH over libfabric's tcp provider")):
        by_size = runs.get(name, {})
        if not by_size:
            continue
        xs = sorted(by_size)
        ax.plot(xs, [med(by_size[x]) for x in xs], style, markersize=4, label=label)
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("one-way time (us, median of rounds)")
    ax.set_title("MPI ping-pong, two nodes in one guest (TCG emulation)")
    ax.legend(fontsize=8)
    save(fig, d, "fig-mpi-pingpong.png")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/bench"
    rows = load(d)
    ran = phases_run(d)
    fails = []
    for f, phase in ((fig7, "A"), (fig8, "A"), (cpu, "A"), (links, "B"), (loss, "C"),
                     (netns, "D"), (oprate, "U"), (flip, "F"), (mpi, "M")):
        if phase not in ran:
            print(f"plot.py: {f.__name__}: phase {phase} was not run", file=sys.stderr)
            continue
        try:
            f(rows, d)
        except SystemExit as e:
            fails.append(str(e))
    for m in fails:
        print(m, file=sys.stderr)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
