// The parent's own header: a function over syncblob's Blob.
#pragma once
#include <cstddef>
#include <syncblob/syncblob.hpp>

namespace parent {
/// The host -> device copies that reading `blob` on the simulated device makes.
inline std::size_t upload(syncblob::Blob<float, syncblob::Simulated>& blob) {
    blob.fill(1.0f);
    (void)blob.device_data();
    return static_cast<std::size_t>(blob.data_stats().host_to_device);
}
}  // namespace parent
