// SPDX-License-Identifier: BSD-2-Clause
// The shared file layer: atomic saving, bounded whole-file reads, the FormatError convention and
// element conversion.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <stdexcept>
#include <string>
#include <syncblob/core/thread_pool.hpp>
#include <syncblob/io/detail/posix_file.hpp>
#include <syncblob/io/file.hpp>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "files.hpp"
#include "tempfile.hpp"

namespace fs = std::filesystem;
using namespace syncblob;
using Catch::Matchers::Contains;

using test::slurp;
using test::spit;

namespace {

std::size_t entries(const fs::path& folder) {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

// The names in `folder`, sorted and joined with ", " (a failed CHECK then shows a leftover by name).
std::string names_in(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) {
        names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    std::string out;
    for (const auto& name : names) {
        out += (out.empty() ? "" : ", ") + name;
    }
    return out;
}

// The st_mode of `p` itself (lstat: a symbolic link is not followed); 0 when it does not exist.
mode_t mode_of(const fs::path& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 ? st.st_mode : 0;
}

// Leaves a UNIX socket file at `p` (bound, then closed: the file stays, but nothing can open it).
bool make_socket(const fs::path& p) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string name = p.string();
    if (name.size() >= sizeof address.sun_path) {
        return false;
    }
    std::memcpy(address.sun_path, name.c_str(), name.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return bound;
}

// The message of the IOError that saving "new" to `target` throws; `called` tells whether the
// writing function ran.
std::string save_refusal(const fs::path& target, bool& called) {
    called = false;
    return test::message_of<IOError>([&] {
        io::save_atomic(target, {}, [&](io::FileWriter& w) {
            called = true;
            w.write("new", 3);
        });
    });
}

// Forks a child that saves `target` with a writer that writes 1 MiB and then kills its own process
// with SIGKILL; returns the child's wait status (it exits with 3 when the save returned).
int status_of_save_killed_midway(const fs::path& target) {
    const std::string block(1 << 20, 'k');
    const int status = test::wait_status_of_child([&] {
        io::save_atomic(target, {}, [&](io::FileWriter& w) {
            w.write(block.data(), block.size());
            ::raise(SIGKILL);
        });
        return 3;
    });
    REQUIRE(status != -1);
    return status;
}

// Runs `io::read_file(file, 100)` on another thread and returns its IOError's message. When the
// call has not returned after 5 s (blocked opening a FIFO that has no writer), opens the FIFO for
// writing to release it and fails the test instead of hanging.
std::string load_refusal(const fs::path& file) {
    auto load = std::async(std::launch::async,
                           [&] { return test::message_of<IOError>([&] { (void)io::read_file(file, 100); }); });
    if (load.wait_for(std::chrono::seconds(5)) == std::future_status::ready) {
        return load.get();
    }
    for (int attempt = 0; attempt < 500; ++attempt) {
        const int writer = ::open(file.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (writer >= 0) {
            ::close(writer);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string message = load.get();
    FAIL("read_file(\"" << file.string() << "\") blocked for 5 s; released, it said: " << message);
    return message;
}

}  // namespace

TEST_CASE("save_atomic writes the file and leaves no temporary behind", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "out.bin";
    io::save_atomic(target, {}, [](io::FileWriter& w) {
        w.write("hello ", 6);
        w.write("world", 5);
        CHECK(w.bytes_written() == 11);
    });
    CHECK(slurp(target) == "hello world");
    CHECK(entries(dir.path()) == 1);
}

TEST_CASE("save_atomic with fsync and a reservation larger than what is written", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "out.bin";
    io::save_atomic(target, io::SaveOptions{.fsync = true}, [](io::FileWriter& w) {
        w.reserve(1 << 20);
        w.write("abc", 3);
    });
    CHECK(fs::file_size(target) == 3);
    CHECK(slurp(target) == "abc");
}

TEST_CASE("save_atomic leaves the old file intact when the writer throws midway", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "weights.bin";
    spit(target, "old contents");
    const std::vector<char> big(1 << 20, 'x');
    CHECK_THROWS_WITH(io::save_atomic(target, {},
                                      [&](io::FileWriter& w) {
                                          w.reserve(4 << 20);
                                          w.write(big.data(), big.size());
                                          throw std::runtime_error("writer failed");
                                      }),
                      "writer failed");
    CHECK(slurp(target) == "old contents");
    CHECK(entries(dir.path()) == 1);  // the temporary is gone
}

TEST_CASE("save_atomic into a missing folder is an IOError naming the target", "[io][file]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "no" / "such" / "file.bin";
    bool called = false;
    CHECK_THAT(test::message_of<IOError>([&] { io::save_atomic(target, {}, [&](io::FileWriter&) { called = true; }); }),
               Catch::Matchers::Contains("file.bin") && Catch::Matchers::Contains("No such file"));
    CHECK_FALSE(called);
}

TEST_CASE("save_atomic refuses to replace a FIFO, a socket or a directory", "[io][file][save]") {
    const test::TempDir dir;
    bool called = false;
    SECTION("a FIFO") {
        const fs::path fifo = dir.path() / "pipe";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        CHECK_THAT(save_refusal(fifo, called),
                   Contains("save: cannot replace \"" + fifo.string() + "\": is a FIFO, not a regular file"));
        CHECK(S_ISFIFO(mode_of(fifo)));
    }
    SECTION("a socket") {
        const fs::path socket = dir.path() / "sock";
        REQUIRE(make_socket(socket));
        CHECK_THAT(save_refusal(socket, called),
                   Contains("save: cannot replace \"" + socket.string() + "\": is a socket, not a regular file"));
        CHECK(S_ISSOCK(mode_of(socket)));
    }
    SECTION("a directory") {
        const fs::path folder = dir.path() / "sub";
        fs::create_directory(folder);
        CHECK_THAT(save_refusal(folder, called), Contains("\"" + folder.string() + "\": is a directory"));
        CHECK(S_ISDIR(mode_of(folder)));
        CHECK(entries(folder) == 0);
    }
    CHECK_FALSE(called);
    CHECK(entries(dir.path()) == 1);  // nothing was created beside it
}

TEST_CASE("save_atomic refuses to replace /dev/null", "[io][file][save]") {
    bool called = false;
    CHECK_THAT(save_refusal("/dev/null", called),
               Contains("save: cannot replace \"/dev/null\": is a character device, not a regular file"));
    CHECK_FALSE(called);
    const mode_t mode = mode_of("/dev/null");
    CHECK(S_ISCHR(mode));
    if (!S_ISCHR(mode) && ::geteuid() == 0) {  // a regression replaced it: give the machine its /dev/null back
        (void)::unlink("/dev/null");
        (void)::mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3));
        (void)::chmod("/dev/null", 0666);
    }
}

TEST_CASE("save_atomic through a symbolic link replaces the file it leads to, not the link", "[io][file][save]") {
    const test::TempDir dir;
    fs::create_directory(dir.path() / "data");
    fs::create_directory(dir.path() / "links");
    const fs::path real = dir.path() / "data" / "weights.bin";
    spit(real, "old contents");
    const fs::path link1 = dir.path() / "links" / "first";
    const fs::path link2 = dir.path() / "links" / "second";
    fs::create_symlink("../data/weights.bin", link1);  // relative: resolved from the link's folder
    fs::create_symlink("first", link2);                // a chain of two links
    io::save_atomic(link2, {}, [](io::FileWriter& w) { w.write("new", 3); });
    CHECK(slurp(real) == "new");
    CHECK(S_ISLNK(mode_of(link1)));
    CHECK(S_ISLNK(mode_of(link2)));
    CHECK(fs::read_symlink(link2) == "first");
    CHECK(names_in(dir.path() / "links") == "first, second");
    CHECK(names_in(dir.path() / "data") == "weights.bin");  // the temporary was beside the file, and is gone
}

TEST_CASE("save_atomic refuses a symbolic link to a FIFO and a dangling one", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path link = dir.path() / "link";
    bool called = false;
    SECTION("a link to a FIFO") {
        const fs::path fifo = dir.path() / "pipe";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        fs::create_symlink(fifo, link);
        CHECK_THAT(save_refusal(link, called), Contains("save: cannot replace \"" + link.string() + "\"") &&
                                                   Contains("\"" + fifo.string() + "\", which is a FIFO"));
        CHECK(S_ISFIFO(mode_of(fifo)));
        CHECK(names_in(dir.path()) == "link, pipe");
    }
    SECTION("a dangling link") {
        fs::create_symlink("missing.bin", link);
        CHECK_THAT(save_refusal(link, called), Contains("save: cannot replace \"" + link.string() + "\"") &&
                                                   Contains("is a dangling symbolic link"));
        CHECK(names_in(dir.path()) == "link");
    }
    CHECK_FALSE(called);
    CHECK(S_ISLNK(mode_of(link)));
}

TEST_CASE("save_atomic killed midway leaves no temporary file behind", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "weights.bin";
    SECTION("a new file") {
        const int status = status_of_save_killed_midway(target);
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGKILL);
        CHECK(names_in(dir.path()).empty());
    }
    SECTION("over an old file, which stays intact") {
        spit(target, "old contents");
        const int status = status_of_save_killed_midway(target);
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGKILL);
        CHECK(names_in(dir.path()) == "weights.bin");
        CHECK(slurp(target) == "old contents");
    }
}

