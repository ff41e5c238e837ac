// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Running part of a test in a forked child process: for a test that kills its own process midway
// (a save interrupted by SIGKILL), changes what a process may do (its user, its CPUs) or checks what
// a child inherits across fork().

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace test {

/// Exit status of a child whose body threw.
inline constexpr int child_threw = 99;

/// Runs `body()` (returning the child's exit status, an int) in a forked child and returns the
/// child's wait status (`WIFEXITED`, `WIFSIGNALED`, ...), or -1 when fork failed. The child never
/// returns into the test framework: it `_exit`s with body's value, or with `child_threw` when body
/// throws, or dies of a signal.
template <class Body>
int wait_status_of_child(Body&& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        try {
            ::_exit(body());
        } catch (...) {
            ::_exit(child_threw);
        }
    }
    if (pid < 0) {
        return -1;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return status;
}

/// The exit status of `body()` run in a forked child (as `wait_status_of_child`); -1 when fork failed
/// or the child did not exit normally (a signal ended it).
template <class Body>
int exit_status_of_child(Body&& body) {
    const int status = wait_status_of_child(static_cast<Body&&>(body));
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace test
