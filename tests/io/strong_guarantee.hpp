// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The strong guarantee of a load, checked the same way for every format: a blob on a host allocator
// that fails on demand, a snapshot of everything a user can observe of it (shape, data, diff, heads)
// and a loop that fails each host allocation of a load in turn until the load succeeds.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <syncblob/syncblob.hpp>
#include <vector>

#include "../memory/counting_allocator.hpp"

namespace test {

/// Host memory from a counting allocator that can fail the k-th allocation; no device.
struct FailingHost {
    using host_allocator = syncblob_test::CountingHost<syncblob::AlignedAllocator>;
    using device_backend = syncblob::NoDevice;
};

/// What a user can observe of a blob, read without changing it (an uninitialized side is not read).
template <class T, class A>
struct BlobSnapshot {
    explicit BlobSnapshot(const syncblob::Blob<T, A>& b)
        : has_shape(b.has_shape()), shape(b.shape()), data_head(b.data_head()), diff_head(b.diff_head()) {
        if (data_head != syncblob::Head::uninitialized) {
            const auto v = b.host_data();
            data.assign(v.begin(), v.end());
        }
        if (diff_head != syncblob::Head::uninitialized) {
            const auto v = b.host_diff();
            diff.assign(v.begin(), v.end());
        }
    }

    /// "" when `b` matches the snapshot, else what differs.
    [[nodiscard]] std::string differences(const syncblob::Blob<T, A>& b) const {
        const BlobSnapshot now(b);
        std::string out;
        if (now.has_shape != has_shape || !(now.shape == shape)) {
            out += "shape " + shape.to_string() + " became " + now.shape.to_string() + "; ";
        }
        if (now.data_head != data_head) {
            out += std::string("data head ") + std::string(syncblob::head_name(data_head)) + " became " +
                   std::string(syncblob::head_name(now.data_head)) + "; ";
        }
        if (now.diff_head != diff_head) {
            out += std::string("diff head ") + std::string(syncblob::head_name(diff_head)) + " became " +
                   std::string(syncblob::head_name(now.diff_head)) + "; ";
        }
        if (now.data != data) {
            out += "data values changed; ";
        }
        if (now.diff != diff) {
            out += "diff values changed; ";
        }
        return out;
    }

    bool has_shape;
    syncblob::Shape shape;
    syncblob::Head data_head;
    syncblob::Head diff_head;
    std::vector<T> data;
    std::vector<T> diff;
};

/// A FailingHost blob of shape {2} holding data {1, 2} and diff {3, 4}.
template <class T>
syncblob::Blob<T, FailingHost> target_with_values() {
    syncblob::Blob<T, FailingHost> b({2});
    const auto d = b.mutable_host_data();
    d[0] = T(1);
    d[1] = T(2);
    const auto g = b.mutable_host_diff();
    g[0] = T(3);
    g[1] = T(4);
    return b;
}

/// Fails the 1st, 2nd, ... host allocation of `load(blob)` in turn until it succeeds; after each
/// failure `blob` must equal its snapshot. Returns the failures seen ("" when all held) and sets
/// `failures` to how many allocations were failed.
template <class T, class Load>
std::string fail_each_allocation(syncblob::Blob<T, FailingHost>& blob, Load&& load, int& failures) {
    using Host = FailingHost::host_allocator;
    std::string report;
    failures = 0;
    for (std::uint64_t k = 1; k < 64; ++k) {
        const BlobSnapshot<T, FailingHost> before(blob);
        const std::uint64_t live = Host::live();
        bool failed = false;
        {
            const syncblob_test::FailHostAllocation<Host> fail(k);
            try {
                load(blob);
            } catch (const std::bad_alloc&) {
                failed = true;
            }
        }
        if (!failed) {
            return report;
        }
        ++failures;
        const std::string diff = before.differences(blob);
        if (!diff.empty()) {
            report += "allocation " + std::to_string(k) + " failed: " + diff + "\n";
        }
        if (Host::live() != live) {
            report += "allocation " + std::to_string(k) + " failed: live host blocks went from " +
                      std::to_string(live) + " to " + std::to_string(Host::live()) + "\n";
        }
    }
    return report + "the load never succeeded\n";
}

}  // namespace test
