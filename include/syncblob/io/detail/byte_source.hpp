// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Where a reader's bytes come from (a file, or memory for the fuzzers and in-memory entry
/// points), and the one routine every loader uses to move elements from there into a blob:
/// straight into the destination when the dtypes match, byte-swapped for big-endian input,
/// converted chunk by chunk when asked to.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "../../core/element.hpp"
#include "../convert.hpp"
#include "convert_message.hpp"
#include "format_error.hpp"
#include "posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// Bytes in memory, named `source` in error messages.
class MemorySource {
public:
    MemorySource(std::span<const std::byte> bytes, std::string_view source) : bytes_(bytes), name_(source) {}

    [[nodiscard]] std::uint64_t size() const noexcept { return bytes_.size(); }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }

    /// Copies `bytes` bytes at `offset`; past the end is a FormatError naming `where`.
    template <ReadWhere Where>
    void read_at(std::uint64_t offset, void* dst, std::size_t bytes, const Where& where) const {
        if (offset > bytes_.size() || bytes > bytes_.size() - offset) {
            io::throw_format_error(name_, where_text(where),
                                   "input ends at byte " + std::to_string(bytes_.size()) + ", " +
                                       std::to_string(bytes) + " bytes expected at byte " + std::to_string(offset) +
                                       " (truncated)");
        }
        if (bytes != 0) {
            std::memcpy(dst, bytes_.data() + offset, bytes);
        }
    }

private:
    std::span<const std::byte> bytes_;
    std::string name_;
};

/// A file read with positioned reads, named by its path in error messages.
class FileSource {
public:
    explicit FileSource(const std::filesystem::path& path) : file_(path), name_(path.string()) {}

    [[nodiscard]] std::uint64_t size() const noexcept { return file_.size(); }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] const InputFile& file() const noexcept { return file_; }
    template <ReadWhere Where>
    void read_at(std::uint64_t offset, void* dst, std::size_t bytes, const Where& where) const {
        file_.read_at(offset, dst, bytes, where);
    }

private:
    InputFile file_;
    std::string name_;
};

/// Makes every byte of a bool array 0 or 1 (a file may hold any nonzero byte for true; reading
/// such a byte as `bool` would be undefined).
inline void normalize_bools(void* data, std::size_t n) noexcept {
    auto* p = static_cast<unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = p[i] != 0 ? 1 : 0;
    }
}

/// True when every byte is 0 or 1 (so the bytes can be borrowed as `bool` without a copy).
[[nodiscard]] inline bool bools_are_normal(const void* data, std::size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    return std::all_of(p, p + n, [](unsigned char c) { return c <= 1; });
}

/// Reads `n` elements of dtype `from` (big-endian when `big_endian`) at `offset` of `source` into
/// `dst`, converting by `rule` when `from` is not T's dtype (the caller checked that conversion is
/// allowed). \throws FormatError "<source>: <where>, element <i>: value ..." for the first value
/// `ConvertRule::exact` refuses (`where`: a text, or a callable that makes it only then).
template <Element T, class Source, ReadWhere Where>
void read_elements(const Source& source, std::uint64_t offset, Dtype from, bool big_endian, std::size_t n, T* dst,
                   const Where& where, ConvertRule rule) {
    const std::size_t item = dtype_size(from);
    const bool swap = item > 1 && (big_endian != (std::endian::native == std::endian::big));
    if (from == dtype_of<T>) {
        syncblob::detail::advise_huge_pages(dst, n * sizeof(T));
        source.read_at(offset, dst, n * sizeof(T), where);
        if (swap) {
            byteswap_elements(dst, n, sizeof(T));
        }
        if constexpr (std::same_as<T, bool>) {
            normalize_bools(dst, n);
        }
        return;
    }
    constexpr std::size_t chunk_bytes = std::size_t{1} << 20;
    const std::size_t chunk = std::min(chunk_bytes / item, n);  // no more than the elements need
    // A small tensor's elements are staged on the stack: a load of many reads none from the heap.
    alignas(16) unsigned char on_stack[4096];
    const auto heap = chunk * item > sizeof(on_stack) ? std::make_unique_for_overwrite<unsigned char[]>(chunk * item)
                                                      : std::unique_ptr<unsigned char[]>();
    unsigned char* const buffer = heap ? heap.get() : on_stack;
    for (std::size_t done = 0; done < n;) {
        const std::size_t m = std::min(chunk, n - done);
        source.read_at(offset + done * item, buffer, m * item, where);
        if (swap) {
            byteswap_elements(buffer, m, item);
        }
        if constexpr (std::endian::native == std::endian::big) {
            byteswap_elements(buffer, m, item);  // convert_elements reads little-endian
        }
        const std::size_t bad = convert_elements(from, buffer, m, dst + done, rule);
        if (bad != m) {
            io::throw_format_error(source.name(), where_text(where) + ", element " + std::to_string(done + bad),
                                   conversion_problem_at<T>(from, buffer + bad * item));
        }
        done += m;
    }
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
