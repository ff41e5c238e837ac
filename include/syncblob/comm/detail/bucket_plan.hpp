// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The bookkeeping of a bucketed all-reduce, whatever the engine: which blobs are ready, and which
/// buckets may start (in bucket order, each once all its blobs are ready).

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "../../arena/arena_buffer.hpp"
#include "../../core/error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace comm::detail {

class BucketPlan {
public:
    BucketPlan() = default;
    BucketPlan(std::vector<Bucket> buckets, std::size_t blobs)
        : buckets_(std::move(buckets)), missing_(buckets_.size()), bucket_of_(blobs), ready_(blobs, false) {
        for (std::size_t b = 0; b < buckets_.size(); ++b) {
            missing_[b] = buckets_[b].end - buckets_[b].first;
            for (std::size_t i = buckets_[b].first; i < buckets_[b].end; ++i) {
                bucket_of_[i] = b;
            }
        }
    }

    [[nodiscard]] const std::vector<Bucket>& buckets() const noexcept { return buckets_; }
    /// Buckets started so far (always a prefix of buckets()).
    [[nodiscard]] std::size_t started() const noexcept { return started_; }

    /// Marks blob `i` ready. \throws IndexError when out of range (`op` names the caller).
    void ready(std::size_t i, std::string_view op) {
        if (i >= ready_.size()) {
            throw IndexError(std::string(op) + ": blob " + std::to_string(i) + " out of range [0, " +
                             std::to_string(ready_.size()) + ")");
        }
        if (!ready_[i]) {
            ready_[i] = true;
            --missing_[bucket_of_[i]];
        }
    }
    void all_ready() {
        for (std::size_t i = 0; i < ready_.size(); ++i) {
            ready(i, {});
        }
    }

    /// No blob ready, no bucket started: the plan of the next step.
    void reset() {
        for (std::size_t b = 0; b < buckets_.size(); ++b) {
            missing_[b] = buckets_[b].end - buckets_[b].first;
        }
        std::fill(ready_.begin(), ready_.end(), false);
        started_ = 0;
    }

    /// Calls `start(bucket_index)` for each bucket, in order, that may start now.
    template <class Start>
    void start_ready(Start start) {
        while (started_ < buckets_.size() && missing_[started_] == 0) {
            start(started_);
            ++started_;
        }
    }

private:
    std::vector<Bucket> buckets_;
    std::vector<std::size_t> missing_;    // per bucket: blobs not ready yet
    std::vector<std::size_t> bucket_of_;  // per blob
    std::vector<bool> ready_;
    std::size_t started_ = 0;
};

}  // namespace comm::detail

SYNCBLOB_END_NAMESPACE
