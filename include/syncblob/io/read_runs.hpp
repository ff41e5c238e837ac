// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// Internal, shared beyond its folder: used by the checkpoint loads (checkpoint/read_chunk.hpp) and
/// safetensors.hpp, so it sits outside detail/; its names stay in a detail namespace and are no user
/// API.
///
/// `ReadRuns`: reads of many small tensors gathered into one scattered read per run of them that
/// lie together in a file, where a read each costs a system call per tensor; `StagedConversions`:
/// the same for reads that are converted.

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "../core/element.hpp"
#include "../core/error.hpp"
#include "convert.hpp"
#include "detail/posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// Gathers the reads of small tensors (or pieces of them) that follow each other in one file, or
/// lie a few bytes apart, and reads each run of them with one `InputFile::read_scattered`: at a
/// million one-element tensors a read each was most of a load's time. A read joins the run when it
/// continues it and is read with it: when a read joins that does not continue it, or on `flush()`.
/// A large read is made at once, after the run before it. One object per thread; 28 KiB.
class ReadRuns {  // NOLINT(cppcoreguidelines-pro-type-member-init): the part arrays are written before read
public:
    /// A read of at least this many bytes is made on its own: the call costs little beside its bytes.
    static constexpr std::size_t small_read = std::size_t{64} << 10;
    /// Bytes between two reads that a run reads and drops rather than end there.
    static constexpr std::size_t max_gap = 4096;

    // The part arrays are left unset (below).
    ReadRuns() = default;  // NOLINT(cppcoreguidelines-pro-type-member-init)
    ReadRuns(const ReadRuns&) = delete;
    ReadRuns& operator=(const ReadRuns&) = delete;
    ~ReadRuns() = default;

    /// Reads `bytes` bytes of `file` at `offset` into `dst`: now, or with the run it joins (`bytes`
    /// below `small_read`). `name` (alive until the run is read) names the tensor in an error:
    /// `tensor "<name>"`. \throws as `InputFile::read_at` (this read's error or an earlier one's).
    void read(const InputFile& file, std::uint64_t offset, void* dst, std::size_t bytes, const std::string& name) {
        if (bytes >= small_read) {
            flush();
            file.read_at(offset, dst, bytes, [&] { return where(name); });
            return;
        }
        if (n_ != 0 && (&file != file_ || offset < end_ || offset - end_ > max_gap || n_ + 2 > parts_.size())) {
            flush();
        }
        if (n_ == 0) {
            file_ = &file;
            offset_ = end_ = offset;
        }
        if (offset > end_) {  // the bytes between: read into gap_ and dropped (the tensor after them names an error)
            add(gap_.data(), static_cast<std::size_t>(offset - end_), name);
        }
        add(dst, bytes, name);
        end_ = offset + bytes;
    }

    /// Reads the run gathered so far. \throws as `read`.
    void flush() {
        if (n_ == 0) {
            return;
        }
        const std::size_t n = std::exchange(n_, 0);
        file_->read_scattered(offset_, std::span(parts_.data(), n), [&](std::size_t k) { return where(*names_[k]); });
    }

private:
    static std::string where(const std::string& name) { return "tensor \"" + name + "\""; }

    void add(void* dst, std::size_t bytes, const std::string& name) noexcept {
        parts_[n_] = ::iovec{dst, bytes};
        names_[n_] = &name;
        ++n_;
    }

    const InputFile* file_ = nullptr;
    std::uint64_t offset_ = 0;  // where the run starts in its file
    std::uint64_t end_ = 0;     // where it ends
    std::size_t n_ = 0;         // parts gathered
    // Left unset: each entry is written before it is read, and a load makes one of these per chunk
    // (28 KiB to zero each time).
    std::array<::iovec, InputFile::max_parts> parts_;
    std::array<const std::string*, InputFile::max_parts> names_;  // the tensor each part holds
    std::array<std::byte, max_gap> gap_;                          // written by the reads, never read
};

/// Small reads that a load converts (the file's dtype is not the blob's): the file's bytes of each
/// are read with the run they join (`ReadRuns`) into a block of this object, then converted where
/// they go once read. One object per thread, with its `ReadRuns`; 32 KiB.
template <Element T>
class StagedConversions {  // NOLINT(cppcoreguidelines-pro-type-member-init): each entry is written before read
public:
    /// The most bytes of the file a read may have to be staged here.
    static constexpr std::size_t capacity = std::size_t{16} << 10;

    // The block and the list are left unset: each entry is written before it is read, and a load
    // makes one of these per chunk (32 KiB to zero each time).
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init)
    StagedConversions(ReadRuns& runs, ConvertRule rule) noexcept : runs_(runs), rule_(rule) {}

    /// Reads `count` little-endian elements of `dtype` (at most `capacity` bytes) at `offset` of
    /// `file` with the run they join; `convert()` writes them to `dst` as T. `name` (alive until
    /// then) names the tensor in an error. \throws as `ReadRuns::read`.
    void read(const InputFile& file, std::uint64_t offset, Dtype dtype, std::size_t count, T* dst,
              const std::string& name) {
        const std::size_t bytes = count * dtype_size(dtype);
        if (n_ == pending_.size() || used_ + bytes > capacity) {
            (void)convert();  // a refusal is kept: the last convert() reports it
        }
        runs_.read(file, offset, staged_.data() + used_, bytes, name);
        pending_[n_++] = {dtype, count, used_, dst};
        used_ += bytes;
    }

    /// Reads what is gathered, then converts each staged read in order. Returns false once a read
    /// held a value the rule refuses (the caller reads again, one tensor at a time, for the error).
    /// \throws as `ReadRuns::flush`.
    [[nodiscard]] bool convert() {
        runs_.flush();
        for (std::size_t k = 0; k < n_ && !refused_; ++k) {
            const Pending& p = pending_[k];
            refused_ = convert_elements(p.dtype, staged_.data() + p.at, p.count, p.dst, rule_) != p.count;
        }
        n_ = used_ = 0;
        return !refused_;
    }

private:
    struct Pending {
        Dtype dtype;
        std::size_t count;
        std::size_t at;  // in staged_
        T* dst;
    };

    ReadRuns& runs_;
    ConvertRule rule_;
    bool refused_ = false;
    std::size_t n_ = 0;
    std::size_t used_ = 0;
    alignas(16) std::array<std::byte, capacity> staged_;
    std::array<Pending, 512> pending_;
};

/// The rule for the errors of gathered reads: runs `gathered()`, which returns false where a
/// conversion refused a value. When it refuses, or throws an Error, runs `in_order()`, which reads
/// the same again, one conversion at a time in order, and so throws the error that comes first (a
/// gathered error that `in_order()` does not meet is thrown as it was).
template <class Gathered, class InOrder>
void gathered_else_in_order(Gathered&& gathered, InOrder&& in_order) {
    bool done = false;
    try {
        done = gathered();
    } catch (const Error&) {
        in_order();
        throw;
    }
    if (!done) {
        in_order();
    }
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
