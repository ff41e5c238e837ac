#!/usr/bin/env python3
"""A stand-in for every program of the GPU check's package, for testing scripts/gpu-check --run on a
machine without a GPU (tests/cuda/test_gpu_check.py). It acts as the program its file is named after,
and as a mutant when its folder is a mutant's (not `base`), the way the real programs answer on a
machine with one GPU:

    gpu_probe             one device
    bench_gpu --out F     a report with one figure that meets its goal and one that misses it
    cuda_*_tests -r xml -d yes -o F
                          a Catch2 XML report: a passing case, and the skips gpu-expected.json lists
                          for this program on one GPU
    cuda_*_tests SPEC     the gate's run of one test: the unmutated program passes (or skips the
                          two-GPU test); a mutant fails, but for the known survivors

GPU_CHECK_FAKE_UNEXPECTED_SKIP=PROGRAM adds a case that skips for a reason no entry lists, and
GPU_CHECK_FAKE_SURVIVOR=NAME makes that mutant survive.
"""
import json
import os
import pathlib
import re
import sys
from xml.sax.saxutils import escape, quoteattr

HERE = pathlib.Path(sys.argv[0])
PROGRAM = HERE.name
MUTANT = HERE.parent.name if HERE.parent.name != "base" else None
TWO_GPU_SKIPS = {"cuda: math on two devices uses each device's cuBLAS handle":
                 "needs two CUDA devices, this machine has 1"}


def expected_skips():
    """The skips gpu-expected.json lists for this program, with the text each shows on one GPU."""
    listed = json.loads(pathlib.Path(os.environ["GPU_CHECK_EXPECTED"]).read_text())
    return [(e["test"], e["shows"] + " (as on a machine with one GPU)") for e in listed["skips"]
            if e["program"] == PROGRAM]


def catch_xml(path):
    cases = [("a case that passes", None)] + expected_skips()
    if os.environ.get("GPU_CHECK_FAKE_UNEXPECTED_SKIP") == PROGRAM:
        cases.append(("a case that skips for a reason no entry lists", "needs something this machine lacks"))
    body = []
    for name, skip in cases:
        body.append(f'    <TestCase name={quoteattr(name)} tags="[cuda]" filename="fake.cu" line="1">')
        if skip is None:
            body.append('      <OverallResult success="true" durationInSeconds="0.25"/>')
        else:
            body.append('      <OverallResult success="true" durationInSeconds="0.001">')
            body.append(f"        <StdOut>\nskipped: {escape(skip)}\n        </StdOut>")
            body.append("      </OverallResult>")
        body.append("    </TestCase>")
    pathlib.Path(path).write_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                                  f'<Catch name="{PROGRAM}">\n  <Group name="{PROGRAM}">\n' + "\n".join(body) +
                                  '\n  </Group>\n  <OverallResults successes="1" failures="0" expectedFailures="0"/>\n'
                                  "</Catch>\n")
    return 0


def one_test(spec):
    name = re.sub(r"\\(.)", r"\1", spec)
    if MUTANT is None:
        if name in TWO_GPU_SKIPS:
            print("skipped: " + TWO_GPU_SKIPS[name])
        return 0
    survivors = {"cuda.device.device_of", os.environ.get("GPU_CHECK_FAKE_SURVIVOR")}
    return 0 if MUTANT in survivors else 1


def bench(out):
    def figure(name, ratio, goal, limit=None):
        f = {"item": "1", "name": name, "unit": "GB/s", "value": 50.0 * ratio, "baseline": "cudaMemcpyAsync",
             "baseline_value": 50.0, "ratio": ratio, "pairs": 7, "goal": goal, "met": ratio >= goal}
        if limit:
            f["limit"] = limit
        return f

    report = {"schema": 1, "status": "ok", "quick": False,
              "device": {"name": "a stand-in (gpu_check_fake.py)", "compute_capability": "9.0"},
              "items": [{"item": "1", "status": "ok", "detail": "", "seconds": 0.1}],
              "figures": [figure("a copy that meets its goal", 0.98, 0.95),
                          figure("a copy that misses its goal", 0.5, 0.95, "a stand-in's limit")],
              "missing": [{"item": "7", "why": "a stand-in's missing item"}]}
    pathlib.Path(out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def main(args):
    if PROGRAM == "gpu_probe":
        print(json.dumps({"device": True, "runtime": 13000, "driver": 13000, "count": 1,
                          "devices": [{"name": "a stand-in (gpu_check_fake.py)", "compute_capability": "9.0"}]}))
        return 0
    if PROGRAM == "bench_gpu":
        return bench(args[args.index("--out") + 1])
    if "-o" in args:
        return catch_xml(args[args.index("-o") + 1])
    return one_test(args[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