TEST_CASE("save_atomic over a file makes a new one: a mapping of the old file keeps its bytes", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "weights.bin";
    const std::size_t size = std::size_t{3} * 4096;
    spit(target, std::string(size, 'o'));
    struct stat before {};
    REQUIRE(::stat(target.c_str(), &before) == 0);
    const int fd = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    REQUIRE(mapping != MAP_FAILED);
    io::save_atomic(target, {}, [&](io::FileWriter& w) { w.write(std::string(size, 'n').data(), size); });
    const std::string mapped(static_cast<const char*>(mapping), size);
    ::munmap(mapping, size);
    CHECK(mapped.find_first_not_of('o') == std::string::npos);  // the old bytes, all of them
    CHECK(slurp(target) == std::string(size, 'n'));
    struct stat after {};
    REQUIRE(::stat(target.c_str(), &after) == 0);
    CHECK(after.st_ino != before.st_ino);
}

TEST_CASE("save_atomic's temporary: unnamed on Linux, else hidden, and removed unless committed", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "weights.bin";
    spit(target, "old contents");
#if defined(__linux__)
    SECTION("unnamed (O_TMPFILE): nothing appears in the folder until the commit") {
        io::detail::TemporaryFile file(target);
        CHECK(file.name().empty());
        CHECK(file.path() == target);
        CHECK(::write(file.fd(), "new", 3) == 3);
        CHECK(names_in(dir.path()) == "weights.bin");
        file.commit(true);
        CHECK(names_in(dir.path()) == "weights.bin");
        CHECK(slurp(target) == "new");
    }
#endif
    SECTION("the named fallback, committed") {
        io::detail::TemporaryFile file(target, /*allow_unnamed=*/false);
        CHECK(file.name().parent_path() == dir.path());
        CHECK_THAT(file.name().filename().string(), Catch::Matchers::StartsWith(".weights.bin.tmp-"));
        CHECK(::write(file.fd(), "new", 3) == 3);
        CHECK(entries(dir.path()) == 2);
        file.commit(true);
        CHECK(file.name().empty());
        CHECK(names_in(dir.path()) == "weights.bin");
        CHECK(slurp(target) == "new");
    }
    SECTION("the named fallback, abandoned") {
        {
            io::detail::TemporaryFile file(target, /*allow_unnamed=*/false);
            CHECK(::write(file.fd(), "new", 3) == 3);
            CHECK(entries(dir.path()) == 2);
        }
        CHECK(names_in(dir.path()) == "weights.bin");
        CHECK(slurp(target) == "old contents");
    }
}

