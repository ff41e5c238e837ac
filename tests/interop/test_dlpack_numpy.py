# SPDX-License-Identifier: BSD-2-Clause
"""syncblob blobs and NumPy through the Python DLPack protocol (run by ctest with the interpreter
that can import numpy, and the extension built from dlpack_numpy_module.cpp on PYTHONPATH).

np.from_dlpack of a blob shares its memory (writes go both ways) and releases the export when the
array goes; capsules are consumed once ("dltensor" -> "used_dltensor") and released by their
destructor when nobody took them; read-only blobs reach only DLPack 1.x consumers, flagged; NumPy
arrays import into blobs without copying and are given back when the blob goes, also when the
import is refused."""
import ctypes
import gc
import sys

import numpy as np
import syncblob_dlpack_numpy as sb

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED:", what)


def capsule_name(capsule):
    return PyCapsule_GetName(capsule).decode()


class Holder:
    """Hands NumPy a capsule we keep, to look at it after NumPy took the tensor over."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_shares_memory():
    # [from-dlpack]
    b = sb.BlobF32([2, 3])  # a Blob<float> with __dlpack__ and __dlpack_device__
    b.fill_range()
    a = np.from_dlpack(b)  # NumPy 1.24 asks for a legacy capsule: no copy
    # [from-dlpack]
    check(a.shape == (2, 3) and a.dtype == np.float32, f"shape and dtype: {a.shape} {a.dtype}")
    check(a.ctypes.data == b.host_address(), "np.from_dlpack shares the blob's memory")
    check(a.tolist() == [[0, 1, 2], [3, 4, 5]], f"values: {a.tolist()}")
    b.set(0, -1)
    check(a[0, 0] == -1, "a write through the blob is visible in NumPy")
    if a.flags.writeable:  # NumPy 2: writable unless the tensor is flagged read-only
        a[1, 2] = 50
        check(b.values()[5] == 50, "a write through NumPy is visible in the blob")
    else:  # NumPy 1.x makes every array it takes through DLPack read-only (writes: test_import_from_numpy)
        check(np.lib.NumpyVersion(np.__version__) < "2.0.0", "read-only arrays from a writable export")
    check(b.exports() == 1, "the array holds one export")
    del a
    gc.collect()
    check(b.exports() == 0, "NumPy called the deleter when the array went")


def test_capsule_protocol():
    b = sb.BlobF32([4])
    c = b.__dlpack__()
    check(capsule_name(c) == "dltensor", "without max_version: a legacy capsule")
    check(b.exports() == 1, "the capsule holds the export")
    del c
    gc.collect()
    check(b.exports() == 0, "an unused capsule releases the export when it goes")

    c = b.__dlpack__()
    a = np.from_dlpack(Holder(c))
    check(capsule_name(c) == "used_dltensor", "NumPy renamed the capsule it took over")
    check(b.exports() == 1, "one export, held by the array")
    del c  # a used capsule must not release what the array holds
    gc.collect()
    check(b.exports() == 1 and a.ctypes.data == b.host_address(), "the array still holds the memory")
    del a
    gc.collect()
    check(b.exports() == 0, "released once, by NumPy")

    v = b.__dlpack__(max_version=(1, 0))
    check(capsule_name(v) == "dltensor_versioned", "max_version (1, 0): a versioned capsule")
    info = sb.capsule_info(v)
    check(info["major"] == 1 and info["flags"] == 0, f"versioned fields: {info}")
    del v
    gc.collect()
    check(b.exports() == 0, "an unused versioned capsule releases the export")
    check(b.__dlpack_device__() == (1, 0), "the device is the CPU")

    for bad, kwargs in (("copy", {"copy": True}), ("device", {"dl_device": (2, 0)})):
        try:
            b.__dlpack__(**kwargs)
            check(False, f"{bad}: BufferError expected")
        except BufferError:
            pass
    check(b.exports() == 0, "refused exports hold nothing")


def test_read_only():
    b = sb.BlobF32([3])
    ro = b.readonly()
    v = ro.__dlpack__(max_version=(1, 0))
    check(sb.capsule_info(v)["flags"] & 1 == 1, "exported through a const blob: flagged read-only")
    del v
    try:
        np.from_dlpack(ro)  # NumPy 1.24 asks for a legacy capsule, which cannot say read-only
        check(False, "a read-only blob must not reach a legacy consumer")
    except BufferError:
        pass
    gc.collect()
    check(b.exports() == 0, "nothing left behind")


def test_dtypes_and_shapes():
    for cls, dtype in ((sb.BlobF64, np.float64), (sb.BlobF16, np.float16), (sb.BlobI8, np.int8),
                       (sb.BlobI32, np.int32), (sb.BlobI64, np.int64), (sb.BlobU8, np.uint8)):
        b = cls([5])
        b.fill_range()
        a = np.from_dlpack(b)
        check(a.dtype == dtype and a.tolist() == [0, 1, 2, 3, 4], f"{cls.__name__}: {a.dtype} {a.tolist()}")
    s = sb.BlobF32([])
    s.set(0, 2.5)
    a = np.from_dlpack(s)
    check(a.shape == () and float(a) == 2.5, f"0-d: {a.shape}")
    e = sb.BlobF32([2, 0, 3])
    a = np.from_dlpack(e)
    check(a.shape == (2, 0, 3) and a.size == 0, f"zero-size: {a.shape}")
    del a
    gc.collect()
    check(e.exports() == 0, "a zero-size export is released too")


def test_import_from_numpy():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    refs = sys.getrefcount(arr)
    b = sb.BlobF32.from_dlpack(arr)
    check(b.shape == [2, 3], f"shape {b.shape}")
    check(b.host_address() == arr.ctypes.data, "the blob borrows NumPy's memory")
    check(sys.getrefcount(arr) == refs + 1, "the tensor holds the array")
    b.set(4, 40)
    check(arr[1, 1] == 40, "a write through the blob is visible in NumPy")
    arr[0, 0] = 7
    check(b.values()[0] == 7, "a write through NumPy is visible in the blob")
    del b
    gc.collect()
    check(sys.getrefcount(arr) == refs, "the blob gave the array back")

    for what, source, cls, words in (("transposed", arr.T, sb.BlobF32, "not C-contiguous"),
                                     ("stepped", np.arange(10, dtype=np.float32)[::2], sb.BlobF32,
                                      "not C-contiguous"),
                                     ("float64", np.zeros(3), sb.BlobF32, "dtype is float64, the blob holds F32")):
        base = source.base if source.base is not None else source
        refs = sys.getrefcount(base)
        try:
            cls.from_dlpack(source)
            check(False, f"{what}: refused expected")
        except RuntimeError as e:
            check(words in str(e), f"{what}: message {e}")
        gc.collect()
        check(sys.getrefcount(base) == refs, f"{what}: the refused tensor was released")


for test in (test_shares_memory, test_capsule_protocol, test_read_only, test_dtypes_and_shapes,
             test_import_from_numpy):
    test()
    print("ok" if not failures else "failures so far:", test.__name__)

print(f"numpy {np.__version__}: {'FAILED ' + str(len(failures)) if failures else 'all passed'}")
sys.exit(1 if failures else 0)
