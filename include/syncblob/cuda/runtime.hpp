// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// RAII streams and events, and device queries, over the checked CUDA runtime. Host code.

#include <cuda_runtime_api.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/sync_audit.hpp"
#include "error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {

/// Why no CUDA device can be used here — the driver's own message ("CUDA driver version is
/// insufficient for CUDA runtime version") or "cudaGetDeviceCount found no device" — or nothing
/// when at least one device is usable. Never throws.
[[nodiscard]] inline std::optional<std::string> no_device_reason() {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        return std::string(cudaGetErrorString(status));
    }
    if (count == 0) {
        return std::string("cudaGetDeviceCount found no device");
    }
    return std::nullopt;
}

/// Number of CUDA devices. \throws NoDeviceError when there is no usable driver.
[[nodiscard]] inline int device_count() {
    int count = 0;
    SYNCBLOB_CUDA_CHECK(cudaGetDeviceCount(&count), "cuda::device_count");
    return count;
}

/// The calling thread's current device. \throws NoDeviceError when there is no usable driver.
[[nodiscard]] inline int current_device() {
    int device = 0;
    SYNCBLOB_CUDA_CHECK(cudaGetDevice(&device), "cuda::current_device");
    return device;
}

/// Makes `device` current for the calling thread.
/// \throws DeviceError when `device` is out of range, NoDeviceError when there is no usable driver.
inline void set_device(int device) {
    const int count = device_count();
    if (device < 0 || device >= count) {
        throw DeviceError("cuda::set_device: device " + std::to_string(device) + " out of range [0, " +
                          std::to_string(count) + ")");
    }
    SYNCBLOB_CUDA_CHECK(cudaSetDevice(device), "cuda::set_device(" + std::to_string(device) + ")");
}

/// Blocks until the current device has finished all its work.
inline void synchronize() {
    audit::note(audit::Wait::device_synchronize);
    SYNCBLOB_CUDA_CHECK(cudaDeviceSynchronize(), "cuda::synchronize");
}

/// An owned CUDA stream, destroyed with the object. Converts to `cudaStream_t`, the stream type of
/// `cuda::Device` (so a `Blob` or `SyncedBuffer` takes it directly).
class Stream {
public:
    /// A new stream on the current device; by default it does not synchronise with the legacy
    /// default stream. \throws NoDeviceError when there is no usable driver.
    explicit Stream(unsigned int flags = cudaStreamNonBlocking) {
        SYNCBLOB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, flags), "cuda::Stream");
    }
    Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
    Stream& operator=(Stream&& other) noexcept {
        if (this != &other) {
            reset();
            stream_ = std::exchange(other.stream_, nullptr);
        }
        return *this;
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() { reset(); }

    [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }
    operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(google-explicit-constructor)

    /// Blocks until every operation issued on the stream has finished.
    void synchronize() const {
        audit::note(audit::Wait::stream_synchronize);
        SYNCBLOB_CUDA_CHECK(cudaStreamSynchronize(stream_), "cuda::Stream::synchronize");
    }

private:
    void reset() noexcept {
        if (stream_ != nullptr) {
            (void)cudaStreamDestroy(stream_);  // nothing to report from a destructor
            stream_ = nullptr;
        }
    }

    cudaStream_t stream_ = nullptr;
};

namespace detail {

/// The events a thread has released, per device, for its next records: an event is created once
/// and recorded again and again, instead of `cudaEventCreate` per record. Destroyed with the thread.
class EventCache {
public:
    EventCache() = default;
    EventCache(const EventCache&) = delete;
    EventCache& operator=(const EventCache&) = delete;
    ~EventCache() {
        gone() = true;
        for (auto& [device, events] : free_) {
            for (cudaEvent_t e : events) {
                (void)cudaEventDestroy(e);
            }
        }
    }

    /// The calling thread's cache, or null once it is destroyed (an event released later in the
    /// thread's exit, or by a static object, is then destroyed at once).
    static EventCache* of_thread() noexcept {
        if (gone()) {
            return nullptr;
        }
        thread_local EventCache cache;
        return &cache;
    }

