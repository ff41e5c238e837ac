# SPDX-License-Identifier: BSD-2-Clause
"""The NumPy side of syncblob's .npy interoperability test (run by test_npy_numpy.cpp).

  load <file.npy> <out.raw>   np.load a file syncblob wrote; print "<descr> <shape>" and write the
                              values as little-endian C-order bytes (the test compares them)
  save <folder>               np.save a set of arrays syncblob must read, each with <name>.raw
                              (its values as little-endian bytes) and <name>.shape
  header <file.npy> <descr> <shape...>  np.save zeros of that dtype and shape (to compare bytes)
"""
import os
import sys

import numpy as np


def little(a):
    """The array's values as little-endian C-order bytes."""
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()


def cmd_load(path, out):
    a = np.load(path, allow_pickle=False)
    if a.dtype.kind == "V":  # bfloat16 written as raw 2-byte values
        a = a.view("<u2")
    shape = ",".join(str(n) for n in a.shape)
    print(a.dtype.str, shape)
    with open(out, "wb") as f:
        f.write(little(a))


def save(folder, name, a, version=None, fortran=False):
    path = os.path.join(folder, name + ".npy")
    with open(path, "wb") as f:
        if version is None:
            np.save(f, a)
        else:
            np.lib.format.write_array(f, a, version=version)
    with open(os.path.join(folder, name + ".raw"), "wb") as f:
        f.write(little(a))
    with open(os.path.join(folder, name + ".shape"), "w") as f:
        f.write(" ".join(str(n) for n in a.shape))


def cmd_save(folder):
    rng = np.random.default_rng(6)
    save(folder, "f4_le", rng.standard_normal((3, 4)).astype("<f4"))
    save(folder, "f8_be", rng.standard_normal((2, 3, 2)).astype(">f8"))
    save(folder, "i4_be", rng.integers(-2**31, 2**31 - 1, size=(5,)).astype(">i4"))
    save(folder, "u2_be", rng.integers(0, 2**16 - 1, size=(2, 2)).astype(">u2"))
    save(folder, "f2_be", rng.standard_normal((7,)).astype(">f2"))
    save(folder, "i8_le", rng.integers(-2**62, 2**62, size=(4, 1)).astype("<i8"))
    save(folder, "u8_be", rng.integers(0, 2**63, size=(3,), dtype=np.uint64).astype(">u8"))
    save(folder, "i1", np.arange(-5, 5, dtype=np.int8))
    save(folder, "u1", np.arange(250, 256, dtype=np.uint8).reshape(2, 3))
    save(folder, "b1", np.array([[True, False, True], [False, False, True]]))
    save(folder, "scalar", np.array(3.25, dtype="<f8"))
    save(folder, "empty", np.zeros((0, 3), dtype="<f4"))
    save(folder, "v2", rng.standard_normal((2, 5)).astype("<f4"), version=(2, 0))
    save(folder, "v3", rng.standard_normal((3,)).astype(">f4"), version=(3, 0))
    save(folder, "sliced", rng.standard_normal((4, 6)).astype("<f4")[::2, 1::2])  # np.save makes it C order
    save(folder, "fortran", np.asfortranarray(rng.standard_normal((3, 2)).astype("<f4")))
    save(folder, "object", np.array([1, "a"], dtype=object).reshape(2)[:0])  # an object array, even empty


def cmd_header(path, descr, shape):
    np.save(path, np.zeros(tuple(int(n) for n in shape), dtype=descr))


if __name__ == "__main__":
    if sys.argv[1] == "load":
        cmd_load(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "save":
        cmd_save(sys.argv[2])
    elif sys.argv[1] == "header":
        cmd_header(sys.argv[2], sys.argv[3], sys.argv[4:])
