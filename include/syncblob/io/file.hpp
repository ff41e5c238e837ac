// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The file layer every syncblob reader and writer shares: load and save options, bounded
/// whole-file reads, atomic saving (temporary file beside the target, then rename) and the
/// `FormatError` convention "<source>: <where>: <what>".

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "../core/error.hpp"
#include "detail/format_error.hpp"
#include "detail/posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

// Creates a new temporary file beside `target` (same folder, so the rename is atomic).
inline std::pair<FileDescriptor, std::filesystem::path> create_temporary_beside(const std::filesystem::path& target) {
    static std::atomic<std::uint64_t> counter{0};
    const std::filesystem::path folder = target.parent_path();
    for (int attempt = 0;; ++attempt) {
        std::string name(".");  // appended piecewise: g++ 12 -O3 misreports "lit" + string (-Wrestrict)
        name.append(target.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
        name.append("-").append(std::to_string(counter.fetch_add(1, std::memory_order_relaxed)));
        std::filesystem::path temporary = folder.empty() ? std::filesystem::path(name) : folder / name;
        const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            return {FileDescriptor(fd), std::move(temporary)};
        }
        if ((errno != EEXIST && errno != EINTR) || attempt > 100) {
            throw_io_error("save", "cannot create a temporary file beside", target, errno);
        }
    }
}

inline void fsync_folder(const std::filesystem::path& target) {
    const std::filesystem::path folder = target.parent_path().empty() ? "." : target.parent_path();
    FileDescriptor dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid() && ::fsync(dir.get()) != 0 && errno != EINVAL) {
        throw_io_error("save", "cannot fsync the folder of", target, errno);
    }
}

}  // namespace detail

namespace io {

/// The default of `LoadOptions::max_bytes`: 8 GiB. Loading a larger tensor needs a larger limit,
/// set explicitly; the limit is what keeps a hostile size field from exhausting memory.
inline constexpr std::uint64_t default_max_bytes = std::uint64_t{8} << 30;

/// How a loader reads a file.
struct LoadOptions {
    /// The most bytes a loader may allocate (or map) for one call. A file that needs more is a
    /// `FormatError` before anything is allocated.
    std::uint64_t max_bytes = default_max_bytes;
    /// Allow a file dtype different from the blob's element type, converting each element
    /// (integers saturate from floating values, NaN becomes 0; bool is "nonzero"). Off: a
    /// dtype mismatch is a `FormatError`.
    bool convert = false;
    /// Adopt the file's shape. Off: a different shape is a `ShapeError` and the blob is unchanged.
    bool reshape = true;
};

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

    /// Appends `bytes` bytes. \throws IOError on failure (disk full, I/O error).
    void write(const void* data, std::size_t bytes) {
        const auto* in = static_cast<const char*>(data);
        while (bytes != 0) {
            const std::size_t chunk = bytes < detail::max_io_chunk ? bytes : detail::max_io_chunk;
            const ssize_t n = ::write(fd_.get(), in, chunk);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                detail::throw_io_error("save", "cannot write", path_, errno);
            }
            const auto put = static_cast<std::size_t>(n);
            in += put;
            bytes -= put;
            written_ += put;
        }
    }

    /// Tells the file system the file will hold `total` bytes, so it allocates them at once
    /// (`fallocate`; faster than growing a new file block by block). A hint: failures are ignored
    /// and the file ends where the writes end.
    void reserve(std::uint64_t total) noexcept {
#if defined(__linux__)
        if (total > reserved_ && ::fallocate(fd_.get(), 0, 0, static_cast<off_t>(total)) == 0) {
            reserved_ = total;
        }
#else
        (void)total;
#endif
    }

    /// Bytes written so far.
    [[nodiscard]] std::uint64_t bytes_written() const noexcept {
        return written_;
    }

    /// The temporary file being written.
    [[nodiscard]] const std::filesystem::path& path() const noexcept {
        return path_;
    }

private:
    template <class Fn>
    friend void save_atomic(const std::filesystem::path& target, const SaveOptions& options, Fn&& write_fn);

    FileWriter(detail::FileDescriptor fd, std::filesystem::path path) noexcept
        : fd_(std::move(fd)), path_(std::move(path)) {}

    detail::FileDescriptor fd_;
    std::filesystem::path path_;
    std::uint64_t written_ = 0;
    std::uint64_t reserved_ = 0;
};

/// Saves `target` atomically: calls `write_fn(FileWriter&)` to write a temporary file beside the
/// target, then renames it over the target (with `options.fsync`, syncing first). On any failure,
/// including an exception from `write_fn`, the temporary file is removed, an old file at `target`
/// stays intact, and the exception propagates. \throws IOError on a file-system failure.
template <class Fn>
void save_atomic(const std::filesystem::path& target, const SaveOptions& options, Fn&& write_fn) {
    auto [fd, temporary] = detail::create_temporary_beside(target);
    FileWriter writer(std::move(fd), std::move(temporary));
    try {
        std::forward<Fn>(write_fn)(writer);
        if (writer.reserved_ > writer.written_) {  // a reservation beyond the end is given back
            if (::ftruncate(writer.fd_.get(), static_cast<off_t>(writer.written_)) != 0) {
                detail::throw_io_error("save", "cannot truncate", writer.path_, errno);
            }
        }
        if (options.fsync && ::fsync(writer.fd_.get()) != 0) {
            detail::throw_io_error("save", "cannot fsync", writer.path_, errno);
        }
        if (const int err = writer.fd_.close(); err != 0) {
            detail::throw_io_error("save", "cannot close", writer.path_, err);
        }
        if (::rename(writer.path_.c_str(), target.c_str()) != 0) {
            detail::throw_io_error("save", "cannot rename the temporary file to", target, errno);
        }
    } catch (...) {
        writer.fd_.reset();
        (void)::unlink(writer.path_.c_str());
        throw;
    }
    if (options.fsync) {
        detail::fsync_folder(target);
    }
}

}  // namespace io

SYNCBLOB_END_NAMESPACE
