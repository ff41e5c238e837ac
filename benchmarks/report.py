#!/usr/bin/env python3
"""Tables of syncblob's host-math benchmark (benchmarks/bench_math.cpp), in Markdown.

Usage:
  report.py merge OUT.json RUN.json [RUN.json ...]   fold several runs of one build (Google Benchmark
                                                    JSON) into one compact results file
  report.py LABEL=FILE.json [LABEL=FILE.json ...]    tables from results files (or from one Google
                                                    Benchmark JSON file each) > table.md
  report.py compare OLD_A.json OLD_B.json [OLD_C.json ...] NEW.json
                                                    a change against the noise: every syncblob cell
                                                    (one core: "1t"; one or two cores: "best") of NEW
                                                    against two or more runs of the old code

A row's ratio in one run is its "ratio" counter: the median, over rounds of alternating batches, of
the baseline's time per call over the row's; for a row measured in pieces (bench_math --spread, as
scripts/run-benchmarks runs it), the median over its pieces' counters. For "syncblob/best" rows
(what users get) the baseline is the faster of two limits of the same access pattern, element size
and N measured in the same rounds: the bandwidth probe on one core, and on both cores (each one
half, on a persistent helper thread). For "<impl>/1t" rows it is the probe on one core. A results
file holds several runs, each a separate process (so each samples its own placement of code and data
in memory); the tables give the median over the runs, and the syncblob rows their lowest and highest
run too."""
import json
import statistics
import sys

OPS = ["asum", "sumsq", "dot", "update", "scale"]
PATTERN = {"asum": "read1", "sumsq": "read1", "dot": "read2", "update": "rmw2", "scale": "rmw1"}
IMPLS = ["syncblob", "syncblob-raw", "syncblob-portable", "syncblob-avx2", "loop", "openblas"]
TARGET = 0.9


def row_key(name):
    """(op, type, impl, threads, N) from a benchmark name such as
    "asum/f32/syncblob/1t/1024/iterations:15/manual_time"; None for other names."""
    parts = [p for p in name.split("/") if ":" not in p and p not in ("manual_time", "real_time")]
    if len(parts) != 5:
        return None
    op, typ, impl, threads, n = parts
    return op, typ, impl, threads, int(n)


def run_values(doc):
    """One Google Benchmark output: row name -> its value (the ratio; ns per read for "access"; for
    "best" rows also ".../best-two-core/...", the share of rounds in which the two-core limit was
    faster, and ".../best-under/...", the share of pieces whose ratio is under the target).
    A row measured in pieces (repetitions, bench_math's --spread) has one entry per piece: its value
    is the median of the pieces' ratios (a piece of one round is that round's ratio), and its
    two-core share the mean of theirs. Aggregate entries are used only where no piece was reported."""
    pieces = {}
    aggregates = {}
    for b in doc["benchmarks"]:
        name = b.get("run_name", b["name"])
        key = row_key(name)
        if key is None:
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                aggregates[name] = b
            continue
        pieces.setdefault(name, []).append(b)
    for name, b in aggregates.items():
        pieces.setdefault(name, [b])
    values = {}
    for name, entries in pieces.items():
        if row_key(name)[0] == "access":
            values[name] = statistics.median(e["cpu_time"] for e in entries)
        elif all("ratio" in e for e in entries):
            values[name] = statistics.median(e["ratio"] for e in entries)
            if all("two_core_limit" in e for e in entries):
                share = statistics.fmean(e["two_core_limit"] for e in entries)
                values[name.replace("/best/", "/best-two-core/")] = share
                under = sum(e["ratio"] < TARGET for e in entries) / len(entries)
                values[name.replace("/best/", "/best-under/")] = under
    return values


def merge(out_path, paths):
    """Writes {"context": first run's context, "runs": [{row name: value}, ...]}."""
    runs = []
    context = None
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        context = context or doc.get("context", {})
        runs.append(run_values(doc))
    with open(out_path, "w") as f:
        json.dump({"context": context, "runs": runs}, f, indent=0, sort_keys=True)
        f.write("\n")


def load_runs(path):
    """(context, {row key: [value in each run]}) from a results file or a Google Benchmark file."""
    with open(path) as f:
        doc = json.load(f)
    runs = doc["runs"] if "runs" in doc else [run_values(doc)]
    rows = {}
    for run in runs:
        for name, value in run.items():
            rows.setdefault(row_key(name), []).append(value)
    return doc.get("context", {}), rows


def load(path):
    """(context, {row key: median over runs})."""
    ctx, rows = load_runs(path)
    return ctx, {k: statistics.median(v) for k, v in rows.items()}


def ratio(rows, op, typ, impl, threads, n):
    """A row's speed over its baseline: the probe of its access pattern on one thread; for two-thread
    rows the same call on one thread (the speed-up)."""
    return rows.get((op, typ, impl, threads, n))


def fmt(r):
    return "–" if r is None else f"{r:.2f}"


def sizes(rows, threads="1t"):
    return sorted({k[4] for k in rows if k[3] == threads and k[0].startswith("bw-")})


