// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// Helpers shared by the tests that read and write files: a whole file as bytes, and back; the
// read and write system calls the process has made.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace test {

/// The process's count `key` of /proc/self/io (every thread's): "syscr:" its read system calls,
/// "syscw:" its writes. Nothing where the kernel does not report them.
inline std::optional<std::uint64_t> io_calls(std::string_view key) {
    std::ifstream in("/proc/self/io");
    std::string name;
    std::uint64_t value = 0;
    while (in >> name >> value) {
        if (name == key) {
            return value;
        }
    }
    return std::nullopt;
}

/// The bytes of file `p`. \throws std::runtime_error naming `p` when it cannot be opened.
inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        throw std::runtime_error("test::slurp: cannot open " + p.string());
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `bytes` to file `p`, replacing it. \throws std::runtime_error naming `p` when it cannot be written.
inline void spit(const std::filesystem::path& p, std::string_view bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
        throw std::runtime_error("test::spit: cannot write " + p.string());
    }
}

/// The bytes of `s`, as the in-memory readers take them.
inline std::span<const std::byte> as_bytes(std::string_view s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace test
