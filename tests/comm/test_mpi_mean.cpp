// SPDX-License-Identifier: BSD-2-Clause
// The numerical rule of an MPI mean (docs/scaling-out.md): every element is the sum of the ranks'
// values, added in some order, divided by the number of ranks and rounded once, with the same bits
// on every rank. Checked exactly, against every order of addition, on values with full mantissas,
// quotients in the subnormal range and a sum that overflows, for the blocking and the bucketed form,
// on 4 ranks (a power of two) and on 3 (ctest runs both), through each schedule of the engine that
// averages (halving and doubling on a power of two ranks, the ring on any number). And the engine's
// own messages: as many rounds as its schedule takes (counted through MPI's profiling interface),
// never matching a receive of the caller's on the same communicator, carried by a private
// communicator that goes with the caller's. ctest also runs the "[mean]" tests on 8 ranks, where
// halving and doubling takes three steps: there the rounds, and the values within the rounding
// bound of any order (every order is too many to try).
#include <mpi.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include <syncblob/comm/mpi.hpp>
#include <syncblob/sim/device.hpp>

#include "device_guard.hpp"

#include "mpi_test_support.hpp"

using syncblob::ParameterArena;
using syncblob::Reduce;
using syncblob::Simulated;
using syncblob::SimulatedDevice;
namespace mpi = syncblob::mpi;
using namespace std::chrono_literals;

namespace {
std::atomic<long> sends{0};             // MPI_Isend calls of this process
std::atomic<long> sends_at_gather{-1};  // `sends` when this process last started an MPI_Iallgather
std::atomic<int> gather_delay_ms{0};    // how long this process's next MPI_Iallgather waits to start
std::atomic<long> matched_receives{0};  // MPI_Mrecv calls: the early messages of a refused call, consumed
}  // namespace

// MPI's profiling interface: this definition takes the place of the library's, counts, and calls the
// library's own (PMPI_Isend). Every point-to-point message of syncblob's all-reduce engine is one.
extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         MPI_Request* request) {
    sends.fetch_add(1, std::memory_order_relaxed);
    return PMPI_Isend(buf, count, type, dest, tag, comm, request);
}

// The agreement's gathering (mpi_agree.hpp) is this process's only MPI_Iallgather: noting the sends
// made before it says whether a call's first messages went out before its agreement.
extern "C" int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    sends_at_gather.store(sends.load(std::memory_order_relaxed), std::memory_order_relaxed);
    if (const int delay = gather_delay_ms.exchange(0); delay > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds{delay});
    }
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

// A refused call consumes each early message sent to this rank that it has not received with one
// MPI_Mrecv (mpi_agree.hpp's consume_early), this process's only one.
extern "C" int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
    matched_receives.fetch_add(1, std::memory_order_relaxed);
    return PMPI_Mrecv(buf, count, type, message, status);
}

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Rank r's element i: full mantissas of either sign around 1; every 8th a tiny value whose quotient
// by the number of ranks is subnormal (where dividing each term first would round differently);
// element 6 near the largest finite value on every rank, so that its sum overflows.
template <class T>
T value(int r, std::size_t i) {
    const std::uint64_t bits = mix((static_cast<std::uint64_t>(r) << 40) ^ i);
    const T unit = static_cast<T>(bits >> 11) / static_cast<T>(std::uint64_t{1} << 53);  // [0, 1)
    const T sign = (bits & 1) != 0 ? T(-1) : T(1);
    if (i == 6) {
        return T(0.75) * std::numeric_limits<T>::max();
    }
    if (i % 8 == 3) {
        return sign * std::ldexp(T(1) + unit, std::numeric_limits<T>::min_exponent);  // 2^(min-1) · [1, 2)
    }
    return sign * std::ldexp(T(1) + unit, static_cast<int>(bits % 9) - 4);
}

// Every order of addition of more terms is too many to try: the tests that check each element
// against every order run on up to this many ranks (ctest runs 4 and 3).
constexpr int most_ranks = 5;

// Calls `found(s)` for every value a sum of terms[0, n) can take in floating point, over every order
// and grouping (n at most most_ranks).
template <class T, class Found>
void every_sum(const T* terms, std::size_t n, Found& found) {
    if (n == 1) {
        found(terms[0]);
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = i + 1; j < n; ++j) {
            T rest[most_ranks];
            std::size_t m = 0;
            for (std::size_t k = 0; k < n; ++k) {
                if (k != i && k != j) {
                    rest[m++] = terms[k];
                }
            }
            rest[m++] = terms[i] + terms[j];
            every_sum(rest, m, found);
        }
    }
}

template <class T>
bool same_bits(T a, T b) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// The arena's blobs (uneven, so that pieces and chunks cut across them).
template <class T>
void build(ParameterArena<T>& arena) {
    for (const std::int64_t n : {1000, 3, 2048, 517}) {
        arena.add({n});
    }
    arena.seal();
}