def log2(n):
    return n.bit_length() - 1


def single_thread_table(label, ctx, rows, impls, n_runs):
    ns = sizes(rows)
    shown = [n for n in ns if log2(n) % 2 == 0]
    out = [f"### {label} build, one thread (kernel path: {ctx.get('syncblob_kernel_path', '?')}; median of "
           f"{n_runs} run{'s' if n_runs != 1 else ''})", ""]
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
    out = [f"### {label} build, two threads: speed-up over one thread (wall time, measured in pairs)", ""]
    out.append("| op | type | row | " + " | ".join(f"2^{log2(n)}" for n in ns) + " |")
    out.append("|---|---|---|" + "---:|" * len(ns))
    for pattern in ("read1", "read2", "rmw1", "rmw2"):
        cells = [fmt(ratio(rows, "bw-" + pattern, "f32", "probe", "2t", n)) for n in ns]
        out.append(f"| bw-{pattern} | f32 | the machine: probe on 2 threads over 1 | " + " | ".join(cells) + " |")
    for op in OPS:
        for typ in ("f32", "f64"):
            cells = [fmt(ratio(rows, op, typ, "syncblob-forced", "2t", n)) for n in ns]
            out.append(f"| {op} | {typ} | syncblob split over 2 threads, over 1 | " + " | ".join(cells) + " |")
    return out


def control_line(label, runs):
    """The probe measured against itself: how far two identical measurements disagree."""
    medians = [statistics.median(v) for k, v in runs.items() if k[0].startswith("bw-") and k[3] == "1t"]
    singles = [x for k, v in runs.items() if k[0].startswith("bw-") and k[3] == "1t" for x in v]
    if not medians:
        return []
    return [f"Control ({label} build): each bandwidth probe measured against itself in the same pairs gave "
            f"{min(medians):.2f} to {max(medians):.2f} in the median over runs, {min(singles):.2f} to "
            f"{max(singles):.2f} in single runs, over all patterns, types and N (ideal: 1.00).", ""]


def best_table(label, rows, n_runs):
    """What users get: the default call against the faster limit, at every N."""
    ns = sorted({k[4] for k in rows if k[3] == "best"})
    if not ns:
        return []
    out = [f"### {label} build: syncblob (default settings) against the faster limit, one core or two (median of "
           f"{n_runs} run{'s' if n_runs != 1 else ''}; bold: under {TARGET})", ""]
    out.append("| op | type | " + " | ".join(f"2^{log2(n)}" for n in ns) + " |")
    out.append("|---|---|" + "---:|" * len(ns))
    for op in OPS:
        for typ in ("f32", "f64"):
            cells = []
            for n in ns:
                r = rows.get((op, typ, "syncblob", "best", n))
                cells.append("–" if r is None else (f"**{r:.2f}**" if r < TARGET else f"{r:.2f}"))
            out.append(f"| {op} | {typ} | " + " | ".join(cells) + " |")
    for kind, label in (("best-two-core", "two-core limit faster, share of rounds"),
                        ("best-under", f"pieces under {TARGET}, share")):
        cells = []
        for n in ns:
            shares = [rows.get((op, typ, "syncblob", kind, n)) for op in OPS for typ in ("f32", "f64")]
            shares = [x for x in shares if x is not None]
            cells.append(fmt(sum(shares) / len(shares)) if shares else "–")
        out.append(f"| ({label}) | all | " + " | ".join(cells) + " |")
    return out


def summary_table(builds):
    """One line per op and type: for syncblob in each build, the smallest median over N (and the
    lowest single run); for the other rows the smallest median over N."""
    out = ["### Summary: smallest ratio over N = 2^10 … 2^26, one thread", "",
           "Each cell: the smallest, over N, of the median over runs; for syncblob, in brackets, the "
           "lowest single run at any N.", ""]
    cols = []
    for label in builds:
        cols += [(label, "syncblob"), (label, "syncblob-raw"), (label, "syncblob-portable")]
    first = next(iter(builds))
    cols += [(first, "loop"), (first, "openblas")]
    out.append("| op | type |" + "".join(f" {label} {impl} |" for label, impl in cols))
    out.append("|---|---|" + "---:|" * len(cols))
    for op in OPS:
        for typ in ("f32", "f64"):
            cells = []
            for label, impl in cols:
                runs = builds[label]
                per_n = [v for k, v in runs.items() if k[:4] == (op, typ, impl, "1t")]
                if not per_n:
                    cells.append("–")
                    continue
                low = min(statistics.median(v) for v in per_n)
                if impl == "syncblob":
                    cells.append(f"{low:.2f} ({min(min(v) for v in per_n):.2f})")
                else:
                    cells.append(fmt(low))
            out.append(f"| {op} | {typ} | " + " | ".join(cells) + " |")
    return out


