// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The strong guarantee of every loader, in one place. A loader parses and validates its input,
/// then reads (or converts, or borrows) the contents into a blob built aside — fresh buffers of the
/// file's shape on the target's stream — and commits them to the target with `Blob::commit`, a
/// step that cannot fail, only when everything has succeeded: data and diff together. An
/// allocation that fails, a file cut short under an open reader or an I/O error leaves the
/// target's shape, values and heads as they were.

#include <span>

#include "../../blob/blob.hpp"
#include "../../core/error.hpp"
#include "../../core/shape.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

template <Element T, SyncedAllocator A>
class StagedLoad {
public:
    using buffer_type = typename Blob<T, A>::buffer_type;

    /// Fresh, unallocated storage of `shape` on `target`'s stream. \throws std::bad_alloc;
    /// StateError when `target`'s layout is fixed (`Blob::fix_layout`) and `shape` is not its shape.
    StagedLoad(const Blob<T, A>& target, const Shape& shape) {
        if (target.layout_fixed() && (!target.has_shape() || shape != target.shape())) {
            throw StateError("load: the file holds shape " + shape.to_string() + ", the blob " + target.shape_string() +
                             ", whose shape and buffers are fixed by " + target.layout_owner() +
                             " (such a blob loads only its own shape)");
        }
        staged_.set_stream(target.stream());
        staged_.reshape(shape);
    }

    /// The data, to be overwritten whole (no zero-fill); it replaces the target's at commit.
    [[nodiscard]] std::span<T> data() {
        take_data_ = true;
        return staged_.mutable_host_data_for_overwrite();
    }
    /// The diff, to be overwritten whole; it replaces the target's at commit.
    [[nodiscard]] std::span<T> diff() {
        take_diff_ = true;
        return staged_.mutable_host_diff_for_overwrite();
    }
    /// The data (or diff) buffer itself, for lending it memory (a mapped file's pages).
    [[nodiscard]] buffer_type& buffer(bool diff) {
        (diff ? take_diff_ : take_data_) = true;
        return diff ? *staged_.diff_buffer() : *staged_.data_buffer();
    }

    /// Gives `target` the staged shape and every part written; a part not written keeps reshape's
    /// rule (kept when it fits, fresh otherwise). A target whose layout is fixed keeps its buffers:
    /// the parts written are copied into them (data, then diff), which needs no allocation where the
    /// blob's memory exists; only a failing device could then leave the data copied and the diff not.
    void commit(Blob<T, A>& target) {
        if (target.layout_fixed()) {
            if (take_data_) {
                target.copy_from(staged_);
            }
            if (take_diff_) {
                target.copy_from(staged_, Part::diff);
            }
            return;
        }
        target.commit(std::move(staged_), {.data = take_data_, .diff = take_diff_});
    }

private:
    Blob<T, A> staged_;
    bool take_data_ = false;
    bool take_diff_ = false;
};

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
