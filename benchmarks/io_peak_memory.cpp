// SPDX-License-Identifier: BSD-2-Clause
// The peak resident memory of syncblob's loaders on large inputs, valid and hostile: load_json,
// load_npy and load_safetensors (copying and mapped) on files of about 1 GB each. Not a CI test:
// it writes a gigabyte at a time and takes a minute or two.
//
//   io_peak_memory [size in MiB, default 1024]     files go to $SYNCBLOB_BENCH_DIR (default: the temp folder)
//
// Each load runs in a child process that first resets its peak resident size to its current size
// (Linux: "5" into /proc/self/clear_refs), so the figure is the load's own growth: the peak of
// VmHWM over the VmRSS before the load, as /proc/self/status reports them. Each row prints the
// file's size, the size of the result (the blob's bytes), the peak growth and whether it stays
// within file + result + 16 MiB (the bound the loaders promise; most stay within result + 16 MiB:
// they hold no copy of the file). One file exists at a time; each is removed after its rows.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <syncblob/io/json.hpp>
#include <syncblob/io/npy.hpp>
#include <syncblob/io/safetensors.hpp>

namespace fs = std::filesystem;
using namespace syncblob;

namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr std::uint64_t slack = 16 * mib;

long status_kib(const char* field) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return -1;
    }
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strncmp(line, field, std::strlen(field)) == 0) {
            kib = std::strtol(line + std::strlen(field), nullptr, 10);
        }
    }
    std::fclose(f);
    return kib;
}

struct Outcome {
    long growth_kib = -1;
    double seconds = 0;
    char what[200] = {};  // "ok", or the exception's message
};

// Runs `load` in a child; returns its peak growth, its time and how it ended.
Outcome measure(const std::function<void()>& load) {
    int fds[2];
    if (::pipe(fds) != 0) {
        return {};
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        Outcome out;
        const int clear = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
        if (clear >= 0 && ::write(clear, "5", 1) == 1) {
            const long before = status_kib("VmRSS:");
            const auto start = std::chrono::steady_clock::now();
            try {
                load();
                std::snprintf(out.what, sizeof out.what, "ok");
            } catch (const std::exception& e) {
                std::snprintf(out.what, sizeof out.what, "%s", e.what());
            }
            out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            out.growth_kib = status_kib("VmHWM:") - before;
        }
        (void)!::write(fds[1], &out, sizeof out);
        ::_exit(0);
    }
    ::close(fds[1]);
    Outcome out;
    if (pid < 0 || ::read(fds[0], &out, sizeof out) != static_cast<ssize_t>(sizeof out)) {
        out.growth_kib = -1;
    }
    ::close(fds[0]);
    int status = 0;
    while (pid > 0 && ::waitpid(pid, &status, 0) < 0) {
    }
    return out;
}

void row(const char* loader, const char* input, std::uint64_t file_bytes, std::uint64_t result_bytes,
         const std::function<void()>& load) {
    const Outcome o = measure(load);
    const auto growth = static_cast<std::uint64_t>(o.growth_kib < 0 ? 0 : o.growth_kib) * 1024;
    std::string what = o.what;
    if (what.size() > 70) {
        what = what.substr(0, 67) + "...";
    }
    std::printf("%-22s %-34s %8.1f %8.1f %9.1f %6.1f  %-5s %s\n", loader, input, static_cast<double>(file_bytes) / mib,
                static_cast<double>(result_bytes) / mib, static_cast<double>(growth) / mib, o.seconds,
                o.growth_kib >= 0 && growth <= file_bytes + result_bytes + slack ? "yes" : "NO", what.c_str());
    std::fflush(stdout);
}

// Writes `total` bytes to `file` from `chunk(i)`, called until it returns "" or the total is reached.
void write_file(const fs::path& file, const std::string& head, const std::function<std::string(std::uint64_t)>& chunk,
                const std::string& tail) {
    std::ofstream out(file, std::ios::binary);
    out << head;
    for (std::uint64_t i = 0;; ++i) {
        const std::string c = chunk(i);
        if (c.empty()) {
            break;
        }
        out << c;
    }
    out << tail;
}

std::string length_prefix(std::uint64_t n) {
    std::string out(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) {
        out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    }
    return out;
}

void json_rows(const fs::path& dir, std::uint64_t size) {
    const fs::path file = dir / "big.json";
    // Valid: F32 values written "123.25, " (8 bytes each): size / 8 values.
    const std::uint64_t n = size / 8;
    const std::string value_chunk = [] {
        std::string c;
        for (int i = 0; i < 8192; ++i) {
            c += "123.25, ";
        }
        return c;
    }();
    const std::uint64_t chunks = n / 8192;
    const std::uint64_t count = chunks * 8192 + 1;  // the chunks' values, then a last "0"
    write_file(
        file, "{\"dtype\": \"F32\", \"shape\": [" + std::to_string(count) + "], \"data\": [",
        [&](std::uint64_t i) { return i < chunks ? value_chunk : std::string(); }, "0]}");
    row("load_json", "valid: F32 values", fs::file_size(file), count * 4, [&] {
        Blob<float> b;
        io::load_json(file, b);
    });
    fs::remove(file);
    const std::string spaces(mib, ' ');
    write_file(
        file, "", [&](std::uint64_t i) { return i < size / mib ? spaces : std::string(); },
        "{\"dtype\": \"U8\", \"shape\": [1], \"data\": [1]}");
    row("load_json", "hostile: whitespace, then a blob", fs::file_size(file), 1, [&] {
        Blob<std::uint8_t> b;
        io::load_json(file, b);
    });
    fs::remove(file);
    const std::string zeros = [] {
        std::string c;
        for (std::uint64_t i = 0; i < mib / 2; ++i) {
            c += "0,";
        }
        return c;
    }();
    write_file(
        file, "{\"dtype\": \"F64\", \"shape\": [100000000000], \"data\": [",
        [&](std::uint64_t i) { return i < size / mib ? zeros : std::string(); }, "0]}");
    row("load_json", "hostile: shape of 800 GB", fs::file_size(file), 0, [&] {
        Blob<double> b;
        io::load_json(file, b);
    });
    fs::remove(file);
}

