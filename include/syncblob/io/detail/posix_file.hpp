// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// POSIX file descriptors for the IO layer: an owning handle, positioned reads and writes that
/// loop over short transfers and EINTR, and the error messages every IO function shares.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "../../core/error.hpp"
#include "../../core/thread_pool.hpp"
#include "../../memory/huge_pages.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// Largest single read/write request (Linux transfers at most 0x7ffff000 bytes per call).
inline constexpr std::size_t max_io_chunk = std::size_t{1} << 30;

/// IOError("<op>: <what> \"<path>\": <strerror(err)>").
[[noreturn]] inline void throw_io_error(std::string_view op, std::string_view what, const std::filesystem::path& path,
                                        int err) {
    throw IOError(std::string(op) + ": " + std::string(what) + " \"" + path.string() + "\": " + std::strerror(err));
}

/// What a file of type `mode` (a `st_mode`) is, for messages: "a FIFO", "a directory", ...
[[nodiscard]] inline const char* file_type_name(mode_t mode) noexcept {
    if (S_ISREG(mode)) {
        return "a regular file";
    }
    if (S_ISDIR(mode)) {
        return "a directory";
    }
    if (S_ISLNK(mode)) {
        return "a symbolic link";
    }
    if (S_ISCHR(mode)) {
        return "a character device";
    }
    if (S_ISBLK(mode)) {
        return "a block device";
    }
    if (S_ISFIFO(mode)) {
        return "a FIFO";
    }
    if (S_ISSOCK(mode)) {
        return "a socket";
    }
    return "a special file";
}

/// IOError("<op>: <what> \"<path>\": is <a FIFO, ...>, not a regular file").
[[noreturn]] inline void throw_not_regular_file(std::string_view op, std::string_view what,
                                                const std::filesystem::path& path, mode_t mode) {
    throw IOError(std::string(op) + ": " + std::string(what) + " \"" + path.string() + "\": is " +
                  file_type_name(mode) + ", not a regular file");
}

/// An owned file descriptor, closed on destruction.
class FileDescriptor {
public:
    FileDescriptor() noexcept = default;
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    ~FileDescriptor() { reset(); }

    [[nodiscard]] int get() const noexcept { return fd_; }
    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }

    /// Closes the descriptor; returns close()'s errno, or 0.
    int close() noexcept {
        if (fd_ < 0) {
            return 0;
        }
        const int rc = ::close(std::exchange(fd_, -1));
        return rc == 0 ? 0 : errno;
    }
    void reset() noexcept { (void)close(); }

private:
    int fd_ = -1;
};

