// SPDX-License-Identifier: BSD-2-Clause
#pragma once
// The GPU benchmark's harness (bench_gpu.cu): figures, each syncblob's value against a baseline
// measured in the same process in alternating pairs, a time budget, and the JSON the GPU check
// (scripts/gpu-check) keeps. Host code.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_bench_files.hpp"

namespace syncblob_bench {

/// One figure: syncblob's value and its baseline's, in one unit, and their ratio with 1 meaning "as
/// fast as the baseline" (the baseline's time over syncblob's, for every unit). `goal` is the ratio
/// the issue asks for, where it asks for one; `limit` says what holds a figure under its goal.
struct Figure {
    std::string item;
    std::string name;
    std::string unit;
    double value = 0;
    std::string baseline_name;
    double baseline = 0;
    double ratio = 0;
    std::optional<double> goal;
    std::string limit;
    int pairs = 0;
    /// What the figure is of, for tables that group figures (item 2: op, dtype, log2n, against).
    nlohmann::json params = nullptr;

    [[nodiscard]] nlohmann::json to_json() const {
        nlohmann::json j{{"item", item},
                         {"name", name},
                         {"unit", unit},
                         {"value", value},
                         {"baseline", baseline_name},
                         {"baseline_value", baseline},
                         {"ratio", ratio},
                         {"pairs", pairs}};
        j["goal"] = goal ? nlohmann::json(*goal) : nlohmann::json(nullptr);
        j["met"] = goal ? nlohmann::json(ratio >= *goal) : nlohmann::json(nullptr);
        if (!limit.empty()) {
            j["limit"] = limit;
        }
        if (!params.is_null()) {
            j["params"] = params;
        }
        return j;
    }
};

/// Seconds of one syncblob run and one baseline run per pair, measured back to back (alternating
/// which goes first), so that a slow phase of the machine hits both.
struct Pairs {
    std::vector<double> ours;
    std::vector<double> base;

    /// The median over the pairs of the baseline's time over ours.
    [[nodiscard]] double ratio() const {
        std::vector<double> r;
        for (std::size_t i = 0; i < ours.size(); ++i) {
            r.push_back(ours[i] > 0 ? base[i] / ours[i] : 0.0);
        }
        return median(r);
    }
    [[nodiscard]] double ours_median() const {
        auto v = ours;
        return median(v);
    }
    [[nodiscard]] double base_median() const {
        auto v = base;
        return median(v);
    }
};

/// A figure in GB/s from pairs of times: syncblob moving `ours_bytes` per run, the baseline
/// `base_bytes` (the ratio is of bytes per second).
inline Figure gb_per_s(std::string item, std::string name, const Pairs& p, double ours_bytes, std::string baseline,
                       double base_bytes, std::optional<double> goal = {}, std::string limit = {}) {
    return {std::move(item),
            std::move(name),
            "GB/s",
            ours_bytes / p.ours_median() / 1e9,
            std::move(baseline),
            base_bytes / p.base_median() / 1e9,
            ours_bytes / base_bytes * p.ratio(),
            goal,
            std::move(limit),
            static_cast<int>(p.ours.size())};
}

/// A figure in microseconds per `what` (a call, a cycle) from pairs of times.
inline Figure microseconds(std::string item, std::string name, const std::string& what, const Pairs& p,
                           std::string baseline, std::optional<double> goal = {}, std::string limit = {}) {
    return {
        std::move(item),       std::move(name), "us/" + what, p.ours_median() * 1e6, std::move(baseline),
        p.base_median() * 1e6, p.ratio(),       goal,         std::move(limit),      static_cast<int>(p.ours.size())};
}

/// A figure of syncblob's alone or of a limit alone, without a baseline of its own.
inline Figure reference(std::string item, std::string name, std::string unit, double value, int pairs) {
    Figure f;
    f.item = std::move(item);
    f.name = std::move(name);
    f.unit = std::move(unit);
    f.value = value;
    f.pairs = pairs;
    return f;
}

/// A deadline for the whole benchmark: each item takes its share and measures fewer pairs (never
/// fewer than `min_pairs`) when it runs late.
class Budget {
public:
    explicit Budget(double seconds)
        : end_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
    [[nodiscard]] double left() const { return std::chrono::duration<double>(end_ - Clock::now()).count(); }

    /// Runs up to `pairs` pairs of `ours()` and `base()` (each returns the seconds it measured), at
    /// least `min_pairs`, the later ones only while time is left.
    template <class Ours, class Base>
    Pairs pairs(int pairs, const Ours& ours, const Base& base, int min_pairs = 3) const {
        Pairs p;
        for (int i = 0; i < pairs && (i < min_pairs || left() > 0); ++i) {
            if (i % 2 == 0) {
                p.ours.push_back(ours());
                p.base.push_back(base());
            } else {
                p.base.push_back(base());
                p.ours.push_back(ours());
            }
        }
        return p;
    }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point end_;
};

/// The figures measured so far and the items' outcomes, written as JSON.
class Report {
public:
    void add(Figure f) {
        std::printf("  %-56s %10.3f %-7s %-28s %10.3f  ratio %.3f%s\n", f.name.c_str(), f.value, f.unit.c_str(),
                    f.baseline_name.c_str(), f.baseline, f.ratio,
                    f.goal ? (f.ratio >= *f.goal ? "  (goal met)" : "  (goal missed)") : "");
        std::fflush(stdout);
        figures_.push_back(std::move(f));
    }
    void item(const std::string& id, const std::string& status, const std::string& detail, double seconds) {
        items_.push_back({{"item", id}, {"status", status}, {"detail", detail}, {"seconds", seconds}});
    }
    void missing(const std::string& id, const std::string& why) { missing_.push_back({{"item", id}, {"why", why}}); }
    [[nodiscard]] nlohmann::json to_json(nlohmann::json device) const {
        nlohmann::json figures = nlohmann::json::array();
        for (const auto& f : figures_) {
            figures.push_back(f.to_json());
        }
        return {{"schema", 1},
                {"device", std::move(device)},
                {"items", items_},
                {"figures", figures},
                {"missing", missing_}};
    }

private:
    std::vector<Figure> figures_;
    nlohmann::json items_ = nlohmann::json::array();
    nlohmann::json missing_ = nlohmann::json::array();
};

}  // namespace syncblob_bench