void npy_rows(const fs::path& dir, std::uint64_t size) {
    const fs::path file = dir / "big.npy";
    const std::uint64_t n = size / 4;
    std::string header =
        syncblob::io::detail::npy_header_bytes(Dtype::F32, std::vector<std::int64_t>{static_cast<std::int64_t>(n)});
    const std::string block(mib, '\0');
    write_file(
        file, header, [&](std::uint64_t i) { return i < size / mib ? block : std::string(); }, "");
    row("load_npy", "valid: F32", fs::file_size(file), n * 4, [&] {
        Blob<float> b;
        io::load_npy(file, b);
    });
    row("load_npy", "valid: F32 into F64 (converting)", fs::file_size(file), n * 8, [&] {
        Blob<double> b;
        io::load_npy(file, b, io::LoadOptions{.convert = true});
    });
    fs::remove(file);
    header = syncblob::io::detail::npy_header_bytes(Dtype::F32, std::vector<std::int64_t>{std::int64_t{1} << 40});
    write_file(
        file, header, [&](std::uint64_t i) { return i < size / mib ? block : std::string(); }, "");
    row("load_npy", "hostile: shape of 4 TB, cut short", fs::file_size(file), 0, [&] {
        Blob<float> b;
        io::load_npy(file, b);
    });
    fs::remove(file);
}

std::string st_entry(std::size_t i, const std::string& name, const char* dtype, std::uint64_t count,
                     std::uint64_t begin, std::uint64_t end) {
    return std::string(i == 0 ? "\"" : ",\"") + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[" +
           std::to_string(count) + "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

void safetensors_rows(const fs::path& dir, std::uint64_t size) {
    const fs::path file = dir / "big.safetensors";
    // Valid: four F32 tensors of a quarter each.
    const std::uint64_t quarter = size / 4 / 4 * 4;
    std::string header = "{";
    for (std::size_t i = 0; i < 4; ++i) {
        header += st_entry(i, "w" + std::to_string(i), "F32", quarter / 4, i * quarter, (i + 1) * quarter);
    }
    header += "}";
    const std::string block(mib, '\0');
    write_file(
        file, length_prefix(header.size()) + header,
        [&](std::uint64_t i) { return i < 4 * quarter / mib ? block : std::string(); },
        std::string(4 * quarter % mib, '\0'));
    row("load_safetensors", "valid: 4 F32 tensors, copy", fs::file_size(file), 4 * quarter,
        [&] { (void)io::load_safetensors<float>(file); });
    row("load_safetensors", "valid: 4 F32 tensors, map", fs::file_size(file), 4 * quarter,
        [&] { (void)io::load_safetensors<float>(file, {}, io::LoadMode::map); });
    fs::remove(file);
    // Hostile: a header just under 100 MB of 1.1 M one-byte tensors, then far more data than they
    // cover: refused (trailing bytes) only after the whole header is read.
    header = "{";
    std::size_t n = 0;
    while (header.size() < 99'900'000) {
        header += st_entry(n, "model.layers.mlp.weight." + std::to_string(n), "U8", 1, n, n + 1);
        ++n;
    }
    header += "}";
    const std::uint64_t blocks = (size - header.size()) / mib;
    write_file(
        file, length_prefix(header.size()) + header,
        [&](std::uint64_t i) { return i < blocks ? block : std::string(); }, "");
    header = std::string();  // the parent holds nothing the children would inherit
    row("load_safetensors", "hostile: 100 MB header, 1.1 M tensors", fs::file_size(file), 0,
        [&] { (void)io::load_safetensors<float>(file); });
    fs::remove(file);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t size = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024) * mib;
    const char* env = std::getenv("SYNCBLOB_BENCH_DIR");
    const fs::path dir = (env != nullptr ? fs::path(env) : fs::temp_directory_path()) /
                         ("syncblob-peak-memory-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::printf(
        "peak resident memory of one load over the process's size before it (MiB); bound: file + result + "
        "16 MiB\n");
    std::printf("%-22s %-34s %8s %8s %9s %6s  %-5s %s\n", "loader", "input", "file", "result", "peak", "s", "bound",
                "outcome");
    row("(nothing)", "a child that loads nothing", 0, 0, [] {});
    json_rows(dir, size);
    npy_rows(dir, size);
    safetensors_rows(dir, size);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