TEST_CASE("read_file reads everything and enforces the byte limit", "[io][file]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "data.txt";
    spit(file, std::string(100, 'a') + "end");
    CHECK(io::read_file(file, 103) == std::string(100, 'a') + "end");
    CHECK_THAT(test::message_of<FormatError>([&] { (void)io::read_file(file, 102); }),
               Catch::Matchers::Contains("data.txt: file size: 103 bytes exceed the limit of 102 bytes"));
    CHECK_THAT(test::message_of<IOError>([&] { (void)io::read_file(dir.path() / "missing.txt", 10); }),
               Catch::Matchers::Contains("missing.txt") && Catch::Matchers::Contains("No such file"));
    CHECK_THROWS_AS(io::read_file(dir.path(), 10), IOError);  // a folder is not a regular file
}

TEST_CASE("a large read is split over the pool's threads and reads every byte where it belongs", "[io][file][load]") {
    const test::TempDir dir;
    const fs::path file = dir.path() / "large.bin";
    // 3.5 parts' worth: pieces of unequal size, and an end that is not a page boundary
    const std::size_t bytes = io::detail::InputFile::parallel_read_part * 7 / 2 + 123;
    std::vector<std::uint32_t> words(bytes / 4 + 1);
    for (std::size_t i = 0; i < words.size(); ++i) {
        words[i] = static_cast<std::uint32_t>(i * 2654435761u);
    }
    {
        std::ofstream out(file, std::ios::binary);
        out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(bytes));
    }
    const unsigned threads = parallel::max_threads();
    for (const unsigned t : {1u, 2u, 4u}) {
        INFO(t << " threads");
        parallel::set_max_threads(t);
        const io::detail::InputFile in(file);
        std::vector<char> got(bytes + 7, '\x5a');
        in.read_at(5, got.data() + 3, bytes - 5, "the data");
        CHECK(std::memcmp(got.data() + 3, reinterpret_cast<const char*>(words.data()) + 5, bytes - 5) == 0);
        CHECK(std::count(got.begin(), got.begin() + 3, '\x5a') == 3);  // nothing written outside
        CHECK(std::count(got.end() - 9, got.end(), '\x5a') == 9);
        // a file shorter than the read: the error names where the file ends, whichever part saw it
        CHECK_THAT(test::message_of<FormatError>([&] { in.read_at(0, got.data(), bytes + 4, "the data"); }),
                   Contains("file ends at byte " + std::to_string(bytes)));
    }
    parallel::set_max_threads(threads);
}

