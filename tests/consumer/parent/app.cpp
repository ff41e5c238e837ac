// The parent's program, built with syncblob as a subproject.
#include <iostream>
#include <parent.hpp>

int main() {
    syncblob::Blob<float, syncblob::Simulated> blob{3};
    const auto copies = parent::upload(blob);
    std::cout << "parent: " << blob.shape_string() << ", H->D " << copies << '\n';
    return copies == 1 ? 0 : 1;
}
