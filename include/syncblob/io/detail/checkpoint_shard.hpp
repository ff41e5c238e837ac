// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// One shard of a checkpoint: a safetensors file opened for positioned reads, its header read and
/// validated (every rule of the single-file reader), kept open so that the bytes read later come
/// from the file whose header was checked.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "byte_source.hpp"
#include "json_input.hpp"
#include "safetensors_format.hpp"
#include "safetensors_header.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// An open shard and its header.
struct OpenShard {
    std::shared_ptr<const FileSource> file;
    SafetensorsHeader header;
};

/// Opens `path` and reads its header (`max_bytes` bounds what the header may take).
/// \throws IOError when it cannot be opened; FormatError for a malformed header.
[[nodiscard]] inline OpenShard open_shard(const std::filesystem::path& path, std::uint64_t max_bytes) {
    OpenShard shard;
    auto file = std::make_shared<const FileSource>(path);
    unsigned char prefix[8] = {};
    const std::uint64_t size = file->size();
    file->read_at(0, prefix, static_cast<std::size_t>(size < 8 ? size : 8), "header length");
    const std::uint64_t n = safetensors_header_length(prefix, size, max_bytes, file->name());
    json_stream::FileInput in(file->file(), 8, 8 + n);
    shard.header = read_safetensors_header(in, n, size - 8 - n, max_bytes, file->name());
    shard.file = std::move(file);
    return shard;
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
