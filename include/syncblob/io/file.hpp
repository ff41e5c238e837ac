// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The file layer every syncblob reader and writer shares: load and save options, bounded
/// whole-file reads, atomic saving (temporary file beside the target, then rename) and the
/// `FormatError` convention "<source>: <where>: <what>".

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "../core/error.hpp"
#include "convert.hpp"
#include "detail/atomic_save.hpp"
#include "detail/format_error.hpp"
#include "detail/posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io {

/// The default of `LoadOptions::max_bytes`: 8 GiB. Loading a larger tensor needs a larger limit,
/// set explicitly; the limit is what keeps a hostile size field from exhausting memory.
inline constexpr std::uint64_t default_max_bytes = std::uint64_t{8} << 30;

/// How a loader reads a file.
struct LoadOptions {
    /// The most bytes a loader may allocate (or map) for one call. A file that needs more is a
    /// `FormatError` before anything is allocated.
    std::uint64_t max_bytes = default_max_bytes;
    /// Allow a file dtype different from the blob's element type, converting each element by
    /// one rule for every format (the table in docs/file-safety.md): a value the blob's type
    /// holds exactly converts (floating targets round to nearest); any other value (-1 into U8,
    /// 2.5 into I32, NaN into an integer, 1e300 into F16, 2 into BOOL) is a `FormatError` naming
    /// the element and its value, unless `saturate` is set. Off: a dtype mismatch is a `FormatError`.
    bool convert = false;
    /// With `convert`: take, for a value the blob's type cannot hold, the nearest one it can: the
    /// type's min or max beyond its range, 0 for NaN into an integer, a fraction truncated toward
    /// zero, the largest finite value for a finite value beyond a floating type, true for any
    /// nonzero value into BOOL. Off: such a value is a `FormatError`.
    bool saturate = false;
    /// Adopt the file's shape. Off: a different shape is a `ShapeError` and the blob is unchanged.
    bool reshape = true;
};

/// The conversion rule `options` ask for.
[[nodiscard]] constexpr detail::ConvertRule convert_rule(const LoadOptions& options) noexcept {
    return options.saturate ? detail::ConvertRule::saturate : detail::ConvertRule::exact;
}

/// How a writer saves a file.
struct SaveOptions {
    /// `fsync` the file before the rename and its folder after it: the save then survives a power
    /// loss, at the cost of waiting for the disk. Off by default (a crash of the process still
    /// never leaves a torn file at the target path).
    bool fsync = false;
};

/// Reads the whole of `file`. \throws IOError when it cannot be opened or read; FormatError
/// ("<file>: file size: ...") when it holds more than `max_bytes` bytes.
[[nodiscard]] inline std::string read_file(const std::filesystem::path& file, std::uint64_t max_bytes) {
    const detail::InputFile in(file);
    if (in.size() > max_bytes) {
        throw_format_error(file.string(), "file size",
                           std::to_string(in.size()) + " bytes exceed the limit of " + std::to_string(max_bytes) +
                               " bytes (LoadOptions::max_bytes)");
    }
    std::string text;
    text.resize(static_cast<std::size_t>(in.size()));
    in.read_at(0, text.data(), text.size(), "file contents");
    return text;
}

template <class Fn>
void save_atomic(const std::filesystem::path& target, const SaveOptions& options, Fn&& write_fn);

/// The sink `save_atomic` hands to its writing function: appends bytes to the temporary file.
class FileWriter {
public:
    FileWriter(const FileWriter&) = delete;
    FileWriter& operator=(const FileWriter&) = delete;

    /// Appends `bytes` bytes. Small writes (under `small_write` bytes) are gathered and written
    /// together, `buffer_bytes` at a time: a file of a million small tensors then costs a system
    /// call per `buffer_bytes`, not one per tensor. \throws IOError on failure (disk full, I/O
    /// error; possibly for bytes an earlier call gathered), std::bad_alloc (the buffer, on the
    /// first small write).
    void write(const void* data, std::size_t bytes) {
        if (bytes == 0) {  // (data may be null)
            return;
        }
        if (bytes < small_write) {
            if (bytes > buffer_bytes - gathered_) {
                flush();
            }
            if (!buffer_) {
                buffer_ = std::make_unique<char[]>(buffer_bytes);
            }
            std::memcpy(buffer_.get() + gathered_, data, bytes);
            gathered_ += bytes;
            written_ += bytes;
            return;
        }
        flush();
        write_out(data, bytes);
        written_ += bytes;
    }

    /// Writes out the bytes gathered so far. \throws as write.
    void flush() { write_out(buffer_.get(), std::exchange(gathered_, 0)); }

    /// A write of fewer bytes is gathered (`write`).
    static constexpr std::size_t small_write = std::size_t{16} << 10;
    /// The bytes gathered before they are written out.
    static constexpr std::size_t buffer_bytes = std::size_t{256} << 10;