TEST_CASE("read_file refuses a FIFO at once instead of waiting for a writer", "[io][file][load]") {
    const test::TempDir dir;
    const fs::path fifo = dir.path() / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const std::string message = load_refusal(fifo);
    CHECK_THAT(message, Contains("open: cannot open \"" + fifo.string() + "\": is a FIFO, not a regular file"));
}

TEST_CASE("read_file names what a path is when it is not a regular file", "[io][file][load]") {
    const test::TempDir dir;
    SECTION("a directory") {
        const std::string message = load_refusal(dir.path());
        CHECK_THAT(message, Contains("\"" + dir.path().string() + "\": is a directory"));
    }
    SECTION("a socket, which cannot be opened at all") {
        const fs::path socket = dir.path() / "sock";
        REQUIRE(make_socket(socket));
        const std::string message = load_refusal(socket);
        CHECK_THAT(message, Contains("\"" + socket.string() + "\": is a socket"));
    }
    SECTION("a character device") {
        const std::string message = load_refusal("/dev/null");
        CHECK_THAT(message, Contains("\"/dev/null\": is a character device"));
    }
}

TEST_CASE("throw_format_error formats source, where and what", "[io][file]") {
    CHECK(test::message_of<FormatError>([] {
              io::throw_format_error("w.npy", "header byte 10", "expected 'descr' key");
          }) == "w.npy: header byte 10: expected 'descr' key");
}

namespace {

// Runs `fn` in a child process as the user `nobody` (65534) when this process is root, as this
// process's user otherwise; returns the child's exit status (fn's return value, or
// test::child_threw on an exception, 98 when the user could not be changed).
template <class Fn>
int exit_status_as_unprivileged(Fn&& fn) {
    const int status = test::exit_status_of_child([&] {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
            return 98;
        }
        return fn();
    });
    REQUIRE(status != -1);
    return status;
}

void save_text(const fs::path& target, const std::string& text) {
    io::save_atomic(target, {}, [&](io::FileWriter& w) { w.write(text.data(), text.size()); });
}

struct stat stat_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st;
}

}  // namespace

