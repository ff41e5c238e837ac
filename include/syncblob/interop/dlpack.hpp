// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// DLPack export and import of blobs, without copies: `to_dlpack` (DLPack 1.x,
/// `DLManagedTensorVersioned`), `to_dlpack_legacy` (`DLManagedTensor`, for consumers older than
/// DLPack 1.0 such as libtorch 1.13 and NumPy 1.24) and `from_dlpack`. See docs/interop.md.
///
/// Ownership is one rule each way. An exported tensor holds the blob's buffer (and the memory it
/// exported) until its deleter is called, exactly once, by the consumer. `from_dlpack` takes the
/// tensor over in every case: on success the blob calls the deleter when the last user of the
/// memory is gone (the blob, a blob sharing its data, a tensor exported from it again); when it
/// throws, the deleter has already been called. Either way the caller must not touch the tensor
/// afterwards.

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../blob/blob.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../core/sync_audit.hpp"
#include "../memory/synced_buffer.hpp"
#include "../sim/device.hpp"
#include "detail/dlpack_import.hpp"
#include "dlpack_abi.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace cuda {
struct Device;  // named below only: the DLPack device type of their memory needs no CUDA header
struct AsyncPool;
}  // namespace cuda

namespace dlpack {

/// Which side of a buffer to export: syncblob's own `Side` (memory/head.hpp).
using syncblob::Side;
/// Which buffer of a blob to export: syncblob's own `Part` (blob/options.hpp).
using syncblob::Part;

/// Customisation point: the DLPack device type of a device backend's memory, as `value`. None for
/// a backend without one (its device side cannot be exported, and device tensors cannot be imported
/// into its blobs). SimulatedDevice's memory is `ext_dev` (DLPack's device type for testing an
/// extension device): it is host memory, but reading it directly would bypass the simulated
/// queues, so it is not offered as CPU memory. cuda::Device's memory is `cuda`. The stream-ordered
/// pools hand out the same memory as the backends they derive from.
template <class Backend>
struct DeviceTypeOf {};
template <>
struct DeviceTypeOf<SimulatedDevice> {
    static constexpr DeviceType value = DeviceType::ext_dev;
};
template <>
struct DeviceTypeOf<SimulatedAsyncDevice> : DeviceTypeOf<SimulatedDevice> {};
template <>
struct DeviceTypeOf<cuda::Device> {
    static constexpr DeviceType value = DeviceType::cuda;
};
template <>
struct DeviceTypeOf<cuda::AsyncPool> : DeviceTypeOf<cuda::Device> {};

/// A backend whose device memory has a DLPack device type.
template <class Backend>
concept HasDeviceType = requires {
    { DeviceTypeOf<Backend>::value } -> std::convertible_to<DeviceType>;
};

namespace detail {
inline std::atomic<std::uint64_t> deleter_exception_count{0};
}  // namespace detail

/// How many exceptions the deleters of imported tensors (and of `UniqueTensor`s) have thrown in
/// this process. syncblob calls a deleter where nothing may throw (a destructor, or while another
/// exception leaves `from_dlpack`): an exception it throws is caught there and counted here, the
/// deleter counts as called (it is never called again) and whatever it did not release stays
/// with the producer. The DLPack specification gives a deleter no way to fail; this count is how a
/// program learns that one did.
[[nodiscard]] inline std::uint64_t deleter_exceptions() noexcept {
    return detail::deleter_exception_count.load(std::memory_order_relaxed);
}

// A deleter may have been set through another declaration of the ABI (dlpack.h's, a framework's,
// or syncblob's for a tensor it exported): calling it is right by the C ABI that DLPack specifies,
// which clang's -fsanitize=function (C++ type identity of the pointer) cannot see.
#if defined(__clang__)
#define SYNCBLOB_DLPACK_C_CALL __attribute__((no_sanitize("function")))
#else
#define SYNCBLOB_DLPACK_C_CALL
#endif

/// Calls a managed tensor's deleter (when it has one): the deleter of `UniqueTensor`. An
/// exception the deleter throws is caught and counted (see `deleter_exceptions`).
template <class Managed>
struct CallDeleter {
    SYNCBLOB_DLPACK_C_CALL void operator()(Managed* tensor) const noexcept {
        if (tensor != nullptr && tensor->deleter != nullptr) {
            try {
                tensor->deleter(tensor);
            } catch (...) {
                detail::deleter_exception_count.fetch_add(1, std::memory_order_relaxed);
            }
        }
    }
};
/// A managed tensor whose deleter runs when the pointer goes: `UniqueTensor<DLManagedTensorVersioned>
/// t(to_dlpack(blob));`.
template <class Managed>
using UniqueTensor = std::unique_ptr<Managed, CallDeleter<Managed>>;

/// How `from_dlpack` treats read-only memory.
struct ImportOptions {
    /// Import the memory as read-only even when the producer did not flag it (the legacy struct
    /// cannot flag it).
    bool read_only = false;
    /// A mutable access to read-only memory copies it into memory the blob owns first (and the
    /// blob stops sharing the producer's memory). By default it throws `StateError`.
    bool copy_on_write = false;
};

namespace detail {

// What an exported tensor owns: the managed struct itself, the buffer it came from, the memory it
// points to (held, so the buffer may move on to other memory meanwhile), and its shape and strides.
template <class Managed, class Buffer>
struct Exported {
    Managed managed{};
    std::shared_ptr<Buffer> buffer;
    std::shared_ptr<void> held;
    std::array<std::int64_t, Shape::max_axes> shape{};
    std::array<std::int64_t, Shape::max_axes> strides{};

