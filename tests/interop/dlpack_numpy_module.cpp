// SPDX-License-Identifier: BSD-2-Clause
// A small Python extension (pybind11) that hands out syncblob blobs through the Python DLPack
// protocol, for test_dlpack_numpy.py to check against NumPy's np.from_dlpack:
//
//   Blob<T> classes (F32, F64, F16, I8, I32, I64, U8) with __dlpack__(*, stream, max_version,
//   dl_device, copy) and __dlpack_device__(); readonly() gives a view exported through a const
//   blob; from_dlpack(obj) imports any object with __dlpack__ (a NumPy array) into a blob.
//
// Capsules follow the protocol: "dltensor" (legacy, when the caller gives no max_version or one
// below 1.0, as NumPy 1.24 does) or "dltensor_versioned"; a consumer renames the capsule to
// "used_dltensor(_versioned)" when it takes the tensor over, and the capsule's destructor calls
// the deleter only of a tensor nobody took.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <syncblob/interop/dlpack.hpp>
#include <utility>
#include <vector>

namespace py = pybind11;
namespace dl = syncblob::dlpack;
using syncblob::Blob;

namespace {

constexpr const char* legacy_name = "dltensor";
constexpr const char* versioned_name = "dltensor_versioned";
constexpr const char* used_legacy_name = "used_dltensor";
constexpr const char* used_versioned_name = "used_dltensor_versioned";

template <class Managed>
void release_unused(PyObject* capsule, const char* name) {
    if (PyCapsule_IsValid(capsule, name) != 0) {  // not taken over by a consumer
        dl::CallDeleter<Managed>{}(static_cast<Managed*>(PyCapsule_GetPointer(capsule, name)));
    }
}

template <class Managed>
py::object capsule_of(Managed* tensor) {
    constexpr bool versioned = std::is_same_v<Managed, dl::DLManagedTensorVersioned>;
    PyCapsule_Destructor destructor = versioned ? [](PyObject* c) { release_unused<Managed>(c, versioned_name); }
                                                : [](PyObject* c) { release_unused<Managed>(c, legacy_name); };
    PyObject* capsule = PyCapsule_New(tensor, versioned ? versioned_name : legacy_name, destructor);
    if (capsule == nullptr) {
        dl::CallDeleter<Managed>{}(tensor);
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
}

// The protocol's arguments: CPU memory only, never a copy; a legacy capsule unless the caller
// reads DLPack 1.x.
bool wants_versioned(const py::object& max_version, const py::object& dl_device, const py::object& copy) {
    if (!copy.is_none() && copy.cast<bool>()) {
        throw py::buffer_error("syncblob blobs are exported without copying (copy=True is not supported)");
    }
    if (!dl_device.is_none()) {
        const auto device = dl_device.cast<std::pair<int, int>>();
        if (device != std::pair<int, int>{static_cast<int>(dl::DeviceType::cpu), 0}) {
            throw py::buffer_error("syncblob host blobs live on the CPU (device (1, 0))");
        }
    }
    return !max_version.is_none() && max_version.cast<std::pair<int, int>>().first >= 1;
}

template <class T>
struct PyBlob {
    std::shared_ptr<Blob<T>> blob;

    py::object dlpack(const py::object& /*stream*/, const py::object& max_version, const py::object& dl_device,
                      const py::object& copy) {
        if (wants_versioned(max_version, dl_device, copy)) {
            return capsule_of(dl::to_dlpack(*blob));
        }
        return capsule_of(dl::to_dlpack_legacy(*blob));
    }
};

// A blob exported through a const reference: read-only. The legacy struct cannot say so, so only
// a DLPack 1.x consumer gets it (as NumPy itself does for its read-only arrays).
template <class T>
struct ReadOnlyView {
    std::shared_ptr<Blob<T>> blob;

    py::object dlpack(const py::object& /*stream*/, const py::object& max_version, const py::object& dl_device,
                      const py::object& copy) {
        if (!wants_versioned(max_version, dl_device, copy)) {
            throw py::buffer_error(
                "a read-only blob is exported only as a DLPack 1.x tensor (pass max_version=(1, 0) or later): "
                "the legacy struct cannot mark it read-only");
        }
        return capsule_of(dl::to_dlpack(std::as_const(*blob)));
    }
};

template <class T>
double as_double(T v) {
    if constexpr (std::is_same_v<T, syncblob::half> || std::is_same_v<T, syncblob::bfloat16>) {
        return static_cast<double>(static_cast<float>(v));
    } else {
        return static_cast<double>(v);
    }
}

template <class T>
T from_double(double v) {
    if constexpr (std::is_same_v<T, syncblob::half> || std::is_same_v<T, syncblob::bfloat16>) {
        return T(static_cast<float>(v));
    } else {
        return static_cast<T>(v);
    }
}

// Takes a tensor over from an object with __dlpack__: asks for DLPack 1.x first and falls back to
// the legacy capsule for producers that do not know max_version (NumPy 1.24).
template <class T>
PyBlob<T> import_from(const py::object& producer) {
    py::object capsule;
    try {
        capsule = producer.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(1, 0));
    } catch (const py::error_already_set& e) {
        if (!e.matches(PyExc_TypeError)) {
            throw;
        }
        capsule = producer.attr("__dlpack__")();
    }
    PyObject* c = capsule.ptr();
    // The capsule is renamed before the import: from_dlpack takes the tensor over even when it
    // throws, so the capsule must not release it again.
    if (PyCapsule_IsValid(c, versioned_name) != 0) {
        auto* tensor = static_cast<dl::DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, versioned_name));
        PyCapsule_SetName(c, used_versioned_name);
        return PyBlob<T>{std::make_shared<Blob<T>>(dl::from_dlpack<T>(tensor))};
    }
    if (PyCapsule_IsValid(c, legacy_name) != 0) {
        auto* tensor = static_cast<dl::DLManagedTensor*>(PyCapsule_GetPointer(c, legacy_name));
        PyCapsule_SetName(c, used_legacy_name);
        return PyBlob<T>{std::make_shared<Blob<T>>(dl::from_dlpack<T>(tensor))};
    }
    throw py::type_error("__dlpack__ returned no unused DLPack capsule");
}

