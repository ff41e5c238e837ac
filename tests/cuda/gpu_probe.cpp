// SPDX-License-Identifier: BSD-2-Clause
// The first program scripts/gpu-check runs on a machine: which CUDA devices it has, or why none is
// usable, as one line of JSON on standard output. Host code (any C++ compiler), linked like the test
// programs, so it finds the CUDA runtime the way they do.
//
// Exit status: 0 when at least one device is usable, 3 when none is (no driver, a driver older than
// the runtime, no GPU), 1 when a query fails on a device that is there.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include <syncblob/cuda/runtime.hpp>

namespace {

std::string quoted(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out + "\"";
}

}  // namespace

int main() {
    int runtime = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    if (const auto reason = syncblob::cuda::no_device_reason()) {
        std::cout << "{\"device\": false, \"runtime\": " << runtime << ", \"reason\": " << quoted(*reason) << "}\n";
        return 3;
    }
    try {
        int driver = 0;
        SYNCBLOB_CUDA_CHECK(cudaDriverGetVersion(&driver));
        const int count = syncblob::cuda::device_count();
        std::cout << "{\"device\": true, \"runtime\": " << runtime << ", \"driver\": " << driver
                  << ", \"count\": " << count << ", \"devices\": [";
        for (int d = 0; d < count; ++d) {
            cudaDeviceProp p{};
            SYNCBLOB_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
            std::size_t free = 0;
            std::size_t total = 0;
            syncblob::cuda::set_device(d);
            SYNCBLOB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
            int pools = 0;
            SYNCBLOB_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, d));
            std::cout << (d == 0 ? "" : ", ") << "{\"name\": " << quoted(p.name) << ", \"compute_capability\": \""
                      << p.major << '.' << p.minor << "\", \"total_bytes\": " << total << ", \"free_bytes\": " << free
                      << ", \"multiprocessors\": " << p.multiProcessorCount
                      << ", \"memory_pools\": " << (pools != 0 ? "true" : "false") << "}";
        }
        std::cout << "]}\n";
        return 0;
    } catch (const std::exception& e) {
        std::cout << "{\"device\": true, \"runtime\": " << runtime << ", \"error\": " << quoted(e.what()) << "}\n";
        return 1;
    }
}