template <class T>
void fill(ParameterArena<T>& arena, MPI_Comm comm) {
    std::size_t i = 0;
    for (auto& blob : arena.blobs()) {
        for (auto& x : blob.mutable_host_diff()) {
            x = value<T>(rank_in(comm), i++);
        }
    }
}

// How many elements break the rule: each must be the sum of the ranks' values in some order (for a
// mean: divided by the number of ranks, rounded once). Exhaustive up to 5 ranks.
template <class T>
std::size_t broken(ParameterArena<T>& arena, Reduce reduce, MPI_Comm comm) {
    const int ranks = size_of(comm);
    std::size_t bad = 0;
    std::size_t i = 0;
    for (auto& blob : arena.blobs()) {
        for (const T got : blob.host_diff()) {
            T terms[most_ranks];
            for (int r = 0; r < ranks; ++r) {
                terms[r] = value<T>(r, i);
            }
            ++i;
            bool found = false;
            auto match = [&](T s) {
                found = found || same_bits(reduce == Reduce::mean ? s / static_cast<T>(ranks) : s, got);
            };
            every_sum(terms, static_cast<std::size_t>(ranks), match);
            bad += found ? 0 : 1;
        }
    }
    return bad;
}

// True on every rank when every rank holds the same bytes in its arena's diffs.
template <class T>
bool same_on_every_rank(ParameterArena<T>& arena, MPI_Comm comm) {
    std::uint64_t h = 0;
    for (auto& blob : arena.blobs()) {
        for (const T x : blob.host_diff()) {
            std::uint64_t bits = 0;
            std::memcpy(&bits, &x, sizeof(T));
            h = mix(h ^ bits);
        }
    }
    std::uint64_t low = 0;
    std::uint64_t high = 0;
    MPI_Allreduce(&h, &low, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(&h, &high, 1, MPI_UINT64_T, MPI_MAX, comm);
    return low == high;
}

}  // namespace

TEMPLATE_TEST_CASE("mpi: a mean is the ranks' sum in some order divided once, with the same bits on every rank",
                   "[mpi][mean]", float, double) {
    const int ranks = size_of(MPI_COMM_WORLD);
    if (ranks > most_ranks) {
        return;
    }
    ParameterArena<TestType> arena;
    build(arena);
    const Reduce reduce = GENERATE(Reduce::mean, Reduce::sum);
    // Pieces of 1000 bytes: many more than in flight at once, with chunks of uneven sizes.
    const std::size_t piece_bytes = GENERATE(std::size_t{1000}, std::size_t{4} << 20);
    const mpi::Options options{.piece_bytes = piece_bytes};
    INFO((reduce == Reduce::mean ? "mean" : "sum") << ", pieces of " << piece_bytes << " bytes, " << ranks << " ranks");

    fill(arena, MPI_COMM_WORLD);
    mpi::allreduce_diff(arena, MPI_COMM_WORLD, reduce, options);
    CHECK(broken(arena, reduce, MPI_COMM_WORLD) == 0);
    CHECK(same_on_every_rank(arena, MPI_COMM_WORLD));
    if (ranks > 1) {
        CHECK(std::isinf(arena[0].host_diff()[6]));  // the sum overflows: so does the mean, as the sum would
    }

    fill(arena, MPI_COMM_WORLD);
    mpi::iallreduce_diff(arena, MPI_COMM_WORLD, reduce, 4096, options).wait();
    CHECK(broken(arena, reduce, MPI_COMM_WORLD) == 0);
    CHECK(same_on_every_rank(arena, MPI_COMM_WORLD));

    // The bucketed form progresses in test() alone, bucket by bucket as blobs become ready.
    fill(arena, MPI_COMM_WORLD);
    mpi::BucketedAllreduce<TestType, syncblob::HostOnly> pending(arena, MPI_COMM_WORLD, reduce, 2048, 4096, options);
    for (std::size_t b = arena.size(); b-- > 0;) {
        pending.ready(b);
        (void)pending.test();
    }
    const auto limit = std::chrono::steady_clock::now() + 20s;
    bool done = false;
    while (!done && std::chrono::steady_clock::now() < limit) {
        done = pending.test();
    }
    CHECK(done);
    pending.wait();
    CHECK(broken(arena, reduce, MPI_COMM_WORLD) == 0);
    CHECK(same_on_every_rank(arena, MPI_COMM_WORLD));
}

