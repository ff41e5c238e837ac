// Conan test package: a blob round trip through the simulated device.
#include <iostream>
#include <syncblob/syncblob.hpp>

int main() {
    syncblob::Blob<float, syncblob::Simulated> blob{4};
    blob.fill(1.0f);
    (void)blob.device_data();
    std::cout << "syncblob " << blob.shape_string() << ", H->D copies: " << blob.data_stats().host_to_device << '\n';
    return blob.data_stats().host_to_device == 1 ? 0 : 1;
}
