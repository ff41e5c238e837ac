// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 10: sharded checkpoints. A small transformer's weights saved as a sharded safetensors
// checkpoint (an index and shards, as Hugging Face lays them out), then streamed into one
// ParameterArena on the device: read in large chunks on several threads into pinned staging blocks,
// one host-to-device copy per chunk, issued while the next chunk is read. Every tensor is checked,
// the copies are compared with loading tensor by tensor, and a BF16 copy of the checkpoint is
// loaded into the same float arena, converted on the device.
//
// The device is SimulatedDevice (copies run late, as on a GPU), so this runs on any machine. The
// throughput goes to the standard error: it depends on the machine, the rest of the output does not.
// needs: json
#include <filesystem>
#include <iostream>
#include <string>
#include <syncblob/checkpoint.hpp>
#include <syncblob/io/safetensors.hpp>
#include <vector>

namespace sb = syncblob;
namespace fs = std::filesystem;
using Device = sb::SimulatedDevice;

namespace {

// The value of element i of the k-th tensor.
float value(std::size_t k, std::size_t i) {
    return static_cast<float>((k * 7 + i) % 251) * 0.125f;
}

// A transformer's tensors: an embedding, then per layer a norm, an attention matrix, its bias and an
// MLP matrix; the sizes vary from 16 bytes to 64 KiB, as a real model's do.
std::vector<sb::Blob<float>> model(std::vector<std::string>& names) {
    std::vector<sb::Blob<float>> blobs;
    const auto add = [&](const std::string& name, const sb::Shape& shape) {
        auto& b = blobs.emplace_back(shape);
        auto v = b.mutable_host_data();
        for (std::size_t i = 0; i < v.size(); ++i) {
            v[i] = value(blobs.size() - 1, i);
        }
        names.push_back(name);
    };
    add("embed", {512, 32});
    for (int l = 0; l < 12; ++l) {
        const std::string p = "layer" + std::to_string(l) + ".";
        add(p + "norm", {32});
        add(p + "attn", {96, 32});
        add(p + "attn_bias", {4});
        add(p + "mlp", {128, 32});
    }
    return blobs;
}

}  // namespace

int main() {
    const fs::path dir = fs::temp_directory_path() / "syncblob-tutorial-10";
    fs::remove_all(dir);
    std::vector<std::string> names;
    const auto blobs = model(names);

    // [save]
    // Shards of at most 64 KiB (transformers' default is 5 GB), the index written last.
    sb::checkpoint::Writer writer;
    for (std::size_t k = 0; k < blobs.size(); ++k) {
        writer.add(names[k], blobs[k]);
    }
    sb::checkpoint::SaveOptions save;
    save.max_shard_bytes = 64 << 10;
    const fs::path index = writer.save(dir, save);
    const auto ckpt = sb::checkpoint::Checkpoint::open(index);  // the index and every shard header checked
    std::cout << index.filename().string() << ": " << ckpt.tensors().size() << " tensors, " << ckpt.total_size()
              << " bytes in " << ckpt.shards().size() << " shards\n";
    // [save]

    const Device::Scope scope{Device::Settings{}};

    // [load]
    // One arena for every tensor (one allocation per side), then the load: chunks of 128 KiB read on
    // 2 threads, each copied to the device as soon as it is read.
    sb::checkpoint::CheckpointArena<float, sb::Simulated> weights(ckpt);
    sb::checkpoint::LoadOptions options;
    options.chunk_bytes = 128 << 10;
    options.threads = 2;
    std::uint64_t calls = 0;
    std::uint64_t last = 0;
    options.progress = [&](std::uint64_t done, std::uint64_t total) {  // for a progress bar
        ++calls;
        last = done * 100 / total;
    };
    const auto report = weights.load(ckpt, options);
    std::cout << "loaded " << report.tensors << " tensors: " << report.chunks << " chunks, "
              << report.host_to_device_copies
              << " host-to-device copies, on the device: " << (report.on_device ? "yes" : "no") << ", progress "
              << calls << " calls, last " << last << "%\n";
    // [load]
    std::cerr << "throughput: " << static_cast<double>(report.bytes_read) / report.seconds / 1e6 << " MB/s\n";

    // [check]
    // The blobs are at_device; reading one on the host waits for its bytes and copies it back.
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < names.size(); ++k) {
        const auto got = weights[names[k]].host_data();
        for (std::size_t i = 0; i < got.size(); ++i) {
            wrong += got[i] != value(k, i) ? 1U : 0U;
        }
    }
    std::cout << "every tensor checked: " << wrong << " wrong values\n";
    // [check]

    // [one-by-one]
    // The same tensors loaded one at a time: a read and a copy for each.
    std::uint64_t copies = 0;
    for (std::size_t s = 0; s < ckpt.shards().size(); ++s) {
        const auto shard = ckpt.shard_file(s);
        for (const auto& t : ckpt.tensors()) {
            if (t.shard == s) {
                sb::Blob<float, sb::Simulated> blob;
                shard.load(t.name, blob);
                (void)blob.device_data();
                copies += blob.data_stats().host_to_device;
            }
        }
    }
    std::cout << "tensor by tensor: " << copies << " host-to-device copies\n";
    // [one-by-one]

    // [convert]
    // A BF16 checkpoint into the same float arena: the raw bytes are copied, kernels convert them.
    std::vector<sb::Blob<sb::bfloat16>> halves;
    halves.reserve(blobs.size());  // the writer reads the blobs when it saves: they must not move
    sb::checkpoint::Writer bf16;
    for (std::size_t k = 0; k < blobs.size(); ++k) {
        auto& h = halves.emplace_back(blobs[k].shape());
        auto out = h.mutable_host_data();
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] = sb::bfloat16(blobs[k].host_data()[i]);
        }
        bf16.add(names[k], h);
    }
    const auto half_ckpt = sb::checkpoint::Checkpoint::open(bf16.save(dir / "bf16", save));
    options.convert = true;
    const auto converted = weights.load(half_ckpt, options);
    std::cout << "BF16 into float: " << converted.host_to_device_copies << " copies, " << converted.device_conversions
              << " conversion kernels on the device, " << converted.bytes_read
              << " bytes read; layer0.norm[3] = " << weights["layer0.norm"].host_data()[3] << '\n';
    // [convert]

    std::cout << "faults seen by the simulator: " << Device::faults().size() << '\n';
    fs::remove_all(dir);
}