TEST_CASE("mpi: the engine's ring schedule keeps the rule on any number of ranks", "[mpi][mean]") {
    // On a power of two ranks a call takes halving and doubling; the ring, which it takes on other
    // numbers of ranks, is checked here on this one too.
    const int ranks = size_of(MPI_COMM_WORLD);
    if (ranks > most_ranks) {
        return;
    }
    OwnComm own;
    ParameterArena<double> arena;
    build(arena);
    using Engine = mpi::detail::Allreduce<double>;
    const auto schedule = GENERATE(Engine::Schedule::ring, Engine::Schedule::automatic);
    const Reduce reduce = GENERATE(Reduce::mean, Reduce::sum);
    INFO((schedule == Engine::Schedule::ring ? "ring" : "automatic") << ", " << ranks << " ranks");
    fill(arena, MPI_COMM_WORLD);
    Engine engine(own.comm, reduce == Reduce::mean, 100, 3, "test", schedule);  // pieces of 100: chunks of 25 and 33
    for (auto& blob : arena.blobs()) {
        (void)engine.add(blob.mutable_host_diff().data(), static_cast<std::size_t>(blob.count()));
    }
    engine.wait(MPI_COMM_WORLD, mpi::detail::Deadline{}, "the test's all-reduce",
                [] { return std::vector<std::shared_ptr<void>>{}; });
    CHECK(broken(arena, reduce, MPI_COMM_WORLD) == 0);
    CHECK(same_on_every_rank(arena, MPI_COMM_WORLD));
}

TEST_CASE(
    "mpi: a mean takes 2 log2(ranks) rounds of messages on a power of two ranks, the ring's 2 (ranks - 1) "
    "on others",
    "[mpi][mean]") {
    // Each round is a message to one rank and one from another, and waits for the slower of the two:
    // on ranks sharing busy cores, each costs a rank's wait to be scheduled (docs/scaling-out.md).
    const int ranks = size_of(MPI_COMM_WORLD);
    int rounds = 2 * (ranks - 1);
    if ((ranks & (ranks - 1)) == 0) {
        rounds = 0;
        for (int r = ranks; r > 1; r >>= 1) {
            rounds += 2;
        }
    }
    ParameterArena<float> arena;
    arena.add({4096});  // one piece
    arena.seal();
    fill(arena, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const long before = sends.load();
    mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean);
    INFO(ranks << " ranks");
    CHECK(sends.load() - before == rounds);  // 4 ranks: 4 where the ring took 6
    if (ranks <= most_ranks) {
        CHECK(broken(arena, Reduce::mean, MPI_COMM_WORLD) == 0);
    } else {  // too many ranks for every order of addition: against the sum in double, within the bound
        // of a float sum in any order divided once (under (n - 1) / 2 eps of the terms' magnitudes, divided
        // by n, and the division's own rounding): under eps times the sum of the magnitudes
        std::vector<double> sum(4096);
        std::vector<double> magnitude(4096);
        for (std::size_t i = 0; i < sum.size(); ++i) {
            sum[i] = value<float>(rank_in(MPI_COMM_WORLD), i);
            magnitude[i] = std::abs(sum[i]);
        }
        MPI_Allreduce(MPI_IN_PLACE, sum.data(), 4096, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, magnitude.data(), 4096, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        std::size_t far = 0;
        const auto got = arena[0].host_diff();
        for (std::size_t i = 0; i < sum.size(); ++i) {
            if (magnitude[i] > std::numeric_limits<float>::max()) {
                continue;  // a partial sum may overflow (element 6)
            }
            const double bound = std::numeric_limits<float>::epsilon() * magnitude[i] + 1e-44;
            if (std::abs(got[i] - sum[i] / ranks) > bound) {
                ++far;
            }
        }
        CHECK(far == 0);
    }
    CHECK(same_on_every_rank(arena, MPI_COMM_WORLD));
}

TEST_CASE("mpi: the bucketed form's mean is its sum divided by the number of ranks, bit for bit", "[mpi][mean]") {
    const int ranks = size_of(MPI_COMM_WORLD);
    ParameterArena<float> summed;
    ParameterArena<float> averaged;
    build(summed);
    build(averaged);
    fill(summed, MPI_COMM_WORLD);
    fill(averaged, MPI_COMM_WORLD);
    const mpi::Options options{.piece_bytes = 1000};
    mpi::iallreduce_diff(summed, MPI_COMM_WORLD, Reduce::sum, 4096, options).wait();
    mpi::iallreduce_diff(averaged, MPI_COMM_WORLD, Reduce::mean, 4096, options).wait();
    std::size_t differ = 0;
    for (std::size_t b = 0; b < summed.size(); ++b) {
        const auto sum = summed[b].host_diff();
        const auto mean = averaged[b].host_diff();
        for (std::size_t i = 0; i < sum.size(); ++i) {
            if (!same_bits(sum[i] / static_cast<float>(ranks), mean[i])) {
                ++differ;
            }
        }
    }
    CHECK(differ == 0);
}

TEST_CASE("mpi: all-reduces back to back, with ranks out of step in time, each match their own messages",
          "[mpi][mean]") {
    // Ranks arrive at each call at different times, so one rank's next call sends while another
    // still receives the last one's messages: every message must find the call (and piece) it
    // belongs to.
    const int rank = rank_in(MPI_COMM_WORLD);
    if (size_of(MPI_COMM_WORLD) > most_ranks) {
        return;
    }
    ParameterArena<float> arena;
    build(arena);
    const mpi::Options options{.piece_bytes = 512};  // many pieces, more than in flight at once
    std::size_t bad = 0;
    for (int round = 0; round < 6; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds{(rank + round) % 3});
        fill(arena, MPI_COMM_WORLD);
        if (round % 2 == 0) {
            mpi::allreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean, options);
        } else {
            auto pending = mpi::iallreduce_diff(arena, MPI_COMM_WORLD, Reduce::mean, 2048, options);
            std::this_thread::sleep_for(std::chrono::milliseconds{rank % 2});
            pending.wait();
        }
        bad += broken(arena, Reduce::mean, MPI_COMM_WORLD);
    }
    CHECK(bad == 0);
}