    // The buffer goes first: when it was the blob's last, it lets go of the memory before the
    // tensor's hold does, so the hold, last, frees a block on the stream the consumer named.
    static void deleter(Managed* self) noexcept {
        const audit::Operation audited("dlpack deleter");
        const audit::CountOnly releasing;  // a release: its waits protect the memory, never thrown
        auto* exported = static_cast<Exported*>(self->manager_ctx);
        exported->buffer.reset();
        exported->held.reset();
        delete exported;
    }
};

template <class BlobRef>
using StreamOf = typename std::remove_const_t<BlobRef>::device_backend::stream_type;

template <class B>
inline constexpr bool is_blob = false;
template <Element T, SyncedAllocator A>
inline constexpr bool is_blob<Blob<T, A>> = true;
template <class B>
concept IsBlob = is_blob<B>;

/// A backend that can tell the device a stream belongs to (the simulator's `device_of_stream`).
template <class Backend>
concept KnowsStreamDevice = requires(typename Backend::stream_type s) {
    { Backend::device_of_stream(s) } -> std::same_as<int>;
};

// `consumer`: the stream the consumer named, or null (see to_dlpack).
template <class Managed, class BlobRef>
Managed* export_blob(const char* op, BlobRef& blob, Side side, Part part, const StreamOf<BlobRef>* consumer) {
    using BlobType = std::remove_const_t<BlobRef>;
    using T = typename BlobType::value_type;
    using Backend = typename BlobType::device_backend;
    using Buffer = typename BlobType::buffer_type;
    constexpr bool read_only = std::is_const_v<BlobRef>;

    if (!blob.has_shape()) {
        throw StateError(std::string(op) + ": the blob has no shape (DLPack has no tensor without one)");
    }
    if (consumer != nullptr && side != Side::device) {
        throw OptionError(std::string(op) + ": a consumer stream was named for the host side; host memory has no " +
                          "stream (export it without one)");
    }
    if constexpr (Backend::has_device && KnowsStreamDevice<Backend>) {
        // DLPack hands the consumer memory of one device, to be used on a stream of that device:
        // ordering and freeing it on a stream of another would reach the wrong device's pool.
        if (consumer != nullptr) {
            const int id = blob.buffer(part)->device_id();
            const int own = id >= 0 ? id : Backend::current_device();  // a new device side is made there
            const int theirs = Backend::device_of_stream(*consumer);
            if (theirs != own) {
                throw DeviceError(std::string(op) + ": the consumer stream is a stream of device " +
                                  std::to_string(theirs) + ", the exported memory is on device " + std::to_string(own) +
                                  " (name a stream of device " + std::to_string(own) + ")");
            }
        }
    }
    // Without a consumer stream the export waits for the blob's stream, as documented: asked for.
    const audit::Operation audited(op,
                                   consumer == nullptr ? audit::Waits{audit::Wait::event_synchronize} : audit::Waits{});
    DLDevice device{DeviceType::cpu, 0};
    if (side == Side::device) {
        if constexpr (!Backend::has_device) {
            throw NoDeviceError(std::string(op) + ": the device side of a host-only blob (device backend " +
                                std::string(Backend::name) + ") cannot be exported");
        } else if constexpr (!HasDeviceType<Backend>) {
            throw DeviceError(std::string(op) + ": device backend " + std::string(Backend::name) +
                              " has no DLPack device type (specialise dlpack::DeviceTypeOf)");
        } else {
            device.device_type = DeviceTypeOf<Backend>::value;
        }
    }
    auto exported = std::make_unique<Exported<Managed, Buffer>>();
    const std::shared_ptr<Buffer>& buffer = blob.buffer(part);

    // The accessor brings the side up to date; a mutable one marks the other side stale, so that
    // what the consumer writes is what the blob reads next.
    const T* p = nullptr;
    if (side == Side::host) {
        if constexpr (read_only) {
            p = (part == Part::data ? blob.host_data() : blob.host_diff()).data();
        } else {
            p = (part == Part::data ? blob.mutable_host_data() : blob.mutable_host_diff()).data();
        }
        exported->held = buffer->hold_host();
    } else if constexpr (Backend::has_device && HasDeviceType<Backend>) {
        if constexpr (read_only) {
            p = part == Part::data ? blob.device_data() : blob.device_diff();
        } else {
            p = part == Part::data ? blob.mutable_device_data() : blob.mutable_device_diff();
        }
        const int id = buffer->device_id();
        if (consumer == nullptr) {
            // The consumer may use the memory from any stream: finish what the blob's stream has queued.
            auto done = Backend::record(buffer->stream());
            Backend::wait(done);
            exported->held = buffer->hold_device();
        } else {
            // The consumer's stream waits for the blob's, the host for neither; the memory is freed
            // after the consumer's work on its stream.
            const DeviceGuard<Backend> guard(id);
            syncblob::detail::order_after<Backend>(buffer->stream(), *consumer);
            exported->held = buffer->hold_device(*consumer);
        }
        device.device_id = id >= 0 ? id : Backend::current_device();
    }
    exported->buffer = buffer;

    const Shape& shape = blob.shape();
    std::int64_t stride = 1;
    for (std::size_t i = shape.rank(); i-- > 0;) {
        exported->shape[i] = shape[i];
        exported->strides[i] = stride;
        stride *= shape[i] == 0 ? 1 : shape[i];
    }
    DLTensor& t = exported->managed.dl_tensor;
    // No elements: the specification suggests a null pointer, but libtorch 1.13 never calls the
    // deleter of a tensor whose data is null (a leak), so it points at the managed struct instead
    // (aligned for every element type, and never read: there is nothing to read).
    t.data = blob.count() == 0 ? static_cast<void*>(&exported->managed) : const_cast<T*>(p);
    t.device = device;
    t.ndim = static_cast<std::int32_t>(shape.rank());
    t.dtype = dl_data_type<T>;
    t.shape = exported->shape.data();
    t.strides = exported->strides.data();
    t.byte_offset = 0;
    exported->managed.manager_ctx = exported.get();
    exported->managed.deleter = &Exported<Managed, Buffer>::deleter;
    if constexpr (std::same_as<Managed, DLManagedTensorVersioned>) {
        exported->managed.version = abi_version;
        exported->managed.flags = read_only ? flag_read_only : 0;
    }
    return &exported.release()->managed;
}

// Calls the deleter of the managed tensor a shared_ptr<void> points to.
template <class Managed>
struct DeleterCall {
    void operator()(void* tensor) const noexcept { CallDeleter<Managed>{}(static_cast<Managed*>(tensor)); }
};

// Throws FormatError when one of the `n` bytes of a bool tensor at `data` is neither 0 nor 1
// (reading such a byte as bool is undefined behaviour). Device memory is read through host
// chunks of at most 1 MiB.
template <DeviceBackend Backend>
void check_bools(const bool* data, std::size_t n, bool on_device) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    if (!on_device) {
        check_bool_bytes({bytes, n}, 0);
        return;
    }
    if constexpr (Backend::has_device) {
        std::vector<unsigned char> chunk(std::min<std::size_t>(n, std::size_t{1} << 20));
        for (std::size_t first = 0; first < n; first += chunk.size()) {
            const std::size_t m = std::min(chunk.size(), n - first);
            Backend::copy(chunk.data(), bytes + first, m, CopyKind::device_to_host, Backend::default_stream());
            check_bool_bytes({chunk.data(), m}, first);
        }
    }
}

// True when memory of device type `type` is the device side of a blob with `Backend`, false when it
// is the host side. \throws NoDeviceError / DeviceError for memory such a blob cannot hold.
template <DeviceBackend Backend>
bool imports_on_device(DeviceType type) {
    const std::string op = import_op;
    if (type == DeviceType::cpu || type == DeviceType::cuda_host || type == DeviceType::cuda_managed) {
        return false;
    } else if constexpr (!Backend::has_device) {
        throw NoDeviceError(op + ": " + device_type_string(type) +
                            " memory cannot be imported into a host-only blob (device backend " +
                            std::string(Backend::name) + "); host blobs import CPU, CUDAHost and CUDAManaged memory");
    } else if constexpr (!HasDeviceType<Backend>) {
        throw DeviceError(op + ": device backend " + std::string(Backend::name) +
                          " has no DLPack device type (specialise dlpack::DeviceTypeOf)");
    } else if (type == DeviceTypeOf<Backend>::value) {
        return true;
    } else {
        throw DeviceError(op + ": " + device_type_string(type) + " memory cannot be imported into a blob " +
                          "with device backend " + std::string(Backend::name) + ", which takes CPU, CUDAHost, " +
                          "CUDAManaged and " + device_type_string(DeviceTypeOf<Backend>::value) + " memory");
    }
}

// The tensor's first element, checked: not null, its byte range addressable (see first_element),
// aligned for T, on the device the tensor names; for bool, every byte 0 or 1. Null when the
// tensor has no elements.
template <Element T, DeviceBackend Backend>
T* import_data(const DLTensor& t, std::int64_t count, bool on_device) {
    const std::string op = import_op;
    if (count == 0) {
        return nullptr;
    }
    if (t.data == nullptr) {
        throw FormatError(op + ": data is null for a tensor of " + std::to_string(count) + " elements");
    }
    const std::uintptr_t first = first_element(t, count, sizeof(T));
    if (first % alignof(T) != 0) {
        throw FormatError(op + ": data + byte_offset (" + std::to_string(t.byte_offset) + ") is not aligned for " +
                          std::string(element_name<T>()) + " (" + std::to_string(alignof(T)) + " bytes)");
    }
    T* data = reinterpret_cast<T*>(first);
    if constexpr (Backend::has_device) {
        if (on_device && Backend::device_of(data) != t.device.device_id) {
            throw DeviceError(op + ": the tensor names device " + std::to_string(t.device.device_id) +
                              " but its memory is on device " + std::to_string(Backend::device_of(data)));
        }
    }
    if constexpr (std::same_as<T, bool>) {
        check_bools<Backend>(data, static_cast<std::size_t>(count), on_device);
    }
    return data;
}

// Builds the blob over the tensor's memory. `owner` calls the deleter when the last user is gone;
// on an exception it is dropped here, so the deleter has run when the exception leaves.
template <Element T, SyncedAllocator A>
Blob<T, A> import_tensor(const DLTensor& t, bool read_only, ImportOptions options, std::shared_ptr<void> owner) {
    using Backend = typename A::device_backend;
    if (t.dtype != dl_data_type<T>) {
        throw FormatError(std::string(import_op) + ": dtype is " + dtype_string(t.dtype) + ", the blob holds " +
                          std::string(element_name<T>()) + " (" + dtype_string(dl_data_type<T>) + ")");
    }
    const Shape shape = import_shape(t);
    const bool on_device = imports_on_device<Backend>(t.device.device_type);
    T* data = import_data<T, Backend>(t, shape.count(), on_device);
    Blob<T, A> blob(shape);
    Borrow borrow{std::move(owner), read_only, read_only && !options.copy_on_write};
    const auto count = static_cast<std::size_t>(shape.count());
    if (on_device) {
        blob.set_device_data(data, count, std::move(borrow));
    } else {
        blob.set_host_data(data, count, std::move(borrow));
    }
    return blob;
}

}  // namespace detail

