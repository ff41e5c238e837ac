// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// What every fuzzer shares: the limit readers get, and a check that aborts (a finding) when a
// property of a successful read does not hold.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include <syncblob/blob.hpp>
#include <syncblob/io/file.hpp>

namespace fuzz {

/// Readers may allocate at most this much per input: a hostile size field must be refused, never
/// turned into a huge allocation (libFuzzer's -rss_limit_mb would report that as a finding).
inline constexpr std::uint64_t max_bytes = std::uint64_t{64} << 20;

inline syncblob::io::LoadOptions options(bool convert, bool reshape = true) {
    syncblob::io::LoadOptions o;
    o.max_bytes = max_bytes;
    o.convert = convert;
    o.reshape = reshape;
    return o;
}

/// Aborts with a message when `ok` is false.
inline void require(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz property violated: %s\n", what);
        std::abort();
    }
}

/// Bitwise equality of two spans of elements.
template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

/// A blob of shape {2} whose data is {a, a} and diff {b, b}: the target of a load that may fail.
template <class T>
syncblob::Blob<T> target(T a, T b) {
    syncblob::Blob<T> blob{2};
    blob.fill(a);
    blob.fill_diff(b);
    return blob;
}

/// Everything a user can observe of a blob (shape, heads, data and diff bits), to check that a
/// rejected input left its target exactly as it was (the strong guarantee).
template <class T>
class Snapshot {
public:
    explicit Snapshot(const syncblob::Blob<T>& b)
        : has_shape_(b.has_shape()), shape_(b.shape()), data_head_(b.data_head()), diff_head_(b.diff_head()) {
        if (data_head_ != syncblob::Head::uninitialized) {
            data_ = bytes_of(b.host_data());
        }
        if (diff_head_ != syncblob::Head::uninitialized) {
            diff_ = bytes_of(b.host_diff());
        }
    }

    /// Aborts (a finding) unless `b` is as it was.
    void require_unchanged(const syncblob::Blob<T>& b) const {
        require(b.has_shape() == has_shape_ && b.shape() == shape_, "failed load keeps the shape");
        require(b.data_head() == data_head_ && b.diff_head() == diff_head_, "failed load keeps the heads");
        const Snapshot now(b);
        require(now.data_ == data_, "failed load keeps the data");
        require(now.diff_ == diff_, "failed load keeps the diff");
    }

private:
    static std::vector<unsigned char> bytes_of(std::span<const T> values) {
        const auto* p = reinterpret_cast<const unsigned char*>(values.data());
        return {p, p + values.size_bytes()};
    }

    bool has_shape_;
    syncblob::Shape shape_;
    syncblob::Head data_head_;
    syncblob::Head diff_head_;
    std::vector<unsigned char> data_;
    std::vector<unsigned char> diff_;
};

}  // namespace fuzz
