// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A read-only memory mapping of a whole file, shared by every blob that borrows its pages.

#include <sys/mman.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>

#include "posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// A file mapped read-only (`PROT_READ`, private): writing through it is impossible, so a
/// borrowed blob that wants to write copies first. The file must not be truncated by another
/// process while mapped (reading a vanished page raises SIGBUS, as with any mapping).
class MappedFile {
public:
    /// Maps `path`. \throws IOError when it cannot be opened or mapped.
    [[nodiscard]] static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path) {
        const InputFile file(path);
        auto mapped = std::shared_ptr<MappedFile>(new MappedFile());
        if (file.size() != 0) {
            void* p = ::mmap(nullptr, static_cast<std::size_t>(file.size()), PROT_READ, MAP_PRIVATE, file.fd(), 0);
            if (p == MAP_FAILED) {
                throw_io_error("map", "cannot map", path, errno);
            }
            mapped->data_ = static_cast<const std::byte*>(p);
            mapped->size_ = static_cast<std::size_t>(file.size());
        }
        return mapped;
    }

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile() {
        if (data_ != nullptr) {
            ::munmap(const_cast<std::byte*>(data_), size_);
        }
    }

    [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

private:
    MappedFile() = default;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