TEST_CASE("mpi: the all-reduce engine's messages never match the caller's receives on the same communicator",
          "[mpi][mean]") {
    OwnComm own;
    const int ranks = size_of(own.comm);
    const int rank = rank_in(own.comm);
    if (ranks > most_ranks) {
        return;
    }
    // The caller waits for a message from anyone, with any tag, on the communicator it lends.
    float received = -1.0F;
    MPI_Request receive = MPI_REQUEST_NULL;
    MPI_Irecv(&received, 1, MPI_FLOAT, MPI_ANY_SOURCE, MPI_ANY_TAG, own.comm, &receive);

    ParameterArena<float> arena;
    build(arena);
    const mpi::Options options{.timeout = 20s};  // a message taken by the caller would leave a ring waiting
    fill(arena, own.comm);
    mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);
    CHECK(broken(arena, Reduce::mean, own.comm) == 0);
    fill(arena, own.comm);
    mpi::iallreduce_diff(arena, own.comm, Reduce::sum, 4096, options).wait();
    CHECK(broken(arena, Reduce::sum, own.comm) == 0);

    int flag = 1;
    MPI_Test(&receive, &flag, MPI_STATUS_IGNORE);
    CHECK(flag == 0);       // nothing of syncblob's arrived there
    MPI_Barrier(own.comm);  // (every rank has looked before any rank sends its own message)
    const auto sent = static_cast<float>(rank);
    MPI_Send(&sent, 1, MPI_FLOAT, (rank + 1) % ranks, 7, own.comm);
    MPI_Wait(&receive, MPI_STATUS_IGNORE);
    CHECK(received == static_cast<float>((rank + ranks - 1) % ranks));  // the caller's own message
}

TEST_CASE("mpi: the private communicator is made once per communicator and freed with it", "[mpi][mean]") {
    const std::size_t before = mpi::detail::PrivateComms::count();
    {
        OwnComm own;
        ParameterArena<double> arena;
        build(arena);
        mpi::allreduce_diff(arena, own.comm, Reduce::sum);
        CHECK(mpi::detail::PrivateComms::count() == before);  // MPI's own all-reduce: no ring, no duplicate
        mpi::allreduce_diff(arena, own.comm, Reduce::mean);
        CHECK(mpi::detail::PrivateComms::count() == before + 1);
        mpi::iallreduce_diff(arena, own.comm, Reduce::mean, 4096).wait();
        CHECK(mpi::detail::PrivateComms::count() == before + 1);  // the same one
    }
    CHECK(mpi::detail::PrivateComms::count() == before);
}