    /// Tells the file system the file will hold `total` bytes, so it allocates them at once
    /// (`fallocate`; faster than growing a new file block by block). A hint: failures are ignored
    /// and the file ends where the writes end.
    void reserve(std::uint64_t total) noexcept {
#if defined(__linux__)
        if (total > reserved_ && ::fallocate(file_.fd(), 0, 0, static_cast<off_t>(total)) == 0) {
            reserved_ = total;
        }
#else
        (void)total;
#endif
    }

    /// Bytes written so far (those gathered by `write` included).
    [[nodiscard]] std::uint64_t bytes_written() const noexcept {
        return written_;
    }

    /// The file being written, for messages: the temporary file's name, or the file it will
    /// replace while the temporary has no name (Linux's `O_TMPFILE`).
    [[nodiscard]] std::filesystem::path path() const {
        return file_.path();
    }

private:
    template <class Fn>
    friend void save_atomic(const std::filesystem::path& target, const SaveOptions& options, Fn&& write_fn);

    explicit FileWriter(const detail::SaveTarget& target) : file_(target) {}

    void write_out(const void* data, std::size_t bytes) {
        const auto* in = static_cast<const char*>(data);
        while (bytes != 0) {
            const std::size_t chunk = bytes < detail::max_io_chunk ? bytes : detail::max_io_chunk;
            const ssize_t n = ::write(file_.fd(), in, chunk);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                detail::throw_io_error("save", "cannot write", path(), errno);
            }
            const auto put = static_cast<std::size_t>(n);
            in += put;
            bytes -= put;
        }
    }

    detail::TemporaryFile file_;
    std::uint64_t written_ = 0;  // bytes given to write(), gathered ones included
    std::uint64_t reserved_ = 0;
    std::unique_ptr<char[]> buffer_;  // made on the first small write
    std::size_t gathered_ = 0;        // bytes of buffer_ not yet written out
};

/// Saves `target` atomically: calls `write_fn(FileWriter&)` to write a temporary file in the
/// target's folder, then renames it over the target (with `options.fsync`, syncing the file before
/// and the folder after). Readers see the old file or the new one, never a part; the new file is a
/// new inode, so a mapping of the old file keeps its bytes. On any failure, including an exception
/// from `write_fn`, the temporary file is removed, an old file at `target` stays intact, and the
/// exception propagates. On Linux the temporary has no name until the rename (`O_TMPFILE`), so a
/// process killed while writing leaves nothing behind either.
///
/// Only a regular file is ever replaced. A `target` that is a symbolic link is followed (through
/// any chain of links) and the regular file it leads to is replaced, in that file's folder; the
/// link stays a link. A `target` that is, or whose links lead to, anything else (a directory, a
/// device such as /dev/null, a FIFO, a socket) and a link that leads nowhere are refused before
/// `write_fn` runs and before anything is created: an IOError saying what it is ("save: cannot
/// replace \"/dev/null\": is a character device, not a regular file"; "...: is a dangling symbolic
/// link ...").
///
/// What a save does to the file it replaces (docs/file-safety.md says it at length):
/// - **Mode, owner, group**: the new file takes the old one's mode, and its owner and group where
///   the process may set them (root may; others keep their own files' owner, and a group they
///   belong to). A set-user-ID or set-group-ID bit is kept only with the owner or group it is for.
///   Extended attributes and ACLs are not copied. A new file gets 0666 less the umask.
/// - **Read-only files**: a file the process could not write in place (its permissions, a
///   read-only file system, an immutable file) is refused with an IOError ("... is read-only for
///   this process ...") before anything is written: a save does not do by rename what the file
///   forbids. (Root may write any file, so root's saves replace read-only files, as `cp` does.)
/// - **Hard links**: the save replaces the name it was given (after following symbolic links);
///   other hard links to the old file keep the old contents: the link is split.
/// - **Long names**: any name the file system allows (up to NAME_MAX, 255 bytes) saves; the
///   temporary's name is cut to fit. A longer name is refused before anything is written. Every
///   step works relative to the open folder, so a path near PATH_MAX saves too.
/// \throws IOError on a refused target or a file-system failure.
template <class Fn>
void save_atomic(const std::filesystem::path& target, const SaveOptions& options, Fn&& write_fn) {
    FileWriter writer(detail::resolve_save_target(target));
    std::forward<Fn>(write_fn)(writer);
    writer.flush();
    if (writer.reserved_ > writer.written_) {  // a reservation beyond the end is given back
        if (::ftruncate(writer.file_.fd(), static_cast<off_t>(writer.written_)) != 0) {
            detail::throw_io_error("save", "cannot truncate", writer.path(), errno);
        }
    }
    writer.file_.commit(options.fsync);
}

}  // namespace io

SYNCBLOB_END_NAMESPACE
