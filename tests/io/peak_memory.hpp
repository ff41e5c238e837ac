// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// How much memory a piece of code needs at its peak: it runs in a child process whose peak resident
// size (VmHWM) is reset to its current size first (Linux's /proc/self/clear_refs), so the growth
// measured is that code's alone, whatever the test process held before.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

namespace test {

namespace detail {

// A "VmRSS:" or "VmHWM:" line of /proc/self/status, in KiB; -1 when it cannot be read.
inline long status_kib(const char* field) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return -1;
    }
    char line[256];
    long kib = -1;
    const std::size_t n = std::strlen(field);
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strncmp(line, field, n) == 0) {
            kib = std::strtol(line + n, nullptr, 10);
        }
    }
    std::fclose(f);
    return kib;
}

}  // namespace detail

/// The peak growth of resident memory, in bytes, while `fn()` runs in a child process; nothing when
/// the peak cannot be measured here (no /proc) or `fn` throws (then the child exits with 2).
template <class Fn>
std::optional<std::uint64_t> peak_growth_bytes(Fn&& fn) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) {
        return std::nullopt;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(pipe_fds[0]);
        long growth = -1;
        const int clear = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
        if (clear >= 0 && ::write(clear, "5", 1) == 1) {
            const long before = detail::status_kib("VmRSS:");
            try {
                fn();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "peak_growth_bytes: %s\n", e.what());
                ::_exit(2);
            }
            const long peak = detail::status_kib("VmHWM:");
            growth = before >= 0 && peak >= 0 ? peak - before : -1;
        }
        const ssize_t written = ::write(pipe_fds[1], &growth, sizeof growth);
        ::_exit(written == sizeof growth ? 0 : 3);
    }
    ::close(pipe_fds[1]);
    long growth = -1;
    const ssize_t got = pid > 0 ? ::read(pipe_fds[0], &growth, sizeof growth) : -1;
    ::close(pipe_fds[0]);
    int status = 0;
    while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof growth || growth < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(growth) * 1024;
}

}  // namespace test