/// A file opened for reading, with its size taken when it was opened.
class InputFile {
public:
    /// \throws IOError when the file cannot be opened or is not a regular file (the message says
    /// what it is: "is a FIFO, not a regular file").
    ///
    /// Nothing but a regular file is read. A path that already names something else is refused
    /// without being opened (opening a device can act on it); the open itself is non-blocking, so
    /// a FIFO that appears in between is refused at once rather than waited on for a writer, and
    /// `O_NOCTTY` keeps a terminal from becoming the process's controlling terminal.
    explicit InputFile(const std::filesystem::path& path) : path_(path) {
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
            throw_not_regular_file("open", "cannot open", path, st.st_mode);
        }
        int fd = -1;
        do {
            fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) {
            const int err = errno;
            // A socket cannot be opened (ENXIO): say what it is (one made since the stat above).
            if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
                throw_not_regular_file("open", "cannot open", path, st.st_mode);
            }
            throw_io_error("open", "cannot open", path, err);
        }
        fd_ = FileDescriptor(fd);
        if (::fstat(fd, &st) != 0) {
            throw_io_error("open", "cannot stat", path, errno);
        }
        if (!S_ISREG(st.st_mode)) {
            throw_not_regular_file("open", "cannot open", path, st.st_mode);
        }
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
            throw_io_error("open", "cannot clear O_NONBLOCK on", path, errno);
        }
        size_ = static_cast<std::uint64_t>(st.st_size);
    }

    [[nodiscard]] int fd() const noexcept { return fd_.get(); }
    [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

    /// Reads exactly `bytes` bytes at `offset` into `dst`. A file that ends early (it shrank
    /// since it was opened) is a FormatError naming `where` (a text, or a callable that makes it
    /// only then). \throws IOError on a read error.
    ///
    /// A large read is split into contiguous parts read at once by the threads of syncblob's pool
    /// (`parallel::max_threads()`; at least `parallel_read_part` bytes each): copying from the page
    /// cache into fresh memory costs as much in page faults on the destination as in the copy, and
    /// each thread then takes the faults of its own part.
    template <ReadWhere Where>
    void read_at(std::uint64_t offset, void* dst, std::size_t bytes, const Where& where) const {
        const auto parts = static_cast<unsigned>(
            std::min<std::size_t>(parallel::max_threads(), std::max<std::size_t>(1, bytes / parallel_read_part)));
        if (parts <= 1) {
            read_range(offset, static_cast<char*>(dst), bytes, where);
            return;
        }
        parallel::run(parts, [&](unsigned p) {
            const std::size_t first = bytes / parts * p / page_bytes * page_bytes;
            const std::size_t last = p + 1 == parts ? bytes : bytes / parts * (p + 1) / page_bytes * page_bytes;
            read_range(offset + first, static_cast<char*>(dst) + first, last - first, where);
        });
    }

    /// The smallest part a read is split into.
    static constexpr std::size_t parallel_read_part = std::size_t{8} << 20;

    /// Reads the file's bytes from `offset` on into `parts`, one part after the other, in one
    /// system call (`preadv`) where the file delivers them all: many small tensors that lie next to
    /// each other in the file cost one call, not one each. `parts` may hold at most `max_parts`;
    /// their lengths, which fit in a single call (at most `max_io_chunk` in all), are consumed as
    /// they are read. A file that ends early (it shrank since it was opened) is a FormatError
    /// naming `where(k)`, k the part it cut short. \throws IOError on a read error.
    template <class WhereOf>
    requires std::invocable<const WhereOf&, std::size_t>
    void read_scattered(std::uint64_t offset, std::span<::iovec> parts, const WhereOf& where) const {
        std::size_t k = 0;  // the first part not yet read in full
        while (k < parts.size()) {
            if (parts[k].iov_len == 0) {
                ++k;
                continue;
            }
            const ssize_t n =
                ::preadv(fd_.get(), parts.data() + k, static_cast<int>(parts.size() - k), static_cast<off_t>(offset));
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                throw_io_error("read", "cannot read", path_, errno);
            }
            if (n == 0) {
                std::size_t left = 0;
                for (std::size_t j = k; j < parts.size(); ++j) {
                    left += parts[j].iov_len;
                }
                io::throw_format_error(path_.string(), where(k),
                                       "file ends at byte " + std::to_string(offset) + ", " + std::to_string(left) +
                                           " more bytes expected (truncated)");
            }
            offset += static_cast<std::uint64_t>(n);
            for (auto got = static_cast<std::size_t>(n); got != 0;) {  // a short read stops inside a part
                const std::size_t step = std::min(got, parts[k].iov_len);
                parts[k].iov_base = static_cast<char*>(parts[k].iov_base) + step;
                parts[k].iov_len -= step;
                got -= step;
                if (parts[k].iov_len == 0) {
                    ++k;
                }
            }
        }
    }
    /// The most parts one `read_scattered` takes (POSIX guarantees `IOV_MAX` at least 16; Linux takes 1024).
    static constexpr std::size_t max_parts = 1024;
    static_assert(max_parts <= IOV_MAX);

private:
    static constexpr std::size_t page_bytes = 4096;

    template <ReadWhere Where>
    void read_range(std::uint64_t offset, char* out, std::size_t bytes, const Where& where) const {
        while (bytes != 0) {
            const std::size_t chunk = bytes < max_io_chunk ? bytes : max_io_chunk;
            const ssize_t n = ::pread(fd_.get(), out, chunk, static_cast<off_t>(offset));
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                throw_io_error("read", "cannot read", path_, errno);
            }
            if (n == 0) {
                io::throw_format_error(path_.string(), where_text(where),
                                       "file ends at byte " + std::to_string(offset) + ", " + std::to_string(bytes) +
                                           " more bytes expected (truncated)");
            }
            const auto got = static_cast<std::size_t>(n);
            out += got;
            bytes -= got;
            offset += got;
        }
    }

    std::filesystem::path path_;
    FileDescriptor fd_;
    std::uint64_t size_ = 0;
};

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
