// A consumer of syncblob::eigen and syncblob::json: the math and the JSON writer, whose Eigen and
// nlohmann_json come with the targets.
#include <iostream>
#include <syncblob/io/json.hpp>
#include <syncblob/math.hpp>
#include <syncblob/syncblob.hpp>

int main() {
    syncblob::Blob<float> blob{2, 2};
    blob.fill(-1.5f);
    const float asum = syncblob::asum_data(blob);
    const nlohmann::json json = syncblob::io::to_json(blob);
    std::cout << "asum " << asum << ", json shape " << json.at("shape").dump() << '\n';
    return asum == 6.0f && json.at("shape") == nlohmann::json::array({2, 2}) ? 0 : 1;
}