namespace {

// Rank r's element i is (r + 1)(i % 97 + 1): every partial sum, and the mean (ranks + 1) / 2 ·
// (i % 97 + 1), are exact on up to 8 ranks, whatever the order of addition. `scale` (−3 for the
// calls that must fail) makes a message of one call wrong for any other.
template <class T, class A>
void fill_exact(ParameterArena<T, A>& arena, MPI_Comm comm, int scale = 1) {
    std::size_t i = 0;
    for (auto& blob : arena.blobs()) {
        for (auto& x : blob.mutable_host_diff()) {
            x = static_cast<T>(scale * (rank_in(comm) + 1) * static_cast<int>(i++ % 97 + 1));
        }
    }
}

// The host's waits for other ranks the sync audit counted under `operation`, asked for or not.
std::uint64_t collective_waits(std::string_view operation) {
    std::uint64_t n = 0;
    for (const auto& c : syncblob::audit::counts()) {
        n += c.operation == operation && c.wait == syncblob::audit::Wait::collective ? c.calls : 0;
    }
    return n;
}

// The elements that are not the exact mean (or `reduce`) of fill_exact's values.
template <class T, class A>
std::size_t off_mean(ParameterArena<T, A>& arena, MPI_Comm comm, Reduce reduce = Reduce::mean) {
    const int ranks = size_of(comm);
    const T factor = static_cast<T>(ranks + 1) / T(2) * static_cast<T>(reduce == Reduce::sum ? ranks : 1);
    std::size_t off = 0;
    std::size_t i = 0;
    for (auto& blob : arena.blobs()) {
        for (const T x : blob.host_diff()) {
            off += x == factor * static_cast<T>(i++ % 97 + 1) ? 0u : 1u;
        }
    }
    return off;
}

// Fills `arena` as fill_exact does and takes its mean across `comm`: the elements then not exact (0
// when the communicator works and no message of an earlier call is matched).
template <class T, class A>
std::size_t off_after_mean(ParameterArena<T, A>& arena, MPI_Comm comm, const mpi::Options& options) {
    fill_exact(arena, comm);
    mpi::allreduce_diff(arena, comm, Reduce::mean, options);
    return off_mean(arena, comm);
}

template <class T, class A>
std::vector<double> diffs(ParameterArena<T, A>& arena) {
    std::vector<double> out;
    for (auto& blob : arena.blobs()) {
        for (const T x : blob.host_diff()) {
            out.push_back(static_cast<double>(x));
        }
    }
    return out;
}

}  // namespace

TEST_CASE("mpi: a mean on a communicator agreed on before sends its first messages before the agreement",
          "[mpi][mean]") {
    // The agreement's round and the data's first one then wait for the other ranks together: on 4
    // ranks sharing 2 busy cores the agreement's round alone cost 2-4 ms a call (docs/scaling-out.md).
    OwnComm own;
    const int ranks = size_of(own.comm);
    ParameterArena<float> arena;
    arena.add({1000});
    arena.add({24});
    arena.seal();  // one piece
    for (int call = 0; call < 3; ++call) {
        fill_exact(arena, own.comm);
        MPI_Barrier(own.comm);
        const long before = sends.load();
        mpi::allreduce_diff(arena, own.comm, Reduce::mean);
        INFO("call " << call << ", " << ranks << " ranks");
        // The first call agrees, then makes the private communicator; the next ones send first.
        CHECK(sends_at_gather.load() - before == (call == 0 || ranks == 1 ? 0 : 1));
        CHECK(off_mean(arena, own.comm) == 0);
    }
}

TEST_CASE("mpi: iallreduce_diff on a communicator agreed on before sends its first messages before the agreement",
          "[mpi][mean]") {
    // As allreduce_diff's mean: the bucketed one-shot form (a new handle each call) agrees every
    // call. A sum too, on an arena without device memory: no rank can reduce it elsewhere.
    const Reduce reduce = GENERATE(Reduce::mean, Reduce::sum);
    OwnComm own;
    const int ranks = size_of(own.comm);
    ParameterArena<float> arena;
    arena.add({1000});
    arena.add({24});
    arena.seal();  // one bucket, one piece
    for (int call = 0; call < 3; ++call) {
        fill_exact(arena, own.comm);
        MPI_Barrier(own.comm);
        const long before = sends.load();
        auto step = mpi::iallreduce_diff(arena, own.comm, reduce, std::size_t{1} << 20);
        INFO("call " << call << ", " << ranks << " ranks, " << (reduce == Reduce::sum ? "sum" : "mean"));
        CHECK(sends_at_gather.load() - before == (call == 0 || ranks == 1 ? 0 : 1));
        const syncblob::CommStats stats = step.wait();
        CHECK(stats.calls == 1);
        CHECK(off_mean(arena, own.comm, reduce) == 0);
    }
}

TEST_CASE(
    "mpi: an iallreduce_diff sum on a device-backed arena sends its first messages before the agreement "
    "where this rank may not sum in device memory",
    "[mpi][mean]") {
    // An MPI that is not device-aware (Debian's Open MPI) sums a device-backed arena's diffs in its
    // host memory, as it sums a host arena's: the diffs fresh on the device are staged before they
    // are sent, and the call sends them before its agreement as a mean does.
    OwnComm own;
    const int ranks = size_of(own.comm);
    SimulatedDevice::Scope scope(SimulatedDevice::Settings{});
    ParameterArena<float, Simulated> arena;
    arena.add({1000});
    arena.add({24});
    arena.seal();  // one bucket, one piece
    const mpi::Options options{.device_aware = false};
    for (int call = 0; call < 3; ++call) {
        fill_exact(arena, own.comm);
        for (std::size_t b = 0; b < arena.size(); ++b) {
            (void)arena[b].mutable_device_diff();  // fresh on the device only: staged before it is sent
        }
        MPI_Barrier(own.comm);
        const long before = sends.load();
        auto step = mpi::iallreduce_diff(arena, own.comm, Reduce::sum, std::size_t{1} << 20, options);
        INFO("call " << call << ", " << ranks << " ranks");
        CHECK(sends_at_gather.load() - before == (call == 0 || ranks == 1 ? 0 : 1));
        const syncblob::CommStats stats = step.wait();
        CHECK(stats.calls == 1);
        CHECK_FALSE(stats.on_device);
        CHECK(off_mean(arena, own.comm, Reduce::sum) == 0);
    }
}

