// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the JSON reader: any text either loads or throws a syncblob::Error, and what loads
// writes back to a document that loads to the same bits; a failed read leaves its target as it was.
// And against nlohmann/json: a text syncblob's reader accepts, nlohmann accepts too, and the
// document syncblob builds equals nlohmann's.

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

// What parse_json_text accepts is valid JSON by nlohmann's own parser, and the same document.
void same_as_nlohmann(std::string_view text) {
    nlohmann::json mine;
    try {
        mine = io::parse_json_text(text, fuzz::max_bytes, "fuzz");
    } catch (const syncblob::Error&) {
        return;
    }
    nlohmann::json theirs;
    try {
        theirs = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception&) {
        fuzz::require(false, "parse_json_text accepts only what nlohmann accepts");
    }
    fuzz::require(mine == theirs, "parse_json_text builds the document nlohmann builds");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    same_as_nlohmann(text);
    round_trip<float>(text, true);
    round_trip<std::int64_t>(text, false);
    round_trip<syncblob::half>(text, true);
    // A failed read, strict or reshaping, leaves its target exactly as it was.
    for (const bool reshape : {false, true}) {
        auto target = fuzz::target<std::uint8_t>(7, 9);
        const fuzz::Snapshot<std::uint8_t> before(target);
        try {
            io::parse_json(text, target, fuzz::options(true, reshape), "fuzz");
        } catch (const syncblob::Error&) {
            before.require_unchanged(target);
        }
    }
    return 0;
}