/// Exports the blob's data (or diff) as a DLPack 1.x tensor over its memory, host or device side
/// as asked, without copying. The side is brought up to date first; exported through a non-const
/// blob it is exported for writing and marked as the fresh one (as `mutable_host_data()` /
/// `mutable_device_data()` do), so what the consumer writes is what the blob reads next; exported
/// through a const blob it is only read and the tensor carries `flag_read_only`. The device side
/// is synchronised with the blob's stream: the host waits for it (the form below, for a consumer
/// that names its stream, does not). When the consumer's deleter runs after the blob let go of
/// the memory, the block is freed by the backend's synchronous `deallocate` (for
/// `cuda::AsyncPool`, after a device-wide wait): the consumer may have used it from any stream. The tensor keeps the
/// buffer and the exported memory alive until the consumer calls its deleter, even if the blob is reshaped, destroyed,
/// or given other memory meanwhile. Host memory is `CPU` memory; device memory is the backend's `DeviceTypeOf` (see
/// there). \throws StateError for a blob without a shape; NoDeviceError / DeviceError for the device side of a backend
/// without a DLPack device type; whatever the accessor throws (nothing is exported).
template <class BlobRef>
requires detail::IsBlob<std::remove_const_t<BlobRef>>
[[nodiscard]] DLManagedTensorVersioned* to_dlpack(BlobRef& blob, Side side = Side::host, Part part = Part::data) {
    return detail::export_blob<DLManagedTensorVersioned>("dlpack::to_dlpack", blob, side, part, nullptr);
}

