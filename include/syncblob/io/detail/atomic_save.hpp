// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The parts of `io::save_atomic`: where a save may write (a regular file, reached through its
/// symbolic links), the temporary file it writes first, and the rename that replaces the file.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "../../core/error.hpp"
#include "posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

/// Most symbolic links followed from a save's target (Linux's MAXSYMLINKS).
inline constexpr int max_symlink_hops = 40;

/// The file a save to `target` replaces: `target`, or the regular file its chain of symbolic
/// links leads to (a relative link is read from the folder of the link). A `target` that does not
/// exist is returned as it is: the save creates it. \throws IOError, before anything is created,
/// when `target` or the end of its links exists and is not a regular file, or a link dangles.
[[nodiscard]] inline std::filesystem::path resolve_save_destination(const std::filesystem::path& target) {
    std::filesystem::path file = target;
    for (int hops = 0;; ++hops) {
        struct stat st {};
        if (::lstat(file.c_str(), &st) != 0) {
            const int err = errno;
            if (err != ENOENT && err != ENOTDIR) {
                throw_io_error("save", "cannot stat", file, err);
            }
            if (hops == 0) {
                return file;  // a new file (a missing folder is reported when the temporary is created)
            }
            throw IOError("save: cannot replace \"" + target.string() + "\": is a dangling symbolic link (to \"" +
                          file.string() + "\", which does not exist)");
        }
        if (S_ISREG(st.st_mode)) {
            return file;
        }
        if (!S_ISLNK(st.st_mode)) {
            if (hops == 0) {
                throw_not_regular_file("save", "cannot replace", target, st.st_mode);
            }
            throw IOError("save: cannot replace \"" + target.string() + "\": is a symbolic link to \"" + file.string() +
                          "\", which is " + file_type_name(st.st_mode) + ", not a regular file");
        }
        if (hops == max_symlink_hops) {
            throw_io_error("save", "cannot follow the symbolic links of", target, ELOOP);
        }
        std::error_code ec;
        const std::filesystem::path link = std::filesystem::read_symlink(file, ec);
        if (ec) {
            throw_io_error("save", "cannot read the symbolic link", file, ec.value());
        }
        file = link.is_absolute() ? link : file.parent_path() / link;
    }
}

/// A fresh hidden name beside `file`: ".<name>.tmp-<pid>-<n>".
[[nodiscard]] inline std::filesystem::path temporary_name_beside(const std::filesystem::path& file) {
    static std::atomic<std::uint64_t> counter{0};
    std::string name(".");  // appended piecewise: g++ 12 -O3 misreports "lit" + string (-Wrestrict)
    name.append(file.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
    name.append("-").append(std::to_string(counter.fetch_add(1, std::memory_order_relaxed)));
    return file.parent_path().empty() ? std::filesystem::path(name) : file.parent_path() / name;
}

/// Calls `try_create(name)` (returns 0 or an errno) with fresh names beside `file` until one is
/// free, and returns that name. \throws IOError("save: <what> \"<file>\": ...") on another error.
template <class TryCreate>
[[nodiscard]] std::filesystem::path create_beside(const std::filesystem::path& file, std::string_view what,
                                                  TryCreate&& try_create) {
    for (int attempt = 0;; ++attempt) {
        std::filesystem::path name = temporary_name_beside(file);
        const int err = try_create(name);
        if (err == 0) {
            return name;
        }
        if ((err != EEXIST && err != EINTR) || attempt > 100) {
            throw_io_error("save", what, file, err);
        }
    }
}

/// `fsync`s the folder of `file`, so a rename into it survives a power loss.
inline void fsync_folder(const std::filesystem::path& file) {
    const std::filesystem::path folder = file.parent_path().empty() ? "." : file.parent_path();
    FileDescriptor dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid() && ::fsync(dir.get()) != 0 && errno != EINVAL) {
        throw_io_error("save", "cannot fsync the folder of", file, errno);
    }
}

