#!/usr/bin/env python3
"""scripts/gpu-check end to end on a machine without a GPU (ctest cuda.gpu_check):

1. the build's own programs packed (--build --programs-from BUILD), unpacked and run (--run): the
   run ends at once with the "no device" report and exit status 3, having recorded the commit, ldd
   of every program and the probe's reason;
2. the same path on a simulated GPU machine: stand-ins for every program (gpu_check_fake.py) and a
   few gpu-only mutants, packed and run, so that each step's judgement is exercised: expected skips
   and survivors pass, an unexpected skip or survivor fails, --budget and --only are honoured, and
   scripts/gpu-report renders the results.

    test_gpu_check.py BUILD WORK
Where BUILD's probe finds a usable GPU, part 1 would run the whole check: the test prints
"skipped: ..." instead (ctest counts it as skipped).
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "gpu-check"
FAKE = pathlib.Path(__file__).resolve().parent / "gpu_check_fake.py"
PROGRAMS = ["cuda_host_tests", "cuda_device_tests", "cuda_async_pool_tests", "cuda_checkpoint_tests",
            "cuda_nccl_tests", "cuda_nccl_checkpoint_tests", "gpu_probe", "bench_gpu"]
# (mutant, program, test) rows of a gate folder; the stand-ins kill all but the known survivors.
MUTANTS = [("cuda.device.wait", "cuda_device_tests",
            "a pull on another stream waits for device math still queued on the blob's stream"),
           ("cuda.async_pool.deallocate.sync", "cuda_async_pool_tests",
            "AsyncPool: allocate and deallocate, for users whose streams are unknown, wait for the device"),
           ("cuda.set_device", "cuda_device_tests", "cuda: math on two devices uses each device's cuBLAS handle"),
           ("cuda.device.device_of", "cuda_host_tests",
            "dlpack cuda: the device side is CUDA memory on the blob's device, both ways")]

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED: " + what, flush=True)


def gpu_check(*args, env=None):
    r = subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True, env=env)
    return r.returncode, r.stdout + r.stderr


def results(out):
    return json.loads((out / "results.json").read_text())


def steps(res):
    return {s["name"]: s for s in res["steps"]}


def no_device(build, work):
    package = work / "real"
    rc, text = gpu_check("--build", package, "--programs-from", build)
    check(rc == 0, f"--build --programs-from {build} exits 0:\n{text}")
    size = (package / "syncblob-gpu-check.tar.xz").stat().st_size
    check(f"package {size} bytes" in text, "--build prints the package's size")
    out = work / "real-out"
    start = time.monotonic()
    rc, text = gpu_check("--run", package, "--out", out)
    seconds = time.monotonic() - start
    check(rc == 3, f"--run without a device exits 3, not {rc}:\n{text}")
    check(seconds < 30, f"--run without a device ends at once, not after {seconds:.0f} s")
    res = results(out)
    check(res["status"] == "no device", f"results.json says no device, not {res['status']}")
    check("no usable CUDA device" in res.get("reason", ""), "results.json says why")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    check(res["commit"] == head, f"results.json records the commit {head}, not {res['commit']}")
    check(res["package_bytes"] == size, "results.json records the package's size")
    check(all(s["status"] == "not run" for s in res["steps"]) and len(res["steps"]) == 10, "every step is not run")
    ldd = (out / "ldd.txt").read_text()
    for program in (package / "programs" / "base").iterdir():
        check(f"== base/{program.name}" in ldd, f"ldd.txt holds {program.name}")
    check((out / "summary.txt").read_text().startswith("syncblob GPU check: no device"), "summary.txt says no device")


def fake_gate(folder):
    """A folder as scripts/mutation-gate --gpu-build writes it, of stand-ins."""
    for program in PROGRAMS:
        (folder / "base").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FAKE, folder / "base" / program)
        (folder / "base" / program).chmod(0o755)
    for name, program, _ in MUTANTS:
        (folder / name).mkdir(exist_ok=True)
        shutil.copyfile(FAKE, folder / name / program)
        (folder / name / program).chmod(0o755)
    (folder / "entries.tsv").write_text("".join(f"{n}\t{p}\t{t}\n" for n, p, t in MUTANTS))


def simulated(work):
    gate = work / "gate"
    fake_gate(gate)
    package = work / "fake"
    rc, text = gpu_check("--build", package, "--programs-from", gate)
    check(rc == 0 and "4 mutants" in text, f"--build --programs-from a gate folder packs its mutants:\n{text}")
    env = dict(os.environ, GPU_CHECK_EXPECTED=str(ROOT / "scripts" / "gpu-expected.json"))
    env.pop("OUT", None)

    out = work / "fake-out"
    rc, text = gpu_check("--run", package, "--out", out, env=env)
    res = results(out)
    s = steps(res)
    check(rc == 0, f"a run where every step meets its criterion exits 0, not {rc}:\n{text}")
    check(res["status"] == "passed", f"... and says passed, not {res['status']}")
    for program in PROGRAMS[:5]:
        check(s[f"tests {program}"]["status"] == "passed", f"tests {program} passed: {s[f'tests {program}']}")
    check(s["tests cuda_host_tests"]["counts"]["skipped as expected"] == 6, "six expected skips of cuda_host_tests")
    check(s["mutants"]["counts"] == {"killed": 2, "survived": 1, "not run": 1}, f"mutants: {s['mutants']['counts']}")
    check(s["benchmark"]["status"] == "passed" and len(s["benchmark"]["goals_missed"]) == 1,
          "a figure under its goal is reported, not failed")
    check(res["benchmark"]["figures"][1]["met"] is False, "results.json holds the benchmark's figures")
    for tool in ("memcheck", "racecheck"):
        check(s[tool]["status"] in ("skipped", "passed"), f"{tool}: {s[tool]}")

    rc, text = gpu_check("--run", package, "--out", work / "skip-out",
                         env=dict(env, GPU_CHECK_FAKE_UNEXPECTED_SKIP="cuda_nccl_tests"))
    s = steps(results(work / "skip-out"))
    check(rc == 1 and s["tests cuda_nccl_tests"]["status"] == "failed", "an unexpected skip fails the run")
    check([u["skip"] for u in s["tests cuda_nccl_tests"].get("unexpected_skips", [])] ==
          ["needs something this machine lacks"], "... and is named")

    rc, text = gpu_check("--run", package, "--out", work / "survivor-out",
                         env=dict(env, GPU_CHECK_FAKE_SURVIVOR="cuda.device.wait"))
    s = steps(results(work / "survivor-out"))
    check(rc == 1 and s["mutants"]["unexpected"] == [{"name": "cuda.device.wait", "outcome": "survived", "detail": ""}],
          f"an unexpected survivor fails the run: {s['mutants'].get('unexpected')}")

    rc, text = gpu_check("--run", package, "--out", work / "budget-out", "--budget", "4", env=env)
    s = steps(results(work / "budget-out"))
    check(rc == 1 and s["racecheck"]["status"] == "not run", "steps past the budget are not run, and fail the run")

    rc, text = gpu_check("--run", package, "--out", work / "only-out", "--only", "benchmark", env=env)
    res = results(work / "only-out")
    check(rc == 0 and res["status"] == "passed (only benchmark)", f"--only runs those steps: {res['status']}")
    check(steps(res)["mutants"]["status"] == "not selected", "... and leaves out the others")

    report = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu-report"), str(out / "results.json")],
                            capture_output=True, text=True)
    check(report.returncode == 0 and "a copy that misses its goal" in report.stdout,
          f"scripts/gpu-report renders the results:\n{report.stdout}{report.stderr}")


def main():
    build, work = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    probe = build / "tests" / "cuda" / "gpu_probe"
    if not probe.is_file():
        print(f"gpu_check_test: no {probe}: build the target gpu_probe first")
        return 1
    if subprocess.run([str(probe)], capture_output=True).returncode == 0:
        print("skipped: a CUDA device is present: this test checks the GPU check where there is none "
              "(run scripts/gpu-check itself there)")
        return 0
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    no_device(build, work)
    simulated(work)
    print(f"gpu_check_test: {len(failures)} failed" if failures else "gpu_check_test: every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