/// Exports the device side for a consumer that uses it on `consumer`, a stream of the device the
/// memory lives on (DLPack's stream exchange: Python's `__dlpack__(stream=...)`). As above, but
/// nothing waits on the host: `consumer` is made to wait for the work queued so far on the blob's
/// stream, so the consumer's work issued there after this call sees the blob's writes. When the
/// consumer's deleter runs after the blob has let go of the memory, the block is freed after the
/// consumer's work queued on `consumer` so far, on `consumer`, in stream order (with a
/// stream-ordered backend such as `cuda::AsyncPool`: `cudaFreeAsync` there, no device-wide wait);
/// when the blob lets go last, it frees the block on its own stream after the consumer's work. A
/// backend without stream-ordered frees (`cuda::Device`, `SimulatedDevice`) makes the host wait
/// for those streams before its synchronous free instead. The deleter must run once the
/// consumer's work on the memory has been issued on `consumer`, and the blob's own later work on
/// the memory, if any, is the caller's to order with the consumer's (as with any shared memory).
/// \throws OptionError for the host side (host memory has no stream); DeviceError, before anything
/// is touched, when `consumer` is a stream of another device than the memory's, on a backend that
/// can tell a stream's device (`SimulatedDevice`; `cuda::Device` cannot: there it is the caller's
/// to name a stream of the blob's device); as above otherwise.
template <class BlobRef>
requires detail::IsBlob<std::remove_const_t<BlobRef>>
[[nodiscard]] DLManagedTensorVersioned* to_dlpack(BlobRef& blob, Side side, Part part,
                                                  detail::StreamOf<BlobRef> consumer) {
    return detail::export_blob<DLManagedTensorVersioned>("dlpack::to_dlpack", blob, side, part, &consumer);
}

