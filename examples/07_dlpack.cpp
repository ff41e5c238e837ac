// DLPack: lending a blob's memory to another library (libtorch, NumPy, CuPy, JAX…) and borrowing
// theirs, without copying. The consumer and producer here are syncblob itself, so that the program
// runs anywhere; tests/interop/ does the same with libtorch and NumPy.
#include <iostream>
#include <syncblob/interop/dlpack.hpp>
#include <syncblob/syncblob.hpp>
#include <utility>

using namespace syncblob;
namespace dl = syncblob::dlpack;

int main() {
    // [export]
    // Export: the tensor describes the blob's host data (brought up to date first) and keeps it
    // alive until the consumer calls the deleter, exactly once.
    Blob<float> weights{2, 3};
    weights.fill(1.0f);
    dl::DLManagedTensorVersioned* tensor = dl::to_dlpack(weights);
    const dl::DLTensor& t = tensor->dl_tensor;
    std::cout << "exported: ndim " << t.ndim << ", shape " << t.shape[0] << " x " << t.shape[1] << ", "
              << dl::dtype_string(t.dtype) << ", " << dl::device_type_string(t.device.device_type) << '\n';
    static_cast<float*>(t.data)[0] = 5.0f;  // the consumer writes: the blob sees it
    tensor->deleter(tensor);                // the consumer is done
    std::cout << "weights[0] = " << weights.host_data()[0] << '\n';
    // [export]

    // [import]
    // Import: the blob borrows the producer's memory and calls its deleter when the last user of
    // the memory is gone. (Here the producer is another blob; at::toDLPack(tensor) works the same.)
    Blob<float> activations{4};
    activations.fill(2.0f);
    Blob<float> borrowed = dl::from_dlpack<float>(dl::to_dlpack(activations));
    borrowed.mutable_host_data()[3] = 7.0f;
    std::cout << "same memory: " << std::boolalpha << (borrowed.host_data().data() == activations.host_data().data())
              << ", activations[3] = " << activations.host_data()[3] << '\n';
    // [import]

    // [read-only]
    // Exported through a const blob, the tensor is flagged read-only; imported, such a tensor
    // refuses writes unless the import asked for copy-on-write.
    const Blob<float>& frozen = weights;
    Blob<float> view = dl::from_dlpack<float>(dl::to_dlpack(frozen));
    try {
        view.mutable_host_data()[0] = 0.0f;
    } catch (const StateError& e) {
        std::cout << "error: " << e.what() << '\n';
    }
    Blob<float> own = dl::from_dlpack<float>(dl::to_dlpack(frozen), {.copy_on_write = true});
    own.mutable_host_data()[0] = -1.0f;  // copies first: weights stays as it was
    std::cout << "copy on write: own[0] = " << own.host_data()[0] << ", weights[0] = " << weights.host_data()[0]
              << '\n';
    // [read-only]

    // [strides]
    // Only C-contiguous tensors import; anything else is an error that says what was wrong, and
    // the tensor is released all the same.
    Blob<float> matrix{2, 3};
    dl::DLManagedTensorVersioned* transposed = dl::to_dlpack(matrix);
    std::swap(transposed->dl_tensor.shape[0], transposed->dl_tensor.shape[1]);  // a transposed view:
    transposed->dl_tensor.strides[0] = 1;                                       // shape 3 x 2,
    transposed->dl_tensor.strides[1] = 3;                                       // strides (1, 3)
    try {
        (void)dl::from_dlpack<float>(transposed);
    } catch (const ShapeError& e) {
        std::cout << "error: " << e.what() << '\n';
    }
    std::cout << "exports of matrix still held: " << matrix.data_buffer().use_count() - 1 << '\n';
    // [strides]
}