// Issue 34, case 5. Before: a save made a new file with the saver's owner and the umask's mode
// (0600 became 0644; a file of another owner became root's).
TEST_CASE("save_atomic keeps the replaced file's mode, owner and group", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "secret.bin";
    spit(target, "old");
    REQUIRE(::chmod(target.c_str(), 0600) == 0);
    save_text(target, "new");
    CHECK(slurp(target) == "new");
    CHECK((stat_of(target).st_mode & 07777) == 0600);

    REQUIRE(::chmod(target.c_str(), 0640) == 0);
    if (::geteuid() == 0) {  // only root can give a file away
        REQUIRE(::chown(target.c_str(), 65534, 65534) == 0);
    }
    const struct stat before = stat_of(target);
    save_text(target, "newer");
    const struct stat after = stat_of(target);
    CHECK(after.st_ino != before.st_ino);
    CHECK((after.st_mode & 07777) == 0640);
    CHECK(after.st_uid == before.st_uid);
    CHECK(after.st_gid == before.st_gid);

    const fs::path fresh = dir.path() / "fresh.bin";  // a new file gets the umask's mode, as open(2) gives
    const mode_t mask = ::umask(022);
    ::umask(mask);
    save_text(fresh, "x");
    CHECK((stat_of(fresh).st_mode & 0777) == (0666 & ~mask));
}

// Issue 34, case 5. Before: a user who may not write a file (mode 0444) replaced it anyway,
// because a save renames a new file over it.
TEST_CASE("save_atomic refuses a file its caller could not write in place", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "frozen.bin";
    spit(target, "old");
    REQUIRE(::chmod(target.c_str(), 0444) == 0);
    // The folder is the unprivileged user's own: it may create and rename files there.
    REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
    if (::geteuid() == 0) {
        REQUIRE(::chown(dir.path().c_str(), 65534, 65534) == 0);
        REQUIRE(::chown(target.c_str(), 65534, 65534) == 0);
    }
    const int status = exit_status_as_unprivileged([&] {
        bool called = false;
        const std::string message = save_refusal(target, called);
        const bool refused = message.find("cannot replace \"" + target.string() + "\"") != std::string::npos &&
                             message.find("read-only") != std::string::npos;
        return refused && !called ? 0 : 1;
    });
    CHECK(status == 0);
    CHECK(slurp(target) == "old");
    CHECK(names_in(dir.path()) == "frozen.bin");
}

// What a save does to hard links (documented in docs/file-safety.md): it replaces the name it was
// given, so another name of the old file keeps the old contents.
TEST_CASE("save_atomic replaces the name it is given: another hard link keeps the old file", "[io][file][save]") {
    const test::TempDir dir;
    const fs::path target = dir.path() / "a.bin";
    const fs::path other = dir.path() / "b.bin";
    spit(target, "old");
    fs::create_hard_link(target, other);
    save_text(target, "new");
    CHECK(slurp(target) == "new");
    CHECK(slurp(other) == "old");
    CHECK(stat_of(other).st_nlink == 1);
}

// Issue 34, case 6. Before: the temporary name ".<name>.tmp-<pid>-<n>" of a 245-255 byte name
// exceeded NAME_MAX, and the save failed with "File name too long" after writing everything.
TEST_CASE("save_atomic saves names of every legal length and refuses a longer one before writing", "[io][file][save]") {
    const test::TempDir dir;
    for (const std::size_t length : {std::size_t{200}, std::size_t{245}, std::size_t{254}, std::size_t{255}}) {
        CAPTURE(length);
        const fs::path target = dir.path() / std::string(length, 'n');
        save_text(target, "new");
        CHECK(slurp(target) == "new");
        save_text(target, "again");  // over an existing file too
        CHECK(slurp(target) == "again");
        fs::remove(target);
    }
    bool called = false;
    CHECK_THAT(save_refusal(dir.path() / std::string(256, 'n'), called), Contains("File name too long"));
    CHECK_FALSE(called);
    CHECK(names_in(dir.path()).empty());
}

// Issue 34, case 10 (checking after acting). Before: a target whose path is near PATH_MAX was
// written in full, then naming the temporary beside it (a longer path) failed.
TEST_CASE("save_atomic saves a target whose path is near PATH_MAX", "[io][file][save]") {
    const test::TempDir dir;
    fs::path folder = dir.path();
    const std::string part(200, 'd');
    while (folder.string().size() + 1 + part.size() < PATH_MAX - 40) {
        folder /= part;
    }
    fs::create_directories(folder);
    const std::size_t room = PATH_MAX - 1 - folder.string().size() - 1;  // the longest name that fits
    const fs::path target = folder / std::string(std::min<std::size_t>(room, 255), 'p');
    REQUIRE(target.string().size() < PATH_MAX);
    save_text(target, "new");
    CHECK(slurp(target) == "new");
    save_text(target, "again");
    CHECK(slurp(target) == "again");
}