TEST_CASE("mpi: an early iallreduce_diff sum meeting a rank that sums in device memory takes its messages back",
          "[mpi][mean]") {
    // Rank 0 may sum in device memory (a device-aware MPI, here the simulator's), so every rank
    // uses MPI_Iallreduce: the others' early messages are consumed before, and none is left for the
    // next call. The next sums on that communicator send nothing early: in a loop where one rank
    // sums in device memory every step, sending and taking back would be a wait every step.
    OwnComm own;
    if (size_of(own.comm) == 1) {
        return;
    }
    SimulatedDevice::Scope scope(SimulatedDevice::Settings{});
    ParameterArena<float> arena;
    arena.add({500});
    arena.add({300});
    arena.seal();
    ParameterArena<float, Simulated> on_device;
    on_device.add({500});
    on_device.add({300});
    on_device.seal();
    const mpi::Options options{.device_aware = true, .piece_bytes = 512};
    fill_exact(arena, own.comm);
    mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);  // the communicator is agreed on
    for (int call = 0; call < 3; ++call) {
        INFO("call " << call);
        fill_exact(arena, own.comm);
        const syncblob::audit::ModeScope counting(syncblob::audit::Mode::count);
        syncblob::audit::reset();
        syncblob::CommStats stats;
        if (rank_in(own.comm) == 0) {
            fill_exact(on_device, own.comm);
            for (std::size_t b = 0; b < on_device.size(); ++b) {
                (void)on_device[b].mutable_device_diff();  // fresh on the device only: summed there
            }
            stats = mpi::iallreduce_diff(on_device, own.comm, Reduce::sum, 1024, options).wait();
            CHECK(stats.on_device);
            CHECK(off_mean(on_device, own.comm, Reduce::sum) == 0);
        } else {
            const long before = sends.load();
            auto step = mpi::iallreduce_diff(arena, own.comm, Reduce::sum, 1024, options);
            // The first sends early, then takes its messages back; the last agreement then chose
            // MPI_Iallreduce, so the next ones agree first.
            CHECK((sends_at_gather.load() - before > 0) == (call == 0));
            stats = step.wait();
            CHECK(off_mean(arena, own.comm, Reduce::sum) == 0);
        }
        CHECK(stats.calls == 7);  // one MPI_Iallreduce per piece: 4 + 3 of 128 floats
        CHECK(collective_waits("mpi::BucketedAllreduce::wait") == 1);  // for the MPI_Iallreduce requests
    }
    CHECK(off_after_mean(arena, own.comm, options) == 0);
}

TEST_CASE("mpi: an early iallreduce_diff mean and a BucketedAllreduce that agrees first meet in one exact mean",
          "[mpi][mean]") {
    // Rank 0 constructs its handle, agreeing before it sends; the others send early. Every rank's
    // receives meet the others' messages whichever way each started.
    OwnComm own;
    ParameterArena<float> arena;
    arena.add({500});
    arena.add({300});
    arena.seal();
    const mpi::Options options{.piece_bytes = 512};  // 128 floats a piece, 2 buckets of 2 and 3 pieces
    fill_exact(arena, own.comm);
    mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);  // the communicator is agreed on
    for (int call = 0; call < 2; ++call) {
        fill_exact(arena, own.comm);
        if (rank_in(own.comm) == call % size_of(own.comm)) {
            mpi::BucketedAllreduce<float, syncblob::HostOnly> step(arena, own.comm, Reduce::mean, 1600, 1600, options);
            step.start_all();
            (void)step.wait();
        } else {
            (void)mpi::iallreduce_diff(arena, own.comm, Reduce::mean, 1600, options).wait();
        }
        CHECK(off_mean(arena, own.comm) == 0);
    }
}

