// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What the checkpoint benchmarks share (bench_checkpoint.cpp on the host, bench_gpu.cu on a GPU): a
// sharded checkpoint shaped like a transformer's, written by the benchmark itself and read once so
// that the page cache holds it, and the limit a load is measured against, a parallel pread of every
// shard's data section into memory already touched.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <syncblob/checkpoint.hpp>
#include <syncblob/core/thread_pool.hpp>

namespace syncblob_bench {

/// The tensors of a transformer of `layers` layers of width `d`, in the order they are added: an
/// embedding (8192 × d), then per layer two norms, an attention and an MLP with their biases (12
/// tensors a layer), then a final norm. About 12·d²·layers elements.
inline std::vector<std::pair<std::string, syncblob::Shape>> transformer_layout(std::int64_t d, int layers) {
    using syncblob::Shape;
    std::vector<std::pair<std::string, Shape>> t{{"embed", Shape{8192, d}}};
    for (int l = 0; l < layers; ++l) {
        const std::string p = "layer" + std::to_string(l) + ".";
        for (const auto& [name, shape] :
             std::vector<std::pair<std::string, Shape>>{{"ln1.weight", Shape{d}},
                                                        {"ln1.bias", Shape{d}},
                                                        {"attn.qkv.weight", Shape{3 * d, d}},
                                                        {"attn.qkv.bias", Shape{3 * d}},
                                                        {"attn.out.weight", Shape{d, d}},
                                                        {"attn.out.bias", Shape{d}},
                                                        {"ln2.weight", Shape{d}},
                                                        {"ln2.bias", Shape{d}},
                                                        {"mlp.up.weight", Shape{4 * d, d}},
                                                        {"mlp.up.bias", Shape{4 * d}},
                                                        {"mlp.down.weight", Shape{d, 4 * d}},
                                                        {"mlp.down.bias", Shape{d}}}) {
            t.emplace_back(p + name, shape);
        }
    }
    t.emplace_back("final_norm", Shape{d});
    return t;
}

/// Reads every shard of `c` once, so that the page cache holds it.
inline void read_into_page_cache(const syncblob::checkpoint::Checkpoint& c) {
    std::vector<char> sink(std::size_t{8} << 20);
    for (const auto& s : c.shards()) {
        const int fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
        while (fd >= 0 && ::read(fd, sink.data(), sink.size()) > 0) {
        }
        ::close(fd);
    }
}

/// Writes the tensors of `layout` as a checkpoint of element type T into `dir` (shards of at most
/// `max_shard` bytes; values (i + k) % 1000 / 4 for element i of tensor k), opens it and reads it
/// once. The blobs are written one at a time, so the host holds one tensor more than the files.
template <class T>
syncblob::checkpoint::Checkpoint write_checkpoint(const std::filesystem::path& dir,
                                                  const std::vector<std::pair<std::string, syncblob::Shape>>& layout,
                                                  std::uint64_t max_shard) {
    {
        std::vector<syncblob::Blob<T>> blobs;
        syncblob::checkpoint::Writer w;
        blobs.reserve(layout.size());
        for (const auto& [name, shape] : layout) {
            auto& b = blobs.emplace_back(shape);
            auto v = b.mutable_host_data();
            for (std::size_t i = 0; i < v.size(); ++i) {
                v[i] = static_cast<T>(static_cast<float>((i + blobs.size()) % 1000) * 0.25f);
            }
            w.add(name, b);
        }
        syncblob::checkpoint::SaveOptions options;
        options.max_shard_bytes = max_shard;
        (void)w.save(dir, options);
    }
    auto c = syncblob::checkpoint::Checkpoint::open(dir);
    read_into_page_cache(c);
    return c;
}

/// Byte range [begin, end) of a shard's data section.
struct Section {
    std::string path;
    std::uint64_t begin = ~std::uint64_t{0};
    std::uint64_t end = 0;
};

inline std::vector<Section> sections(const syncblob::checkpoint::Checkpoint& c) {
    std::vector<Section> out(c.shards().size());
    for (std::size_t s = 0; s < out.size(); ++s) {
        out[s].path = c.shards()[s].path.string();
    }
    for (const auto& t : c.tensors()) {
        out[t.shard].begin = std::min(out[t.shard].begin, t.offset);
        out[t.shard].end = std::max(out[t.shard].end, t.offset + t.bytes);
    }
    return out;
}

/// The limit: every shard's data section read with pread into touched memory, in pieces of `chunk`
/// bytes claimed in order by `threads` threads (syncblob's pool, as the loader's readers).
class ParallelPread {
public:
    ParallelPread(const syncblob::checkpoint::Checkpoint& c, std::size_t chunk) {
        std::uint64_t at = 0;
        for (const auto& s : sections(c)) {
            const int fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
            fds_.push_back(fd);
            for (std::uint64_t o = s.begin; o < s.end; o += chunk) {
                const std::uint64_t n = std::min<std::uint64_t>(chunk, s.end - o);
                pieces_.push_back({fd, o, at, static_cast<std::size_t>(n)});
                at += n;
            }
        }
        buffer_.reset(new char[at]);
        std::memset(buffer_.get(), 1, at);  // touched: no page faults in the timed reads
        bytes_ = at;
    }
    ParallelPread(const ParallelPread&) = delete;
    ParallelPread& operator=(const ParallelPread&) = delete;
    ~ParallelPread() {
        for (const int fd : fds_) {
            ::close(fd);
        }
    }

    /// Reads into its own buffer, or into `into` (at least bytes() of touched memory); false when a
    /// read came short.
    bool operator()(unsigned threads, char* into = nullptr) {
        char* base = into != nullptr ? into : buffer_.get();
        std::atomic<std::size_t> next{0};
        std::atomic<bool> ok{true};
        syncblob::parallel::run(threads, [&](unsigned) {
            for (std::size_t i; (i = next.fetch_add(1)) < pieces_.size();) {
                const Piece& p = pieces_[i];
                if (::pread(p.fd, base + p.at, p.bytes, static_cast<off_t>(p.offset)) !=
                    static_cast<ssize_t>(p.bytes)) {
                    ok = false;
                }
            }
        });
        return ok;
    }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
    /// The limit's own buffer (bytes() of touched memory).
    [[nodiscard]] char* buffer() const noexcept { return buffer_.get(); }

private:
    struct Piece {
        int fd;
        std::uint64_t offset;
        std::uint64_t at;
        std::size_t bytes;
    };
    std::vector<int> fds_;
    std::vector<Piece> pieces_;
    std::unique_ptr<char[]> buffer_;
    std::uint64_t bytes_ = 0;
};

/// Seconds `f()` takes on the steady clock.
template <class F>
double timed(const F& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The median of `v` (0 for none); sorts it.
inline double median(std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace syncblob_bench
