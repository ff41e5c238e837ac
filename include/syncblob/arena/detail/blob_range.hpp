// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// `BlobRange`: the blobs of an arena (held through unique_ptr) seen as a range of references, to
/// each blob or to a part of it (`Get`: its shape, for `ParameterArena::shapes()`).
/// (Not std::views::transform: clang 14 cannot use libstdc++ 12's views.)

#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

// The blob itself.
struct TheBlob {
    template <class Blob>
    Blob& operator()(Blob& blob) const noexcept {
        return blob;
    }
};

template <class Blob, class Owner, class Get = TheBlob>
class BlobRange {
    using base = decltype(std::declval<Owner&>().begin());
    using got = decltype(Get{}(std::declval<Blob&>()));

public:
    class iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = std::remove_cvref_t<got>;
        using difference_type = std::ptrdiff_t;
        using reference = got;
        using pointer = std::remove_reference_t<got>*;

        iterator() = default;
        explicit iterator(base it) : it_(it) {}
        reference operator*() const { return Get{}(**it_); }
        pointer operator->() const { return &Get{}(**it_); }
        iterator& operator++() {
            ++it_;
            return *this;
        }
        iterator operator++(int) {
            iterator old = *this;
            ++it_;
            return old;
        }
        friend bool operator==(const iterator&, const iterator&) = default;

    private:
        base it_{};
    };

    explicit BlobRange(Owner& blobs) noexcept : blobs_(&blobs) {}
    [[nodiscard]] iterator begin() const { return iterator(blobs_->begin()); }
    [[nodiscard]] iterator end() const { return iterator(blobs_->end()); }
    [[nodiscard]] std::size_t size() const noexcept { return blobs_->size(); }
    [[nodiscard]] got operator[](std::size_t i) const { return Get{}(*(*blobs_)[i]); }

private:
    Owner* blobs_;
};

}  // namespace detail

SYNCBLOB_END_NAMESPACE
