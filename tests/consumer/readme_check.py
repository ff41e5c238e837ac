#!/usr/bin/env python3
"""Reads README.md for packaging.readme (readme.cmake).

    readme_check.py commands <source>          the ```sh blocks after "<!-- packaging.readme: run -->"
                                               lines, in order, as one bash script
    readme_check.py table <source> <c++>       checks the component table (after "<!-- components
                                               table"): every header it names exists; the core row's
                                               headers pull in nothing but syncblob and the standard
                                               library with -I include alone; every function, class or
                                               type it names is declared (a function in its row's own
                                               headers, at namespace scope). Exit 1, listing what is wrong.
"""
import pathlib
import re
import subprocess
import sys
import tempfile

RUN_MARKER = "<!-- packaging.readme: run -->"
TABLE_MARKER = "<!-- components table"


def commands(source):
    lines = (pathlib.Path(source) / "README.md").read_text().splitlines()
    script, blocks, i = ["set -euo pipefail"], 0, 0
    while i < len(lines):
        if lines[i] == RUN_MARKER:
            if i + 1 >= len(lines) or lines[i + 1] != "```sh":
                raise SystemExit(f"README.md:{i + 1}: the marker must be followed by a ```sh block")
            i += 2
            while lines[i] != "```":
                script.append(lines[i])
                i += 1
            blocks += 1
        i += 1
    if blocks < 4:
        raise SystemExit(f"README.md has {blocks} blocks marked to run; expected install, CMake, pkg-config, -I include")
    print("\n".join(script))


def _declared(name, row_headers, all_headers):
    last = name.split("::")[-1]
    type_decl = re.compile(rf"^(struct|class|using) {re.escape(last)}([ <:=;]|$)", re.M)
    if any(type_decl.search(h.read_text()) for h in all_headers):
        return True
    function_decl = re.compile(rf"^[^ /#].*[ >*&]{re.escape(last)}\(", re.M)
    return any(function_decl.search(h.read_text()) for h in row_headers if h.exists())


def table(source, cxx):
    root = pathlib.Path(source)
    lines = (root / "README.md").read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(TABLE_MARKER)), None)
    if start is None:
        print(f"README.md has no '{TABLE_MARKER} ...' line before its component table")
        return 1
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        if line.startswith("| `syncblob::"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    errors = []
    if len(rows) < 6:
        errors.append(f"the table has {len(rows)} rows; expected the core and 5 components")
    all_headers = sorted((root / "include").rglob("*.hpp"))
    for target, _needs, headers_cell, what in rows:
        headers = re.findall(r"`(syncblob/[^`]+)`", headers_cell)
        files = [root / "include" / h for h in headers]
        errors += [f"{target}: no header {h}" for h, f in zip(headers, files) if not f.exists()]
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_:]*)`", what):
            if not name.startswith("syncblob::") and not _declared(name, files, all_headers):
                errors.append(f"{target}: '{name}' is neither a type of include/ nor a function declared in {headers}")
        if target == "`syncblob::syncblob`":
            with tempfile.NamedTemporaryFile("w", suffix=".cpp") as tu:
                tu.write("".join(f"#include <{h}>\n" for h in headers))
                tu.flush()
                deps = subprocess.run([cxx, "-std=c++20", "-M", "-I", str(root / "include"), tu.name],
                                      capture_output=True, text=True)
            if deps.returncode != 0:
                errors.append(f"the core row's headers do not compile with -I include alone:\n{deps.stderr}")
            foreign = sorted({d for d in deps.stdout.split() if re.search(r"eigen3|Eigen/|nlohmann|cuda|mpi\.h|nccl", d)})
            if foreign:
                errors.append(f"the core row's headers include {', '.join(foreign[:3])}" + (" ..." if len(foreign) > 3 else ""))
    if errors:
        print("README.md's component table disagrees with include/:\n  " + "\n  ".join(errors))
        return 1
    print(f"README.md's component table: {len(rows)} rows, every header exists, every name is declared, "
          "and the core row needs nothing but -I include")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "commands":
        commands(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        sys.exit(table(sys.argv[2], sys.argv[3]))
    else:
        raise SystemExit(__doc__)
