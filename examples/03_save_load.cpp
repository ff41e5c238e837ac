// Saving and loading blobs: NumPy's .npy for one array, safetensors for a set of named blobs with
// metadata, loaded by copying or by memory-mapping the file without a copy.
// needs: json
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <syncblob/io/npy.hpp>
#include <syncblob/io/safetensors.hpp>
#include <syncblob/syncblob.hpp>

using namespace syncblob;

int main() {
    // [npy]
    // One blob to a .npy file (np.load("mean.npy") reads it) and back.
    Blob<float> mean{2, 3};
    auto m = mean.mutable_host_data();
    for (std::size_t i = 0; i < m.size(); ++i) {
        m[i] = 0.5f * static_cast<float>(i);
    }
    io::save_npy("mean.npy", mean);
    const auto loaded = io::load_npy<float>("mean.npy");
    std::cout << "npy: " << loaded << '\n';
    // [npy]

    // [safetensors]
    // Named blobs with their diffs and string metadata to one safetensors file.
    Blob<float> weight{4, 2};
    weight.fill(0.25f);
    weight.fill_diff(-1.0f);
    Blob<std::int64_t> steps{Shape{}};
    steps.fill(1000);
    io::SafetensorsWriter writer;
    writer.add("fc.weight", weight, /*with_diff=*/true);
    writer.add("steps", steps);
    writer.metadata()["format"] = "syncblob";
    writer.save("model.safetensors");
    // [safetensors]

    // [mapped]
    // Memory-mapped: the blob borrows the file's pages; nothing is allocated or copied.
    const auto file = io::SafetensorsFile::open("model.safetensors", {}, io::LoadMode::map);
    for (const auto& t : file.tensors()) {
        std::cout << "tensor " << t.name << ": " << dtype_name(t.dtype) << " " << t.shape << '\n';
    }
    std::cout << "metadata format = " << file.metadata().at("format") << '\n';
    Blob<float> fc;
    file.load("fc.weight", fc);  // data, and the diff from "fc.weight.__diff__"
    std::cout << "mapped: " << fc << ", diff[0] = " << fc.host_diff()[0]
              << ", host allocations = " << fc.data_stats().host_allocations << '\n';
    fc.mutable_host_data()[0] = 2.0f;  // the first write copies: the file is never written
    std::cout << "after a write: host allocations = " << fc.data_stats().host_allocations
              << ", copies = " << fc.data_stats().host_to_host << '\n';
    // [mapped]

    // [convert]
    // Another element type needs an explicit conversion.
    Blob<double> wide;
    try {
        file.load("fc.weight", wide);
    } catch (const FormatError& e) {
        std::cout << "error: " << e.what() << '\n';
    }
    io::SafetensorsFile::open("model.safetensors", io::LoadOptions{.convert = true}).load("fc.weight", wide);
    std::cout << "converted: " << wide << '\n';
    // [convert]

    std::filesystem::remove("mean.npy");
    std::filesystem::remove("model.safetensors");
}