/// Exports as the legacy `DLManagedTensor`, for consumers older than DLPack 1.0 (libtorch 1.13,
/// NumPy 1.24). As `to_dlpack`, but the legacy struct has neither version nor flags: it cannot say
/// "read-only". Through a const blob the consumer still gets writable memory, and exporting a const
/// blob this way is the caller's promise that the consumer will not write it (a write would change
/// the blob behind the state machine's back).
template <class BlobRef>
requires detail::IsBlob<std::remove_const_t<BlobRef>>
[[nodiscard]] DLManagedTensor* to_dlpack_legacy(BlobRef& blob, Side side = Side::host, Part part = Part::data) {
    return detail::export_blob<DLManagedTensor>("dlpack::to_dlpack_legacy", blob, side, part, nullptr);
}

/// The legacy struct for a consumer that names its stream: as `to_dlpack(blob, side, part, consumer)`.
template <class BlobRef>
requires detail::IsBlob<std::remove_const_t<BlobRef>>
[[nodiscard]] DLManagedTensor* to_dlpack_legacy(BlobRef& blob, Side side, Part part,
                                                detail::StreamOf<BlobRef> consumer) {
    return detail::export_blob<DLManagedTensor>("dlpack::to_dlpack_legacy", blob, side, part, &consumer);
}