TEST_CASE("mpi: a mean refused after it sent early changes no rank's arena, and the next call is exact",
          "[mpi][mean]") {
    // Ranks that differ send early messages of different sizes and numbers, or none: each must be
    // consumed before the call throws (a message left behind would be taken by the next call's
    // receive of its tag), and none received into a buffer sized for another (Open MPI's shared
    // memory writes a longer message past the end). The odd rank joins the agreement 100 ms after
    // its early messages, so the rank they go to sees them while it waits for the agreement.
    if (!has_ranks(2)) {
        return;
    }
    OwnComm own;
    const int odd = 1;
    const bool is_odd = rank_in(own.comm) == odd;
    const mpi::Options options{.piece_bytes = 256};  // 64 floats a piece: ranks start different numbers
    ParameterArena<float> arena;                     // 4 pieces: the whole window (ring_pieces_in_flight)
    arena.add({200});
    arena.seal();
    ParameterArena<float> longer;  // 8
    longer.add({200});
    longer.add({300});
    longer.seal();
    ParameterArena<float> shorter;  // 2
    shorter.add({100});
    shorter.seal();
    ParameterArena<double> doubles;  // 4, of twice the bytes
    doubles.add({200});
    doubles.seal();
    fill_exact(arena, own.comm);
    mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);  // the communicator is agreed on
    REQUIRE(off_mean(arena, own.comm) == 0);

    const auto refused = [&](auto& mine, const std::function<void()>& call) {
        fill_exact(mine, own.comm, -3);
        const std::vector<double> before = diffs(mine);
        gather_delay_ms = is_odd ? 100 : 0;
        const std::string message = outcome(call);
        INFO("rank " << rank_in(own.comm) << ": " << message);
        CHECK(everywhere(!message.empty()));
        CHECK(diffs(mine) == before);
        // The communicator still works, and no stale message is matched.
        CHECK(off_after_mean(arena, own.comm, options) == 0);
    };
    SECTION("a rank's arena is longer") {
        auto& mine = is_odd ? longer : arena;
        refused(mine, [&] { mpi::allreduce_diff(mine, own.comm, Reduce::mean, options); });
    }
    SECTION("a rank's arena is shorter, and a timeout is set") {
        auto& mine = is_odd ? shorter : arena;
        mpi::Options bounded = options;
        bounded.timeout = 30s;
        refused(mine, [&] { mpi::allreduce_diff(mine, own.comm, Reduce::mean, bounded); });
    }
    SECTION("a rank's pieces are longer, so are its messages") {
        mpi::Options longer_pieces = options;
        longer_pieces.piece_bytes = is_odd ? 1024 : 256;
        refused(arena, [&] { mpi::allreduce_diff(arena, own.comm, Reduce::mean, longer_pieces); });
    }
    SECTION("a rank's arena holds doubles") {
        if (is_odd) {
            refused(doubles, [&] { mpi::allreduce_diff(doubles, own.comm, Reduce::mean, options); });
        } else {
            refused(arena, [&] { mpi::allreduce_diff(arena, own.comm, Reduce::mean, options); });
        }
    }
    SECTION("iallreduce_diff: a rank's arena is longer") {
        auto& mine = is_odd ? longer : arena;
        refused(mine, [&] { (void)mpi::iallreduce_diff(mine, own.comm, Reduce::mean, 1024, options).wait(); });
    }
    SECTION("iallreduce_diff: a rank's buckets are smaller, and a timeout is set") {
        mpi::Options bounded = options;
        bounded.timeout = 30s;
        refused(arena, [&] {
            (void)mpi::iallreduce_diff(arena, own.comm, Reduce::mean, is_odd ? 128 : 1024, bounded).wait();
        });
    }
    SECTION("a rank asks for a sum, and another broadcasts") {
        const int rank = rank_in(own.comm);
        refused(arena, [&] {
            if (rank == odd) {
                mpi::allreduce_diff(arena, own.comm, Reduce::sum, options);
            } else if (rank == 2) {
                mpi::broadcast_data(arena, own.comm, 0, options);
            } else {
                mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);
            }
        });
    }
    SECTION("a rank's staging copy fails") {
        SimulatedDevice::Scope scope(SimulatedDevice::Settings{});
        ParameterArena<float, Simulated> staged;
        staged.add({200});
        staged.seal();
        fill_exact(staged, own.comm, -3);
        const std::vector<double> values = diffs(staged);
        std::vector<float> device(values.begin(), values.end());
        // allreduce_diff stages before its agreement; iallreduce_diff with each bucket, after its early sends.
        const std::function<void()> calls[] = {
            [&] { mpi::allreduce_diff(staged, own.comm, Reduce::mean, {.device_aware = false, .piece_bytes = 256}); },
            [&] {
                (void)mpi::iallreduce_diff(staged, own.comm, Reduce::mean, 1024,
                                           {.device_aware = false, .piece_bytes = 256})
                    .wait();
            }};
        for (const auto& call : calls) {
            syncblob_test::write_device<SimulatedDevice>(staged[0].mutable_device_diff(), device.data(),
                                                         device.size() * sizeof(float));
            std::string message;
            try {
                SimulatedDevice::Scope fail({.fail_copy = is_odd ? 1u : 0u});
                call();
            } catch (const syncblob::Error& e) {  // DeviceError on the rank that failed, StateError elsewhere
                message = e.what();
            }
            INFO("rank " << rank_in(own.comm) << ": " << message);
            CHECK(everywhere(!message.empty()));
            CHECK(diffs(staged) == values);
            CHECK(off_after_mean(arena, own.comm, options) == 0);
        }
    }
}

