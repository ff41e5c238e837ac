// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the safetensors reader on bytes in memory: any input either loads or throws a
// syncblob::Error, and a load refused into an existing blob leaves it as it was.

#include <cstddef>
#include <cstdint>
#include <span>

#include <syncblob/io/safetensors.hpp>

#include "fuzz_support.hpp"

namespace io = syncblob::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto file = io::SafetensorsFile::from_memory(bytes, "fuzz", fuzz::options(true));
        (void)file.metadata();
        for (const auto& info : file.tensors()) {
            fuzz::require(info.data_begin <= info.data_end, "tensor offsets are ordered");
        }
        const auto blobs = file.load_all<float>();
        for (const auto& [name, blob] : blobs) {
            (void)blob.host_data();
        }
        (void)file.load_all<std::int8_t>();
    } catch (const syncblob::Error&) {
    }
    // Each tensor into an existing blob: loaded, or refused with the blob exactly as it was.
    try {
        const auto file = io::SafetensorsFile::from_memory(bytes, "fuzz", fuzz::options(true));
        for (const auto& info : file.tensors()) {
            auto blob = fuzz::target(2.0f, 3.0f);
            const fuzz::Snapshot<float> before(blob);
            try {
                file.load(info.name, blob);
            } catch (const syncblob::Error&) {
                before.require_unchanged(blob);
            }
        }
    } catch (const syncblob::Error&) {
    }
    return 0;
}
