// SPDX-License-Identifier: BSD-2-Clause
// Tutorial 8: data-parallel SGD across processes. A small linear model is trained by 4 MPI
// processes, each on its own shard of the data: every step each one computes the gradient of its
// shard into the diffs of a ParameterArena, one call averages the diffs across the processes, and
// each applies the same update. At the end every process holds the same weights bit for bit, and
// they equal (within float rounding) what serial training on all the data gives.
//
// Run it with `mpirun -np 4 ./08_data_parallel` (ctest does).
// needs: mpi
// mpirun: 4

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include <syncblob/comm/mpi.hpp>

namespace sb = syncblob;

namespace {

constexpr int features = 4;
constexpr int samples = 1024;  // in all; each of the 4 processes trains on a quarter
constexpr int steps = 60;
constexpr float learning_rate = 0.1f;

// Sample i of the whole data set, the same on every process: y = 2 x0 - 3 x1 + 0.5 x2 + x3 + 0.25.
void sample(int i, float* x, float& y) {
    for (int f = 0; f < features; ++f) {
        x[f] = static_cast<float>((i * (f + 3) + f * 7) % 17) / 8.0f - 1.0f;
    }
    y = 2.0f * x[0] - 3.0f * x[1] + 0.5f * x[2] + x[3] + 0.25f;
}

// Writes the gradient of the mean squared error over samples [first, first + n) into gw, gb;
// returns the sum of squared errors.
float gradient(const float* w, float b, int first, int n, float* gw, float& gb) {
    std::fill(gw, gw + features, 0.0f);
    gb = 0.0f;
    float loss = 0.0f;
    for (int i = first; i < first + n; ++i) {
        float x[features];
        float y = 0.0f;
        sample(i, x, y);
        float error = b - y;
        for (int f = 0; f < features; ++f) {
            error += w[f] * x[f];
        }
        for (int f = 0; f < features; ++f) {
            gw[f] += 2.0f * error * x[f] / static_cast<float>(n);
        }
        gb += 2.0f * error / static_cast<float>(n);
        loss += error * error;
    }
    return loss;
}

}  // namespace

int main(int argc, char* argv[]) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    int ranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const int shard = samples / ranks;
    {
        // [arena]
        // The model's parameters: blobs of one arena, added in the order the forward pass uses them.
        sb::ParameterArena<float> model;
        sb::Blob<float>& weights = model.add({features});
        sb::Blob<float>& bias = model.add({1});
        model.seal();  // one data and one diff buffer; each blob is a slice of both

        // Every process starts from rank 0's initial values.
        if (rank == 0) {
            weights.fill(0.1f);
        }
        sb::mpi::broadcast_data(model, MPI_COMM_WORLD, 0);
        // [arena]

        for (int step = 0; step < steps; ++step) {
            // [step]
            // Backward on this process's shard writes the diffs...
            const float shard_loss = gradient(weights.host_data().data(), bias.host_data()[0], rank * shard, shard,
                                              weights.mutable_host_diff().data(), bias.mutable_host_diff()[0]);
            // ...one call averages every diff of the model across the processes...
            sb::mpi::allreduce_diff(model, MPI_COMM_WORLD, sb::Reduce::mean);
            // ...and every process applies the same update.
            for (auto& blob : model.blobs()) {
                auto data = blob.mutable_host_data();
                const auto diff = blob.host_diff();
                for (std::size_t i = 0; i < data.size(); ++i) {
                    data[i] -= learning_rate * diff[i];
                }
            }
            // [step]
            float loss = 0.0f;
            MPI_Reduce(&shard_loss, &loss, 1, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0 && step % 20 == 0) {
                std::printf("step %2d: mean squared error %.4f\n", step, static_cast<double>(loss / samples));
            }
        }

        // Every process holds the same weights, bit for bit: compare each with rank 0's.
        std::vector<float> mine(model.flat_data().host_data().begin(), model.flat_data().host_data().end());
        std::vector<float> first = mine;
        MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
        int same = std::memcmp(mine.data(), first.data(), mine.size() * sizeof(float)) == 0 ? 1 : 0;
        int all_same = 0;
        MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

        if (rank == 0) {
            // Serial training on all the data, for comparison.
            float w[features];
            std::fill(w, w + features, 0.1f);
            float b = 0.0f;
            for (int step = 0; step < steps; ++step) {
                float gw[features];
                float gb = 0.0f;
                (void)gradient(w, b, 0, samples, gw, gb);
                for (int f = 0; f < features; ++f) {
                    w[f] -= learning_rate * gw[f];
                }
                b -= learning_rate * gb;
            }
            float largest = std::fabs(bias.host_data()[0] - b);
            for (int f = 0; f < features; ++f) {
                largest = std::max(largest, std::fabs(weights.host_data()[static_cast<std::size_t>(f)] - w[f]));
            }
            std::printf("%d processes, %d samples each\n", ranks, shard);
            std::printf("weights:");
            for (const float v : weights.host_data()) {
                std::printf(" %.3f", static_cast<double>(v));
            }
            std::printf(", bias %.3f\n", static_cast<double>(bias.host_data()[0]));
            std::printf("every process holds the same weights, bit for bit: %s\n", all_same == 1 ? "yes" : "no");
            std::printf("equal to serial training on all %d samples within 1e-5: %s\n", samples,
                        largest <= 1e-5f ? "yes" : "no");
        }
    }
    MPI_Finalize();
    return 0;
}
