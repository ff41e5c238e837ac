// A consumer that got syncblob through FetchContent.
#include <iostream>
#include <syncblob/syncblob.hpp>

int main() {
    syncblob::Blob<double> blob{2, 3, 4};
    blob.fill(0.5);
    std::cout << "fetched: " << blob.shape_string() << ", " << blob.host_data()[23] << '\n';
    return blob.count() == 24 && blob.host_data()[23] == 0.5 ? 0 : 1;
}
