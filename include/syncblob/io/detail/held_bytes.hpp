// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The bytes a writer saves later, kept alive by the writer itself: the host side of a blob's
/// buffer (shared with the blob, read when the writer saves) or a copy of raw bytes. So nothing a
/// writer saves can be freed under it by the caller's ordinary code: a blob moved by a growing
/// vector, destroyed, or given new storage.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

class HeldBytes {
public:
    HeldBytes() = default;

    /// The first `bytes` bytes of `buffer` (a `SyncedBuffer`), which it holds.
    template <class Buffer>
    [[nodiscard]] static HeldBytes of(const std::shared_ptr<Buffer>& buffer, std::uint64_t bytes) {
        HeldBytes h;
        h.size_ = bytes;
        if (bytes != 0) {
            h.owner_ = buffer;
            h.view_ = [](const void* owner) {
                const auto* b = static_cast<const Buffer*>(owner);
                return std::span<const std::byte>(static_cast<const std::byte*>(b->host_data()), b->size());
            };
        }
        return h;
    }

    /// A copy of `bytes`.
    [[nodiscard]] static HeldBytes copy_of(std::span<const std::byte> bytes) {
        HeldBytes h;
        h.size_ = bytes.size();
        if (!bytes.empty()) {
            h.owner_ = std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
            h.view_ = [](const void* owner) {
                const auto* v = static_cast<const std::vector<std::byte>*>(owner);
                return std::span<const std::byte>(v->data(), v->size());
            };
        }
        return h;
    }

    [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

    /// The bytes as they are now (a blob's buffer synchronised to the host first). \throws
    /// StateError naming tensor `name` when the storage holds fewer bytes than it did when held.
    [[nodiscard]] std::span<const std::byte> read(std::string_view name) const {
        if (size_ == 0) {
            return {};
        }
        const auto bytes = view_(owner_.get());
        if (bytes.size() < size_) {
            throw StateError("save: tensor \"" + std::string(name) + "\" was added with " + std::to_string(size_) +
                             " bytes, but its storage now holds " + std::to_string(bytes.size()));
        }
        return bytes.first(static_cast<std::size_t>(size_));
    }

private:
    std::shared_ptr<const void> owner_;
    std::span<const std::byte> (*view_)(const void*) = nullptr;
    std::uint64_t size_ = 0;
};

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
