// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the protobuf wire-format reader through Caffe's messages (BlobProto, BlobProtoVector,
// NetParameter): any bytes either load or throw a syncblob::Error, and a loaded BlobProto
// serializes to bytes that load to the same shape and bits; a failed load leaves its target as it was.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <syncblob/io/caffe.hpp>

#include "fuzz_support.hpp"

namespace io = syncblob::io;

namespace {

template <class T>
void blob_proto(std::string_view bytes, bool convert) {
    auto blob = fuzz::target(T{3}, T{5});
    const fuzz::Snapshot<T> before(blob);
    try {
        io::parse_blob_proto(bytes, blob, fuzz::options(convert), "fuzz");
    } catch (const syncblob::Error&) {
        before.require_unchanged(blob);
        return;
    }
    const std::string again = io::serialize_blob_proto(blob, true);
    syncblob::Blob<T> back;
    io::parse_blob_proto(again, back, fuzz::options(false), "fuzz round trip");
    fuzz::require(back.shape() == blob.shape(), "BlobProto round trip keeps the shape");
    fuzz::require(fuzz::same_bits(back.host_data(), blob.host_data()), "BlobProto round trip keeps the data");
    fuzz::require(io::serialize_blob_proto(back, true) == again, "serialization is deterministic");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    blob_proto<float>(bytes, false);
    blob_proto<double>(bytes, true);
    try {
        const auto blobs = io::parse_blob_proto_vector<float>(bytes, fuzz::options(true), "fuzz");
        const auto again = io::serialize_blob_proto_vector(std::span<const syncblob::Blob<float>>(blobs));
        fuzz::require(io::parse_blob_proto_vector<float>(again).size() == blobs.size(), "vector round trip");
    } catch (const syncblob::Error&) {
    }
    try {
        (void)io::parse_caffemodel<float>(bytes, fuzz::options(true), "fuzz");
    } catch (const syncblob::Error&) {
    }
    return 0;
}
