// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The parts of `io::save_atomic`: which file a save replaces (a regular file its caller could
/// write in place, reached through its symbolic links), the temporary file it writes first (in
/// that file's folder, with that file's mode, owner and group, under a name that always fits),
/// and the rename that replaces the file. Every step after the folder is opened names files
/// relative to it, so no path is ever longer than the target's own.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "../../core/error.hpp"
#include "posix_file.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// Most symbolic links followed from a save's target (Linux's MAXSYMLINKS).
inline constexpr int max_symlink_hops = 40;

/// The file a save writes: the regular file it replaces (what `lstat` said of it), or a new one.
struct SaveTarget {
    std::filesystem::path file;
    bool exists = false;
    struct stat status {};
};

/// "0644": a mode's permission bits, for messages.
[[nodiscard]] inline std::string mode_text(mode_t mode) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
    return buf;
}

/// Refuses a file its caller could not write in place: a save must not do, by renaming a new file
/// over it, what the file's permissions (or a read-only file system) forbid.
inline void require_writable(const std::filesystem::path& target, const SaveTarget& t) {
    if (::faccessat(AT_FDCWD, t.file.c_str(), W_OK, AT_EACCESS) == 0) {
        return;
    }
    const int err = errno;
    if (err != EACCES && err != EPERM && err != EROFS && err != ETXTBSY) {
        throw_io_error("save", "cannot check write access to", t.file, err);
    }
    throw IOError("save: cannot replace \"" + target.string() + "\": " +
                  (t.file == target ? std::string("it") : "the file it leads to, \"" + t.file.string() + "\",") +
                  " is read-only for this process (mode " + mode_text(t.status.st_mode) + ", owner " +
                  std::to_string(t.status.st_uid) + ", group " + std::to_string(t.status.st_gid) + ": " +
                  std::strerror(err) + "); a save replaces only a file its caller could write in place");
}

/// What a save to `target` writes: `target`, or the regular file its chain of symbolic links leads
/// to (a relative link is read from the folder of the link). A `target` that does not exist is a
/// new file. \throws IOError, before anything is created, when `target` or the end of its links
/// exists and is not a regular file, a link dangles, the name is too long, or the file is one its
/// caller may not write.
[[nodiscard]] inline SaveTarget resolve_save_target(const std::filesystem::path& target) {
    SaveTarget t;
    t.file = target;
    for (int hops = 0;; ++hops) {
        if (::lstat(t.file.c_str(), &t.status) != 0) {
            const int err = errno;
            if (err != ENOENT && err != ENOTDIR) {
                throw_io_error("save", "cannot stat", t.file, err);
            }
            if (hops == 0) {
                return t;  // a new file (a missing folder is reported when the temporary is created)
            }
            throw IOError("save: cannot replace \"" + target.string() + "\": is a dangling symbolic link (to \"" +
                          t.file.string() + "\", which does not exist)");
        }
        if (S_ISREG(t.status.st_mode)) {
            t.exists = true;
            require_writable(target, t);
            return t;
        }
        if (!S_ISLNK(t.status.st_mode)) {
            if (hops == 0) {
                throw_not_regular_file("save", "cannot replace", target, t.status.st_mode);
            }
            throw IOError("save: cannot replace \"" + target.string() + "\": is a symbolic link to \"" +
                          t.file.string() + "\", which is " + file_type_name(t.status.st_mode) +
                          ", not a regular file");
        }
        if (hops == max_symlink_hops) {
            throw_io_error("save", "cannot follow the symbolic links of", target, ELOOP);
        }
        std::error_code ec;
        const std::filesystem::path link = std::filesystem::read_symlink(t.file, ec);
        if (ec) {
            throw_io_error("save", "cannot read the symbolic link", t.file, ec.value());
        }
        t.file = link.is_absolute() ? link : t.file.parent_path() / link;
    }
}