template <class T>
void bind(py::module_& m, const char* name) {
    using Self = PyBlob<T>;
    const auto protocol = [](auto& cls) {
        cls.def("__dlpack__", &std::remove_reference_t<decltype(cls)>::type::dlpack, py::kw_only(),
                py::arg("stream") = py::none(), py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
                py::arg("copy") = py::none());
        cls.def("__dlpack_device__",
                [](const py::object&) { return py::make_tuple(static_cast<int>(dl::DeviceType::cpu), 0); });
    };
    py::class_<ReadOnlyView<T>> view(m, (std::string(name) + "ReadOnly").c_str());
    protocol(view);

    py::class_<Self> cls(m, name);
    cls.def(py::init([](const std::vector<std::int64_t>& shape) {
        return Self{std::make_shared<Blob<T>>(syncblob::Shape(shape))};
    }));
    protocol(cls);
    cls.def_static("from_dlpack", &import_from<T>, "Imports an object with __dlpack__ into a blob, without copying");
    cls.def("readonly", [](const Self& self) { return ReadOnlyView<T>{self.blob}; });
    cls.def_property_readonly("shape", [](const Self& self) {
        const auto extents = self.blob->shape().extents();
        return std::vector<std::int64_t>(extents.begin(), extents.end());
    });
    cls.def("values", [](const Self& self) {
        std::vector<double> out;
        for (T v : self.blob->host_data()) {
            out.push_back(as_double(v));
        }
        return out;
    });
    cls.def("set", [](Self& self, std::size_t i, double v) { self.blob->mutable_host_data()[i] = from_double<T>(v); });
    cls.def("fill_range", [](Self& self) {
        auto host = self.blob->mutable_host_data();
        for (std::size_t i = 0; i < host.size(); ++i) {
            host[i] = from_double<T>(static_cast<double>(i));
        }
    });
    cls.def("host_address",
            [](const Self& self) { return reinterpret_cast<std::uintptr_t>(self.blob->host_data().data()); });
    cls.def(
        "exports", [](const Self& self) { return self.blob->data_buffer().use_count() - 1; },
        "Exported tensors not yet released (holders of the data buffer besides the blob)");
}

}  // namespace

PYBIND11_MODULE(syncblob_dlpack_numpy, m) {
    m.doc() = "syncblob blobs through the Python DLPack protocol (a test module)";
    bind<float>(m, "BlobF32");
    bind<double>(m, "BlobF64");
    bind<syncblob::half>(m, "BlobF16");
    bind<std::int8_t>(m, "BlobI8");
    bind<std::int32_t>(m, "BlobI32");
    bind<std::int64_t>(m, "BlobI64");
    bind<std::uint8_t>(m, "BlobU8");
    m.def("capsule_info", [](const py::object& capsule) {
        // The fields of an unused versioned capsule, read without taking it over.
        auto* t = static_cast<dl::DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), versioned_name));
        if (t == nullptr) {
            throw py::error_already_set();
        }
        return py::dict(py::arg("major") = t->version.major, py::arg("minor") = t->version.minor,
                        py::arg("flags") = t->flags, py::arg("ndim") = t->dl_tensor.ndim);
    });
}
