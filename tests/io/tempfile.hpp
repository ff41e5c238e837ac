// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Helpers shared by the IO tests: a temporary folder removed at the end of a test.

#include <unistd.h>

#include <atomic>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

namespace test {

/// A fresh folder under the system's temporary folder, removed with its contents on destruction.
class TempDir {
public:
    TempDir() {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("syncblob-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
        std::filesystem::create_directories(path_);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

/// The message of the exception of type `E` that `f()` throws; "no exception" when it throws none
/// and "unexpected exception: <what>" when it throws another type. Use with CHECK_THAT.
template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("unexpected exception: ") + e.what();
    }
    return "no exception";
}

}  // namespace test