/// A fresh hidden name for a temporary beside `leaf`, at most `name_max` bytes:
/// ".<leaf>.tmp-<pid>-<n>", with `leaf` cut short (at a UTF-8 character boundary) when the whole
/// would not fit, so that any legal name can be saved.
[[nodiscard]] inline std::string temporary_leaf(std::string_view leaf, std::size_t name_max) {
    static std::atomic<std::uint64_t> counter{0};
    std::string suffix(".tmp-");  // appended piecewise: g++ 12 -O3 misreports "lit" + string (-Wrestrict)
    suffix.append(std::to_string(::getpid())).append("-");
    suffix.append(std::to_string(counter.fetch_add(1, std::memory_order_relaxed)));
    std::size_t keep = leaf.size();
    if (1 + keep + suffix.size() > name_max) {
        keep = name_max > 1 + suffix.size() ? name_max - 1 - suffix.size() : 0;
        while (keep > 0 && (static_cast<unsigned char>(leaf[keep]) & 0xC0u) == 0x80u) {
            --keep;  // not inside a UTF-8 character
        }
    }
    std::string name(".");
    name.append(leaf.substr(0, keep)).append(suffix);
    return name;
}

/// The file a save writes before it replaces its destination, in the destination's folder (so
/// the final rename is atomic). On Linux it is an unnamed file (`O_TMPFILE`) that gets a name only
/// when committed: a process killed while writing leaves nothing behind. Where the file system or
/// the system has no `O_TMPFILE`, or `/proc` is not mounted, it is a hidden file
/// ".<name>.tmp-<pid>-<n>". It takes the mode, owner and group of the file it replaces (owner and
/// group where the process may set them: root may, others may keep their own files' and set a
/// group they belong to; set-user-ID and set-group-ID bits are kept only with the owner or group
/// they go with), before anything is written. Destroyed before `commit` succeeds, it is removed.
class TemporaryFile {
public:
    /// Creates the temporary for replacing `target.file`; `allow_unnamed = false` forces a named
    /// one. \throws IOError when the folder cannot hold a new file.
    explicit TemporaryFile(const SaveTarget& target, bool allow_unnamed = true)
        : file_(target.file), leaf_(target.file.filename().string()), folder_(open_folder(target.file)) {
        const mode_t mode = target.exists ? (target.status.st_mode & 0777) : 0666;
#if defined(__linux__) && defined(O_TMPFILE)
        if (!allow_unnamed || !create_unnamed(mode)) {
            create_named(mode);
        }
#else
        (void)allow_unnamed;
        create_named(mode);
#endif
        if (target.exists) {
            take_ownership_and_mode(target.status);
        }
    }
    /// The temporary for replacing `file` (what it is now is looked up).
    explicit TemporaryFile(const std::filesystem::path& file, bool allow_unnamed = true)
        : TemporaryFile(existing(file), allow_unnamed) {}
    TemporaryFile(const TemporaryFile&) = delete;
    TemporaryFile& operator=(const TemporaryFile&) = delete;
    ~TemporaryFile() {
        fd_.reset();
        if (!name_.empty()) {
            (void)::unlinkat(folder_.get(), name_.c_str(), 0);
        }
    }

    [[nodiscard]] int fd() const noexcept {
        return fd_.get();
    }
    /// The temporary's path, empty while it has no name (`O_TMPFILE`).
    [[nodiscard]] std::filesystem::path name() const {
        return name_.empty() ? std::filesystem::path() : beside(name_);
    }
    /// The path messages name: the temporary's, or the destination's while it has none.
    [[nodiscard]] std::filesystem::path path() const {
        return name_.empty() ? file_ : beside(name_);
    }

    /// Replaces the destination with the temporary: with `fsync`, syncs the file; names it if it
    /// is unnamed (`linkat` cannot replace a file, so it gets a hidden name first); closes it;
    /// renames it over the destination; with `fsync`, syncs the folder. \throws IOError.
    void commit(bool fsync) {
        if (fsync && ::fsync(fd_.get()) != 0) {
            throw_io_error("save", "cannot fsync", path(), errno);
        }
        if (name_.empty()) {
            name_ = create_beside("cannot name the temporary file beside",
                                  [this](const std::string& n) { return link_unnamed(n); });
        }
        if (const int err = fd_.close(); err != 0) {
            throw_io_error("save", "cannot close", path(), err);
        }
        if (::renameat(folder_.get(), name_.c_str(), folder_.get(), leaf_.c_str()) != 0) {
            throw_io_error("save", "cannot rename the temporary file to", file_, errno);
        }
        name_.clear();
        if (fsync && ::fsync(folder_.get()) != 0 && errno != EINVAL && errno != EBADF) {
            throw_io_error("save", "cannot fsync the folder of", file_, errno);
        }
    }

private:
    static SaveTarget existing(const std::filesystem::path& file) {
        SaveTarget t;
        t.file = file;
        t.exists = ::stat(file.c_str(), &t.status) == 0 && S_ISREG(t.status.st_mode);
        return t;
    }