/// The file a save writes before it replaces its destination, in the destination's folder (so
/// the final rename is atomic). On Linux it is an unnamed file (`O_TMPFILE`) that gets a name only
/// when committed: a process killed while writing leaves nothing behind. Where the file system or
/// the system has no `O_TMPFILE`, or `/proc` is not mounted, it is a hidden file
/// ".<name>.tmp-<pid>-<n>". Destroyed before `commit` succeeds, it is removed.
class TemporaryFile {
public:
    /// Creates the temporary for replacing `file`; `allow_unnamed = false` forces a named one.
    /// \throws IOError when the folder of `file` cannot hold a new file.
    explicit TemporaryFile(std::filesystem::path file, bool allow_unnamed = true) : file_(std::move(file)) {
#if defined(__linux__) && defined(O_TMPFILE)
        if (allow_unnamed && create_unnamed()) {
            return;
        }
#else
        (void)allow_unnamed;
#endif
        name_ =
            create_beside(file_, "cannot create a temporary file beside", [this](const std::filesystem::path& name) {
                const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
                if (fd < 0) {
                    return errno;
                }
                fd_ = FileDescriptor(fd);
                return 0;
            });
    }
    TemporaryFile(const TemporaryFile&) = delete;
    TemporaryFile& operator=(const TemporaryFile&) = delete;
    ~TemporaryFile() {
        fd_.reset();
        if (!name_.empty()) {
            (void)::unlink(name_.c_str());
        }
    }

    [[nodiscard]] int fd() const noexcept {
        return fd_.get();
    }
    /// The temporary's name, empty while it has none (`O_TMPFILE`).
    [[nodiscard]] const std::filesystem::path& name() const noexcept {
        return name_;
    }
    /// The path messages name: the temporary's name, or the destination while it has none.
    [[nodiscard]] const std::filesystem::path& path() const noexcept {
        return name_.empty() ? file_ : name_;
    }

    /// Replaces the destination with the temporary: with `fsync`, syncs the file; names it if it
    /// is unnamed (`linkat` cannot replace a file, so it gets a hidden name first); closes it;
    /// renames it over the destination; with `fsync`, syncs the folder. \throws IOError.
    void commit(bool fsync) {
        if (fsync && ::fsync(fd_.get()) != 0) {
            throw_io_error("save", "cannot fsync", path(), errno);
        }
        if (name_.empty()) {
            name_ = create_beside(file_, "cannot name the temporary file beside",
                                  [this](const std::filesystem::path& name) { return link_unnamed(name); });
        }
        if (const int err = fd_.close(); err != 0) {
            throw_io_error("save", "cannot close", name_, err);
        }
        if (::rename(name_.c_str(), file_.c_str()) != 0) {
            throw_io_error("save", "cannot rename the temporary file to", file_, errno);
        }
        name_.clear();
        if (fsync) {
            fsync_folder(file_);
        }
    }

private:
#if defined(__linux__) && defined(O_TMPFILE)
    // Opens an unnamed file in the destination's folder; false when that is not possible here, and
    // the named fallback then runs (and reports a real error, such as a missing folder, itself).
    bool create_unnamed() {
        const std::filesystem::path folder = file_.parent_path().empty() ? "." : file_.parent_path();
        int fd = -1;
        do {
            fd = ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) {
            return false;  // EOPNOTSUPP, EISDIR (a kernel without O_TMPFILE), EINVAL, or a real error
        }
        fd_ = FileDescriptor(fd);
        struct stat st {};
        if (::lstat(proc_fd_path().c_str(), &st) != 0) {  // /proc is not mounted: no way to name it
            fd_.reset();
            return false;
        }
        return true;
    }

    [[nodiscard]] std::string proc_fd_path() const {
        return "/proc/self/fd/" + std::to_string(fd_.get());
    }

    // Gives the unnamed file the name `name`; returns 0 or an errno. Through /proc, or, if /proc
    // went away since, AT_EMPTY_PATH (which needs CAP_DAC_READ_SEARCH).
    int link_unnamed(const std::filesystem::path& name) const {
        if (::linkat(AT_FDCWD, proc_fd_path().c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
            return 0;
        }
        if (errno == ENOENT && ::linkat(fd_.get(), "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) {
            return 0;
        }
        return errno;
    }
#else
    int link_unnamed(const std::filesystem::path&) const {
        return ENOTSUP;
    }  // never unnamed here
#endif

    std::filesystem::path file_;  // the destination
    FileDescriptor fd_;
    std::filesystem::path name_;  // the temporary's name while it has one and until the rename
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
