// SPDX-License-Identifier: BSD-2-Clause
// Fuzzes the safetensors reader on bytes in memory: any input either loads or throws a
// syncblob::Error, and a load refused into an existing blob leaves it as it was. The same bytes
// opened as a file: load_all, whose reads and conversions are gathered, holds what a load of each
// tensor on its own gives, and refuses whatever one of those refuses.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string>

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
    // Opened as a file, converted into F32.
    static const std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("syncblob-fuzz-safetensors-" + std::to_string(::getpid()));
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
        (void)std::fwrite(data, 1, size, f);
        (void)std::fclose(f);
    }
    try {
        const auto file = io::SafetensorsFile::open(path, fuzz::options(true));
        std::map<std::string, syncblob::Blob<float>> alone;  // each tensor loaded on its own
        bool refused = false;
        for (const auto& info : file.tensors()) {
            if (info.name.ends_with(io::diff_suffix)) {
                continue;
            }
            try {
                file.load(info.name, alone[info.name]);
            } catch (const syncblob::FormatError&) {
                refused = true;
            }
        }
        bool loaded = true;
        std::map<std::string, syncblob::Blob<float>> all;
        try {
            all = file.load_all<float>();
        } catch (const syncblob::FormatError&) {
            loaded = false;
        }
        // load_all refuses more (a diff without its blob, a total over the limit), never less.
        fuzz::require(!(loaded && refused), "load_all refuses what a load of a tensor on its own refuses");
        for (const auto& [name, blob] : all) {
            const auto& one = alone.at(name);
            fuzz::require(std::ranges::equal(std::as_bytes(blob.host_data()), std::as_bytes(one.host_data())) &&
                              std::ranges::equal(std::as_bytes(blob.host_diff()), std::as_bytes(one.host_diff())),
                          "load_all holds, bit for bit, what a load of each tensor on its own gives");
        }
    } catch (const syncblob::Error&) {
    }
    return 0;
}