    // The destination's folder, opened: later steps name files relative to it.
    static FileDescriptor open_folder(const std::filesystem::path& file) {
        const std::filesystem::path folder = file.parent_path().empty() ? "." : file.parent_path();
        int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
#if defined(O_PATH)
        if (fd < 0 && errno == EACCES) {  // a folder we may write but not list
            fd = ::open(folder.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
#endif
        if (fd < 0) {
            throw_io_error("save", "cannot create a temporary file beside", file, errno);
        }
        return FileDescriptor(fd);
    }

    [[nodiscard]] std::filesystem::path beside(const std::string& leaf) const {
        return file_.parent_path() / leaf;
    }

    // The most bytes a name in the folder may have.
    [[nodiscard]] std::size_t name_max() const {
        const long n = ::fpathconf(folder_.get(), _PC_NAME_MAX);
        return n > 0 ? static_cast<std::size_t>(n) : std::size_t{NAME_MAX};
    }

    // Calls `try_create(name)` (returns 0 or an errno) with fresh names until one is free.
    template <class TryCreate>
    std::string create_beside(std::string_view what, TryCreate&& try_create) {
        const std::size_t max = name_max();
        for (int attempt = 0;; ++attempt) {
            std::string name = temporary_leaf(leaf_, max);
            const int err = try_create(name);
            if (err == 0) {
                return name;
            }
            if ((err != EEXIST && err != EINTR) || attempt > 100) {
                throw_io_error("save", what, file_, err);
            }
        }
    }

    void create_named(mode_t mode) {
        name_ = create_beside("cannot create a temporary file beside", [&](const std::string& name) {
            const int fd = ::openat(folder_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
            if (fd < 0) {
                return errno;
            }
            fd_ = FileDescriptor(fd);
            return 0;
        });
    }

    // The replaced file's owner and group where permitted, then its mode (chown clears the
    // set-ID bits, so the mode comes last; a set-ID bit stays only with the owner or group it is for).
    void take_ownership_and_mode(const struct stat& old) {
        struct stat now {};
        if (::fstat(fd_.get(), &now) != 0) {
            throw_io_error("save", "cannot stat", path(), errno);
        }
        bool owner = now.st_uid == old.st_uid;
        bool group = now.st_gid == old.st_gid;
        if ((!owner || !group) && ::fchown(fd_.get(), old.st_uid, old.st_gid) == 0) {
            owner = group = true;
        } else if (!group && ::fchown(fd_.get(), static_cast<uid_t>(-1), old.st_gid) == 0) {
            group = true;
        }
        mode_t mode = old.st_mode & 07777;
        if (!owner) {
            mode &= static_cast<mode_t>(~S_ISUID);
        }
        if (!group) {
            mode &= static_cast<mode_t>(~S_ISGID);
        }
        if (::fchmod(fd_.get(), mode) != 0) {
            throw_io_error("save", "cannot set the mode of", path(), errno);
        }
    }

#if defined(__linux__) && defined(O_TMPFILE)
    // Opens an unnamed file in the folder; false when that is not possible here, and the named
    // fallback then runs (and reports a real error itself).
    bool create_unnamed(mode_t mode) {
        int fd = -1;
        do {
            fd = ::openat(folder_.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
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
    int link_unnamed(const std::string& name) const {
        if (::linkat(AT_FDCWD, proc_fd_path().c_str(), folder_.get(), name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
            return 0;
        }
        if (errno == ENOENT && ::linkat(fd_.get(), "", folder_.get(), name.c_str(), AT_EMPTY_PATH) == 0) {
            return 0;
        }
        return errno;
    }
#else
    int link_unnamed(const std::string&) const {
        return ENOTSUP;
    }  // never unnamed here
#endif

    std::filesystem::path file_;  // the destination
    std::string leaf_;            // its name in its folder
    FileDescriptor folder_;
    FileDescriptor fd_;
    std::string name_;  // the temporary's name in the folder while it has one and until the rename
};

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
