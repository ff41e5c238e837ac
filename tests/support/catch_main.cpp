// SPDX-License-Identifier: BSD-2-Clause
// Catch2's main, compiled once for every test executable. After the tests, any misuse the simulated
// device recorded (a block freed under queued work, work on another device's block, unordered
// operations on two streams; see SimulatedDevice::faults) fails the run: every test that uses the
// simulator must end with no faults. A test that provokes faults on purpose checks and clears them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstddef>
#include <iostream>

#include <syncblob/sim/device.hpp>

namespace {

// Names the test case in which new faults appeared (useful when a binary runs many).
class FaultListener : public Catch::TestEventListenerBase {
public:
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseStarting(const Catch::TestCaseInfo& info) override {
        before_ = syncblob::SimulatedDevice::faults().size();
        TestEventListenerBase::testCaseStarting(info);
    }
    void testCaseEnded(const Catch::TestCaseStats& stats) override {
        const auto faults = syncblob::SimulatedDevice::faults();
        for (std::size_t i = before_; i < faults.size(); ++i) {
            std::cerr << "simulated device fault in \"" << stats.testInfo.name << "\": " << faults[i] << '\n';
        }
        TestEventListenerBase::testCaseEnded(stats);
    }

private:
    std::size_t before_ = 0;
};

}  // namespace

CATCH_REGISTER_LISTENER(FaultListener)

int main(int argc, char* argv[]) {
    const int result = Catch::Session().run(argc, argv);
    const auto faults = syncblob::SimulatedDevice::faults();
    if (!faults.empty()) {
        std::cerr << faults.size() << " simulated device fault(s): the run fails\n";
        return result != 0 ? result : 1;
    }
    return result;
}
