// A consumer of syncblob::syncblob: prints a blob's shape and the copies one round trip makes.
#include <iostream>
#include <syncblob/syncblob.hpp>

int main() {
    syncblob::Blob<float, syncblob::Simulated> blob{2, 3};
    blob.mutable_host_data()[0] = 1.5f;
    (void)blob.device_data();
    const auto stats = blob.data_stats();
    std::cout << blob.shape_string() << " H->D " << stats.host_to_device << '\n';
    return stats.host_to_device == 1 ? 0 : 1;
}