TEST_CASE("mpi: the sync audit counts each wait of an MPI call once, where it is made", "[mpi][mean]") {
    // Each wait is reported before what it waits for is posted (mpi_wait.hpp's complete): these
    // counts are what a report missing from one place, or made twice, would change.
    namespace audit = syncblob::audit;
    OwnComm own;
    ParameterArena<float> arena;
    arena.add({200});
    arena.seal();
    const mpi::Options options{.piece_bytes = 256};  // 4 pieces
    const audit::ModeScope counting(audit::Mode::count);
    // The first mean on the communicator also makes its private communicator (MPI_Comm_idup).
    std::uint64_t made[2] = {};
    for (auto& waits : made) {
        audit::reset();
        fill_exact(arena, own.comm);
        mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);
        CHECK(collective_waits("mpi agreement") == 1);
        waits = collective_waits("mpi::allreduce_diff");
    }
    CHECK(made[0] == made[1] + 1);
    // A sum is MPI's own all-reduce, one a piece (mpi_wait.hpp's collective), with a timeout or without.
    for (const auto timeout : {std::optional<std::chrono::milliseconds>{}, std::optional{30000ms}}) {
        audit::reset();
        mpi::Options bounded = options;
        bounded.timeout = timeout;
        const syncblob::CommStats stats = mpi::allreduce_diff(arena, own.comm, Reduce::sum, bounded);
        CHECK(stats.calls == 4);
        CHECK(collective_waits("mpi::allreduce_diff") == 4);
    }
    // A refused mean: the gathering, one wait for each early message this rank consumes, and one for
    // its own early messages to be consumed. The odd rank's pieces are longer, so the rank it sends
    // to cannot receive them early: that rank consumes at least one.
    const int ranks = size_of(own.comm);
    if (ranks == 1) {
        return;
    }
    mpi::Options longer = options;
    longer.piece_bytes = rank_in(own.comm) == 1 ? 1024 : 256;
    audit::reset();
    const long sends_before = sends.load();
    const long consumed_before = matched_receives.load();
    CHECK(!outcome([&] { mpi::allreduce_diff(arena, own.comm, Reduce::mean, longer); }).empty());
    const long consumed = matched_receives.load() - consumed_before;
    const bool sent = sends_at_gather.load() - sends_before > 0;
    CHECK(sent);
    CHECK(collective_waits("mpi agreement") == 1 + static_cast<std::uint64_t>(consumed) + (sent ? 1u : 0u));
    CHECK(!everywhere(consumed == 0));
}

TEST_CASE("mpi: a mean refused by the sync audit's error mode leaves no early message behind", "[mpi][mean]") {
    // In Mode::error the agreement, a wait no caller asks for, throws SyncError on every rank: a
    // message sent before it would be left on the private communicator for the next call's receive,
    // and a gathering posted before it would write the descriptors of a call that is gone (under
    // ASan a heap-use-after-free; on 8 ranks the next call waited forever).
    OwnComm own;
    ParameterArena<float> arena;
    arena.add({200});
    arena.seal();
    const mpi::Options options{.piece_bytes = 256};
    fill_exact(arena, own.comm);
    mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);  // the communicator is agreed on
    fill_exact(arena, own.comm, -3);
    bool refused = false;
    try {
        const syncblob::audit::ModeScope strict(syncblob::audit::Mode::error);
        mpi::allreduce_diff(arena, own.comm, Reduce::mean, options);
    } catch (const syncblob::SyncError&) {
        refused = true;
    }
    CHECK(everywhere(refused));
    CHECK(off_after_mean(arena, own.comm, options) == 0);
}

TEST_CASE("mpi: a BucketedAllreduce dropped unwaited in the sync audit's error mode still waits for its buckets",
          "[mpi][mean]") {
    // Its destructor waits for the buckets it started (the class comment), inside whatever operation
    // the caller is in: that wait is counted, never thrown, or the started buckets are left unreduced.
    OwnComm own;
    ParameterArena<float> arena;
    arena.add({200});
    arena.seal();
    const mpi::Options options{.piece_bytes = 256};
    std::optional<mpi::BucketedAllreduce<float, syncblob::HostOnly>> step;
    step.emplace(arena, own.comm, Reduce::mean, 1 << 20, 1 << 20, options);
    fill_exact(arena, own.comm);
    step->start_all();
    {
        const syncblob::audit::ModeScope strict(syncblob::audit::Mode::error);
        const syncblob::audit::Operation caller("a step of the caller's");  // asks for no wait
        step.reset();
    }
    CHECK(off_mean(arena, own.comm) == 0);
    CHECK(off_after_mean(arena, own.comm, options) == 0);  // and the communicator still works
}