/// Imports a DLPack tensor (`DLManagedTensorVersioned` or the legacy `DLManagedTensor`, syncblob's
/// declarations or any layout-identical one such as `<dlpack/dlpack.h>`'s) as a blob of `T` whose
/// data borrows the tensor's memory, without copying: CPU, CUDAHost and CUDAManaged memory as the
/// host side, the backend's own device type (see `DeviceTypeOf`) as the device side. The diff is
/// the blob's own.
///
/// The blob takes the tensor over: its deleter runs exactly once, when the last user of the
/// memory is gone; if this function throws, it has already run. Memory flagged read-only (or
/// imported with `options.read_only`) refuses mutable access with `StateError`, unless
/// `options.copy_on_write` asks that such an access copy it into owned memory first.
///
/// Accepted: the dtype of `T` (one lane), 0 to 32 axes, null strides or C-contiguous ones (an
/// axis of extent 1 may have any stride; so may the axes of an empty tensor), a byte_offset that
/// leaves the data aligned for `T` and, with the extents, a byte range that neither passes the end
/// of the address space nor lies more than PTRDIFF_MAX bytes from `data`, a null data pointer when
/// there are no elements. A bool tensor's bytes are read once (device memory through host chunks):
/// each must be 0 or 1, as a C++ `bool` must.
/// \throws FormatError for a null tensor, an unknown major version, a null shape or data pointer,
/// a dtype other than `T`'s, misaligned data, a byte_offset whose range overflows, or a bool byte
/// other than 0 and 1; ShapeError for bad extents, too many axes, strides that are not
/// C-contiguous, or extents whose bytes exceed the addressable size; NoDeviceError / DeviceError
/// for memory the blob's backend cannot hold. Each message names the field and what was expected.
/// A deleter that throws is caught and counted (`deleter_exceptions`); the exception that left
/// `from_dlpack`, if any, is the one that reaches the caller.
template <Element T, SyncedAllocator A = HostOnly, class Managed>
requires detail::AnyManagedTensor<Managed>
[[nodiscard]] Blob<T, A> from_dlpack(Managed* tensor, ImportOptions options = {}) {
    if (tensor == nullptr) {
        throw FormatError("dlpack::from_dlpack: null tensor");
    }
    // Owning the tensor first: whatever happens next, its deleter runs once.
    std::shared_ptr<void> owner(static_cast<void*>(tensor), detail::DeleterCall<Managed>{});
    bool read_only = options.read_only;
    if constexpr (detail::AnyVersionedTensor<Managed>) {
        if (tensor->version.major != abi_version.major) {  // nothing past the deleter may be read
            throw FormatError("dlpack::from_dlpack: DLPack ABI version " + std::to_string(tensor->version.major) + "." +
                              std::to_string(tensor->version.minor) + ", syncblob reads " +
                              std::to_string(abi_version.major) + ".x (the tensor was released)");
        }
        read_only = read_only || (tensor->flags & flag_read_only) != 0;
    }
    return detail::import_tensor<T, A>(detail::as_tensor(tensor->dl_tensor), read_only, options, std::move(owner));
}

}  // namespace dlpack

SYNCBLOB_END_NAMESPACE
