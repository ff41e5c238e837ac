// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the .npy reader on bytes in memory: any input either loads or throws a syncblob::Error,
// and a failed load leaves the blob as it was (shape, heads, data and diff).

#include <cstddef>
#include <cstdint>
#include <span>

#include <syncblob/io/npy.hpp>

#include "fuzz_support.hpp"

namespace io = syncblob::io;

namespace {

template <class T>
void load(std::span<const std::byte> bytes, bool convert, bool reshape) {
    for (const auto part : {io::Part::data, io::Part::diff}) {
        auto blob = fuzz::target(T{1}, T{0});
        const fuzz::Snapshot<T> before(blob);
        try {
            io::load_npy(bytes, "fuzz", blob, fuzz::options(convert, reshape), part);
            (void)blob.host_data();
        } catch (const syncblob::Error&) {
            before.require_unchanged(blob);
        }
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
