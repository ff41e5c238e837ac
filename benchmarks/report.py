#!/usr/bin/env python3
"""Turns bench_math JSON files into markdown tables of ratios to the in-run bandwidth probe.

Usage: report.py LABEL=FILE.json [LABEL=FILE.json ...] > table.md

A ratio is a kernel's bytes/s divided by the bytes/s of the probe of the same access pattern,
element size, thread count and N, measured in the same run (see benchmarks/bench_math.cpp)."""
import json
import sys

PATTERN = {"asum": "read1", "sumsq": "read1", "dot": "read2", "update": "rmw2", "scale": "rmw1"}
OPS = ["asum", "sumsq", "dot", "update", "scale"]
IMPLS = ["syncblob", "syncblob-raw", "syncblob-portable", "loop", "openblas"]


def load(path):
    with open(path) as f:
        doc = json.load(f)
    rows = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"]).replace("/real_time", "")
        parts = name.split("/")
        if len(parts) != 5 or "bytes_per_second" not in b and parts[0] != "access":
            continue
        op, typ, impl, threads, n = parts
        value = b.get("bytes_per_second", b.get("cpu_time"))
        rows[(op, typ, impl, threads, int(n))] = value
        rows[("wall", op, typ, impl, threads, int(n))] = b.get("real_time")
        if parts[0] == "access":
            rows[(op, typ, impl, threads, int(n))] = b["cpu_time"]
    return doc.get("context", {}), rows


def ratio(rows, op, typ, impl, threads, n):
    k = rows.get((op, typ, impl, threads, n))
    base = rows.get(("bw-" + PATTERN[op], typ, "probe", threads, n))
    if k is None or not base:
        return None
    return k / base


def fmt(r):
    return "–" if r is None else f"{r:.2f}"


def sizes(rows, threads="1t"):
    return sorted({k[4] for k in rows if len(k) == 5 and k[3] == threads and k[0].startswith("bw-")})


def log2(n):
    return n.bit_length() - 1


def single_thread_table(label, ctx, rows, impls):
    ns = sizes(rows)
    shown = [n for n in ns if log2(n) % 2 == 0]
    out = [f"### {label} build, one thread (kernel path: {ctx.get('syncblob_kernel_path', '?')})", ""]
    out.append("| op | type | impl | " + " | ".join(f"2^{log2(n)}" for n in shown) + " | min (all N) |")
    out.append("|---|---|---|" + "---:|" * (len(shown) + 1))
    for op in OPS:
        for typ in ("f32", "f64"):
            for impl in impls:
                rs = [ratio(rows, op, typ, impl, "1t", n) for n in ns]
                if all(r is None for r in rs):
                    continue
                by_n = dict(zip(ns, rs))
                low = min(r for r in rs if r is not None)
                cells = [fmt(by_n[n]) for n in shown]
                name = f"**{impl}**" if impl == "syncblob" else impl
                out.append(f"| {op} | {typ} | {name} | " + " | ".join(cells) + f" | {low:.2f} |")
    return out


def two_thread_table(label, rows):
    ns = sizes(rows, "2t")
    if not ns:
        return []
    out = [f"### {label} build, two threads (ratio to the two-thread probe; speed-up over one thread)", ""]
    out.append("| op | type | row | " + " | ".join(f"2^{log2(n)}" for n in ns) + " |")
    out.append("|---|---|---|" + "---:|" * len(ns))
    for op in OPS:
        for typ in ("f32", "f64"):
            for impl in ("syncblob-forced", "syncblob-auto"):
                cells = [fmt(ratio(rows, op, typ, impl, "2t", n)) for n in ns]
                out.append(f"| {op} | {typ} | {impl} vs 2t probe | " + " | ".join(cells) + " |")
            cells = []
            for n in ns:  # wall-clock times of both (the one-thread rows report CPU time)
                t2 = rows.get(("wall", op, typ, "syncblob-forced", "2t", n))
                t1 = rows.get(("wall", op, typ, "syncblob", "1t", n))
                cells.append(fmt(t1 / t2 if t1 and t2 else None))
            out.append(f"| {op} | {typ} | wall-time speed-up, forced 2t over 1t | " + " | ".join(cells) + " |")
    return out


def summary_table(builds):
    """One line per op and type: the smallest ratio over N in each build, for the rows that matter."""
    out = ["### Summary: smallest ratio over N (one thread; 2^10 apart, and the median for syncblob)", ""]
    head = "| op | type |"
    cols = []
    for label in builds:
        cols += [(label, "syncblob", True), (label, "syncblob", False), (label, "syncblob-raw", None),
                 (label, "syncblob-portable", None)]
    cols += [(next(iter(builds)), "loop", None), (next(iter(builds)), "openblas", None)]
    names = {True: " @2^10", False: " 2^12..2^26 min / median", None: " min"}
    out.append(head + "".join(f" {label} {impl}{names[part]} |" for label, impl, part in cols))
    out.append("|---|---|" + "---:|" * len(cols))
    for op in OPS:
        for typ in ("f32", "f64"):
            cells = []
            for label, impl, part in cols:
                rows = builds[label]
                ns = sizes(rows)
                if part is True:
                    ns = ns[:1]
                elif part is False:
                    ns = ns[2:]
                rs = [r for r in (ratio(rows, op, typ, impl, "1t", n) for n in ns) if r is not None]
                if not rs:
                    cells.append("–")
                elif part is False:  # the smallest, and the median (single dips are mostly shared noise)
                    cells.append(f"{min(rs):.2f} / {sorted(rs)[len(rs) // 2]:.2f}")
                else:
                    cells.append(fmt(min(rs)))
            out.append(f"| {op} | {typ} | " + " | ".join(cells) + " |")
    return out


def main():
    out = []
    builds = {}
    for arg in sys.argv[1:]:
        label, path = arg.split("=", 1)
        builds[label] = load(path)[1]
    out += summary_table(builds)
    out.append("")
    for arg in sys.argv[1:]:
        label, path = arg.split("=", 1)
        ctx, rows = load(path)
        out += single_thread_table(label, ctx, rows, IMPLS)
        out.append("")
        out += two_thread_table(label, rows)
        out.append("")
        hd = rows.get(("access", "f32", "host_data", "1t", 1))
        raw = rows.get(("access", "f32", "raw-pointer", "1t", 1))
        if hd and raw:
            out.append(f"Steady-state `host_data()[i]`: {hd:.2f} ns per read against {raw:.2f} ns through a raw "
                       f"pointer ({label} build).")
            out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
