// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the JSON reader: any text either loads or throws a syncblob::Error, and what loads
// writes back to a document that loads to the same bits.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <syncblob/io/json.hpp>

#include "fuzz_support.hpp"

namespace io = syncblob::io;

namespace {

template <class T>
void round_trip(std::string_view text, bool convert) {
    syncblob::Blob<T> blob;
    try {
        io::parse_json(text, blob, fuzz::options(convert), "fuzz");
    } catch (const syncblob::Error&) {
        return;
    }
    syncblob::Blob<T> back;
    io::from_json(io::to_json(blob, io::WriteDiff::always), back, fuzz::options(false));
    fuzz::require(back.shape() == blob.shape(), "JSON round trip keeps the shape");
    fuzz::require(fuzz::same_bits(back.host_data(), blob.host_data()), "JSON round trip keeps the data");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    round_trip<float>(text, true);
    round_trip<std::int64_t>(text, false);
    round_trip<syncblob::half>(text, true);
    // A strict read into a blob of a fixed shape never changes it on failure.
    syncblob::Blob<std::uint8_t> fixed{3};
    fixed.fill(7);
    try {
        io::parse_json(text, fixed, fuzz::options(true, false), "fuzz");
    } catch (const syncblob::Error&) {
        fuzz::require(fixed.shape() == syncblob::Shape{3} && fixed.host_data()[0] == 7, "failed load is a no-op");
    }
    return 0;
}