def verdict(builds):
    """Which syncblob cells (build, op, type, N) are under the target in the median over runs: the
    "best" rows (the default call against the faster limit) where the run has them."""
    under = []
    cells = 0
    for label, runs in builds.items():
        kind = "best" if any(k[3] == "best" for k in runs) else "1t"
        for (op, typ, impl, threads, n), v in sorted(runs.items()):
            if impl == "syncblob" and threads == kind and op in OPS:
                cells += 1
                m = statistics.median(v)
                if m < TARGET:
                    under.append(f"{label} {op} {typ} 2^{log2(n)}: {m:.2f}")
    if not under:
        return [f"Target (syncblob ≥ {TARGET} of the faster limit at every N, both builds): met in the median over "
                f"runs at all {cells} cells.", ""]
    return [f"Target (syncblob ≥ {TARGET} of the faster limit at every N, both builds): {len(under)} of {cells} "
            f"cells under it in the median over runs: " + "; ".join(under) + ".", ""]


def tables(args):
    builds = {}
    loaded = []
    for arg in args:
        label, path = arg.split("=", 1)
        ctx, runs = load_runs(path)
        builds[label] = runs
        loaded.append((label, ctx, runs))
    out = verdict(builds)
    for label, ctx, runs in loaded:
        rows = {k: statistics.median(v) for k, v in runs.items()}
        n_runs = max(len(v) for v in runs.values())
        out += best_table(label, rows, n_runs) + [""]
    out += summary_table(builds) + [""]
    for label, ctx, runs in loaded:
        rows = {k: statistics.median(v) for k, v in runs.items()}
        n_runs = max(len(v) for v in runs.values())
        out += single_thread_table(label, ctx, rows, IMPLS, n_runs)
        out.append("")
        out += control_line(label, runs)
        out += two_thread_table(label, rows)
        out.append("")
        hd = rows.get(("access", "f32", "host_data", "1t", 1))
        raw = rows.get(("access", "f32", "raw-pointer", "1t", 1))
        if hd and raw:
            out.append(f"Steady-state `host_data()[i]`: {hd:.2f} ns per read against {raw:.2f} ns through a raw "
                       f"pointer ({label} build).")
            out.append("")
    return out


def compare(olds, new):
    """A change against the noise of the old code: per table (one core, the faster of one or two
    cores), the spread between the old runs (|A - B| over every pair of them: its median and 95th
    percentile over the table's cells), NEW against the mean of the old runs, and the cells of NEW
    that are slower than every old run by more than that table's 95th percentile (as ratios to the
    limit)."""
    runs = [{k: statistics.median(v) for k, v in load_runs(p)[1].items()} for p in (*olds, new)]
    old, n = runs[:-1], runs[-1]
    names = "ABCDEFGH"[:len(old)]
    out = []
    for threads, title in (("1t", "one core"), ("best", "one or two cores (the faster limit)")):
        keys = sorted(k for k in old[0] if k[2] == "syncblob" and k[3] == threads and k[0] in OPS and k in n and
                      all(k in o for o in old))
        if not keys:
            continue
        noise = sorted(abs(x[k] - y[k]) for k in keys for i, x in enumerate(old) for y in old[i + 1:])
        p95 = noise[min(len(noise) - 1, int(0.95 * len(noise)))]
        mean = {k: statistics.mean(o[k] for o in old) for k in keys}
        change = [n[k] - mean[k] for k in keys]
        slower = [k for k in keys if n[k] < min(o[k] for o in old) - p95]
        pairs = " and ".join(names) if len(old) == 2 else "each pair of " + ", ".join(names)
        out += [f"### {title}: {len(keys)} cells", "",
                f"- old {pairs}: median |difference| {statistics.median(noise):.3f}, 95th percentile {p95:.3f}, "
                f"largest {noise[-1]:.3f}",
                f"- new against the mean of the old runs: median {statistics.median(change):+.3f}, "
                f"smallest {min(change):+.3f}, largest {max(change):+.3f}",
                f"- new slower than every old run by more than {p95:.3f}: {len(slower)} cells" +
                ("" if not slower else ": " + "; ".join(
                    f"{k[0]} {k[1]} 2^{log2(k[4])} {n[k]:.2f} (" +
                    ", ".join(f"{c} {o[k]:.2f}" for c, o in zip(names, old)) + ")" for k in slower)), ""]
        out.append("| op | type | " + " | ".join(f"2^{log2(s)}" for s in sorted({k[4] for k in keys})) + " |")
        out.append("|---|---|" + "---:|" * len({k[4] for k in keys}))
        for op in OPS:
            for typ in ("f32", "f64"):
                cells = []
                for size in sorted({k[4] for k in keys}):
                    k = (op, typ, "syncblob", threads, size)
                    cells.append("–" if k not in n else f"{n[k] - mean[k]:+.2f}")
                out.append(f"| {op} | {typ} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "merge":
        merge(sys.argv[2], sys.argv[3:])
        return
    if len(sys.argv) >= 5 and sys.argv[1] == "compare":
        print("\n".join(compare(sys.argv[2:-1], sys.argv[-1])))
        return
    if len(sys.argv) < 2 or any("=" not in a for a in sys.argv[1:]):
        sys.exit(__doc__)
    print("\n".join(tables(sys.argv[1:])))


if __name__ == "__main__":
    main()