    /// An event of `device` (the current one), from the cache or new.
    [[nodiscard]] cudaEvent_t take(int device) {
        auto& events = free_[device];
        if (!events.empty()) {
            cudaEvent_t e = events.back();
            events.pop_back();
            return e;
        }
        cudaEvent_t e = nullptr;
        SYNCBLOB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cuda::Event::record");
        return e;
    }

    /// Keeps `e` (of `device`) for a later record; destroys it when it cannot be kept.
    void give(int device, cudaEvent_t e) noexcept {
        try {
            auto& events = free_[device];
            if (events.size() < max_cached) {
                events.push_back(e);
                return;
            }
        } catch (...) {  // no room to keep it
        }
        (void)cudaEventDestroy(e);
    }

private:
    // Trivially destructible, so it stays readable while the thread's other objects are destroyed.
    static bool& gone() noexcept {
        thread_local bool flag = false;
        return flag;
    }

    static constexpr std::size_t max_cached = 64;
    std::map<int, std::vector<cudaEvent_t>> free_;
};

}  // namespace detail

/// An owned CUDA event marking a point in a stream; an empty event (default-constructed or
/// moved from) counts as already reached. The event type of `cuda::Device`. Events come from a
/// per-thread cache (an event destroyed goes back to it), so a steady loop creates none.
class Event {
public:
    Event() noexcept = default;
    Event(Event&& other) noexcept
        : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}
    Event& operator=(Event&& other) noexcept {
        if (this != &other) {
            reset();
            event_ = std::exchange(other.event_, nullptr);
            device_ = std::exchange(other.device_, -1);
        }
        return *this;
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() { reset(); }

    /// An event recorded now on `stream` (timing disabled: it only orders work). `stream` must
    /// belong to the current device (as `cudaEventRecord` requires).
    [[nodiscard]] static Event record(cudaStream_t stream) {
        Event e;
        SYNCBLOB_CUDA_CHECK(cudaGetDevice(&e.device_), "cuda::Event::record");
        detail::EventCache* cache = detail::EventCache::of_thread();
        if (cache != nullptr) {
            e.event_ = cache->take(e.device_);
        } else {
            SYNCBLOB_CUDA_CHECK(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming), "cuda::Event::record");
        }
        SYNCBLOB_CUDA_CHECK(cudaEventRecord(e.event_, stream), "cuda::Event::record");
        return e;
    }

    [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
    [[nodiscard]] bool empty() const noexcept { return event_ == nullptr; }

    /// Blocks the host until the event is reached.
    void synchronize() const {
        if (event_ != nullptr) {
            audit::note(audit::Wait::event_synchronize);
            SYNCBLOB_CUDA_CHECK(cudaEventSynchronize(event_), "cuda::Event::synchronize");
        }
    }

    /// True when the event is reached (`cudaEventQuery`); never blocks. An empty event is reached.
    [[nodiscard]] bool query() const {
        if (event_ == nullptr) {
            return true;
        }
        const cudaError_t status = cudaEventQuery(event_);
        if (status == cudaErrorNotReady) {
            (void)cudaGetLastError();  // not an error: clear it
            return false;
        }
        SYNCBLOB_CUDA_CHECK(status, "cuda::Event::query");
        return true;
    }

    /// Makes `stream` wait for the event without blocking the host.
    void make_wait(cudaStream_t stream) const {
        if (event_ != nullptr) {
            SYNCBLOB_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0), "cuda::Event::make_wait");
        }
    }

private:
    void reset() noexcept {
        if (event_ != nullptr) {
            if (detail::EventCache* cache = detail::EventCache::of_thread()) {
                cache->give(device_, event_);
            } else {
                (void)cudaEventDestroy(event_);
            }
            event_ = nullptr;
        }
    }

    cudaEvent_t event_ = nullptr;
    int device_ = -1;
};

}  // namespace cuda

SYNCBLOB_END_NAMESPACE
