// A consumer of syncblob::eigen: the component's include paths and Eigen come with the target.
#include <Eigen/Core>
#include <iostream>
#include <syncblob/syncblob.hpp>

int main() {
    syncblob::Blob<double> blob{3};
    blob.fill(2.0);
    const auto data = blob.host_data();
    const Eigen::Map<const Eigen::VectorXd> view(data.data(), static_cast<Eigen::Index>(data.size()));
    std::cout << view.sum() << '\n';
    return view.sum() == 6.0 ? 0 : 1;
}
