// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the .npy reader on bytes in memory: any input either loads or throws a syncblob::Error,
// and a failed load leaves the blob as it was.

#include <cstddef>
#include <cstdint>
#include <span>

#include <syncblob/io/npy.hpp>

#include "fuzz_support.hpp"

namespace io = syncblob::io;

namespace {

template <class T>
void load(std::span<const std::byte> bytes, bool convert, bool reshape) {
    syncblob::Blob<T> blob{2};
    blob.fill(T{1});
    try {
        io::load_npy(bytes, "fuzz", blob, fuzz::options(convert, reshape));
        (void)blob.host_data();
    } catch (const syncblob::Error&) {
        fuzz::require(blob.shape() == syncblob::Shape{2} && blob.host_data()[0] == T{1}, "failed load is a no-op");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    load<float>(bytes, true, true);
    load<double>(bytes, false, true);
    load<std::uint8_t>(bytes, true, false);
    load<bool>(bytes, true, true);
    return 0;
}
