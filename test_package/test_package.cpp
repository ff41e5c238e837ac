// Conan test package: a blob round trip through the simulated device, and one use of each optional
// component the package was made with (SYNCBLOB_TEST_<COMPONENT>, set by CMakeLists.txt).
#include <iostream>
#include <syncblob/syncblob.hpp>
#ifdef SYNCBLOB_TEST_EIGEN
#include <syncblob/math.hpp>
#endif
#ifdef SYNCBLOB_TEST_JSON
#include <syncblob/io/json.hpp>
#endif
#ifdef SYNCBLOB_TEST_CUDA
#include <syncblob/cuda/allocator.hpp>
#endif
#ifdef SYNCBLOB_TEST_MPI
#include <syncblob/comm/mpi.hpp>
#endif
#ifdef SYNCBLOB_TEST_NCCL
#include <syncblob/comm/nccl.hpp>
#endif

int main() {
    syncblob::Blob<float, syncblob::Simulated> blob{4};
    blob.fill(1.0f);
    (void)blob.device_data();
    std::cout << "syncblob " << blob.shape_string() << ", H->D copies: " << blob.data_stats().host_to_device << '\n';
    bool ok = blob.data_stats().host_to_device == 1;
#ifdef SYNCBLOB_TEST_EIGEN
    const float asum = syncblob::asum_data(blob);
    std::cout << "eigen: asum_data " << asum << '\n';
    ok = ok && asum == 4.0f;
#endif
#ifdef SYNCBLOB_TEST_JSON
    const auto json = syncblob::io::to_json(blob);
    std::cout << "json: shape " << json.at("shape").dump() << '\n';
    ok = ok && json.at("shape").size() == 1;
#endif
#ifdef SYNCBLOB_TEST_CUDA
    // Compiled only: no GPU is touched, so the test runs on machines without one.
    std::cout << "cuda: a Blob on cuda::Allocator compiles\n";
    (void)sizeof(syncblob::Blob<float, syncblob::cuda::Allocator>);
#endif
    return ok ? 0 : 1;
}
