// SPDX-License-Identifier: BSD-2-Clause
// needs: eigen
//
// Tutorial 2: a few steps of stochastic gradient descent on a blob, with Eigen views for the
// gradient and syncblob's math for the step. The weights live in a blob whose backend is the
// simulated device, so the example shows where each step's math ran: on the host while the data
// is fresh there, on the device once it has moved.
#include <cstdio>
#include <iostream>

#include <syncblob/eigen.hpp>
#include <syncblob/math.hpp>

int main() {
    using Blob = syncblob::Blob<float, syncblob::Simulated>;

    // Fit y = 2x + 1 from four samples; the weights (slope, intercept) start at zero.
    const Eigen::Vector4f x(0.0f, 1.0f, 2.0f, 3.0f);
    const Eigen::Vector4f y = 2.0f * x + Eigen::Vector4f::Ones();
    Blob w({2});
    syncblob::mutable_data_vector(w).setZero();
    const float learning_rate = 0.1f;

    const auto step = [&](int i) {
        // [sgd-step]
        // Gradient of the mean squared error, written into the diff through an Eigen view.
        const auto weights = syncblob::data_vector(w);
        const Eigen::Vector4f residual = (weights(0) * x).array() + weights(1) - y.array();
        auto grad = syncblob::mutable_diff_vector(w);
        grad(0) = 2.0f * residual.dot(x) / 4.0f;
        grad(1) = 2.0f * residual.sum() / 4.0f;
        const float loss = residual.squaredNorm() / 4.0f;

        syncblob::scale_diff(w, learning_rate);  // diff *= lr
        syncblob::update(w);                     // data -= diff, where the data is fresh
        // [sgd-step]
        std::printf("step %d: loss %.4f, |grad|^2 %.4f\n", i, static_cast<double>(loss),
                    static_cast<double>(syncblob::sumsq_diff(w)) / (learning_rate * learning_rate));
    };

    for (int i = 1; i <= 3; ++i) {
        step(i);
    }
    std::cout << "host steps:   data " << w.data_stats() << '\n';

    // Move the weights to the (simulated) device: the next updates run there, and only the
    // gradient, computed on the host, crosses over.
    w.reset_stats();
    (void)w.mutable_device_data();
    for (int i = 4; i <= 6; ++i) {
        step(i);
        (void)w.mutable_device_data();
    }
    std::cout << "device steps: data " << w.data_stats() << "\n              diff " << w.diff_stats() << '\n';
    const auto weights = syncblob::data_vector(w);
    std::printf("weights: slope %.3f, intercept %.3f\n", static_cast<double>(weights(0)),
                static_cast<double>(weights(1)));
    return 0;
}
