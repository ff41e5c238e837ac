// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Where the JSON reader's bytes come from: text in memory, or a range of a file read in chunks
/// of fixed size (so reading a file of any size takes the same, small memory). Both give the
/// reader the next byte (`peek`), the bytes available at once (`run`), and the offset it is at.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "../detail/posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::parse {

/// JSON text held in memory.
class TextInput {
public:
    explicit TextInput(std::string_view text) noexcept
        : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

    /// The next byte, or -1 at the end.
    [[nodiscard]] int peek() const noexcept { return p_ == end_ ? -1 : static_cast<unsigned char>(*p_); }
    /// The bytes from here that can be read at once (all of them, in memory).
    [[nodiscard]] std::string_view run(std::size_t /*min*/) const noexcept {
        return {p_, static_cast<std::size_t>(end_ - p_)};
    }
    /// Moves past `n` bytes of those `peek` or `run` showed.
    void skip(std::size_t n) noexcept { p_ += n; }
    /// The offset of the next byte from the start of the text.
    [[nodiscard]] std::uint64_t offset() const noexcept { return static_cast<std::uint64_t>(p_ - begin_); }

private:
    const char* begin_;
    const char* p_;
    const char* end_;
};

/// The bytes [begin, end) of a file, read `chunk` bytes at a time.
class FileInput {
public:
    static constexpr std::size_t default_chunk = std::size_t{64} << 10;

    FileInput(const detail::InputFile& file, std::uint64_t begin, std::uint64_t end, std::size_t chunk = default_chunk)
        : file_(file),
          begin_(begin),
          next_(begin),
          end_(end),
          chunk_(chunk < 8 ? 8 : chunk),
          buffer_(std::make_unique<char[]>(chunk_)),
          p_(buffer_.get()),
          last_(buffer_.get()) {}

    [[nodiscard]] int peek() {
        if (p_ == last_ && !fill(1)) {
            return -1;
        }
        return static_cast<unsigned char>(*p_);
    }
    /// The bytes buffered from here, at least `min` (at most a chunk) unless the range ends first.
    [[nodiscard]] std::string_view run(std::size_t min) {
        if (static_cast<std::size_t>(last_ - p_) < min) {
            (void)fill(min);  // a chunk holds at least 8 bytes: enough for any `min` the reader asks
        }
        return {p_, static_cast<std::size_t>(last_ - p_)};
    }
    void skip(std::size_t n) noexcept { p_ += n; }
    /// The offset of the next byte from `begin`.
    [[nodiscard]] std::uint64_t offset() const noexcept {
        return next_ - static_cast<std::uint64_t>(last_ - p_) - begin_;
    }

private:
    // Keeps the unread bytes and reads more after them, up to a chunk; false when none is left.
    bool fill(std::size_t) {
        const auto left = static_cast<std::size_t>(last_ - p_);
        std::memmove(buffer_.get(), p_, left);
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_ - left, end_ - next_));
        file_.read_at(next_, buffer_.get() + left, want, "JSON text");
        next_ += want;
        p_ = buffer_.get();
        last_ = p_ + left + want;
        return last_ != p_;
    }

    const detail::InputFile& file_;
    std::uint64_t begin_;
    std::uint64_t next_;  // the file offset of the byte after the buffered ones
    std::uint64_t end_;
    std::size_t chunk_;
    std::unique_ptr<char[]> buffer_;
    char* p_;
    char* last_;
};

}  // namespace io::parse

SYNCBLOB_END_NAMESPACE
