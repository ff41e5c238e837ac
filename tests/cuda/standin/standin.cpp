// SPDX-License-Identifier: BSD-2-Clause
// A stand-in for the CUDA runtime, cuBLAS and NCCL that syncblob's CUDA backend calls: every call runs
// at once on host memory ("device" memory is host memory), and is counted by name. A test program of the
// backend's host code links this instead of libcudart, libcublas and libnccl, and can then count, with no
// GPU, every synchronisation, synchronous copy and allocation a code path makes (standin.hpp). It
// models devices (one unless a test asks for more: each thread has its own current one, each stream,
// event and device block is the device current when it was made, and an event is recorded only on a
// stream of its own device, as CUDA requires), streams and events that are always complete (work runs
// when issued), and a memory pool that reuses freed blocks of the same size, as cudaMemPool does,
// reporting its reserved bytes. Only the calls syncblob makes, and the few a test needs to make a communicator, exist
// here. NCCL: `ncclCommInitAll` of N makes N ranks of one communicator, each driven by a thread of its own; a
// collective runs when every rank has called it (the last to arrive runs it for all, the others wait), as the ranks'
// kernels would meet on a GPU.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "standin.hpp"

struct CUstream_st {
    int device = 0;  // the device current when it was made
};
struct CUevent_st {
    int device = 0;
};
struct CUmemPoolHandle_st {
    std::map<std::size_t, std::vector<void*>> free_blocks;  // by size: blocks freed, kept for reuse
    std::uint64_t reserved = 0;
};
struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
};
namespace {
// The ranks of one ncclCommInitAll, and the collective they are meeting in.
struct Clique {
    struct Call {
        std::string kind;
        const void* send = nullptr;
        void* recv = nullptr;
        std::size_t count = 0;
        ncclDataType_t type = ncclUint8;
        ncclRedOp_t op = ncclSum;
        int root = 0;
    };
    explicit Clique(int n) : size(n), calls(static_cast<std::size_t>(n)) {}
    std::mutex mutex;
    std::condition_variable met;
    int size;
    int arrived = 0;
    std::uint64_t generation = 0;  // collectives completed
    ncclResult_t result = ncclSuccess;
    std::vector<Call> calls;  // by rank
};
}  // namespace

struct ncclComm {
    int rank = 0;
    std::shared_ptr<Clique> clique;
};

namespace {

thread_local int current_device = 0;  // as CUDA's: each thread's own

struct State {
    std::mutex mutex;
    std::map<std::string, std::uint64_t> calls;
    std::map<const void*, std::uint64_t> frees_on;                     // cudaFreeAsync calls, by stream
    std::map<const void*, std::pair<std::size_t, int>> device_blocks;  // cudaMalloc and pool blocks: bytes, device
    std::atomic<int> devices{1};
    std::mutex pools;              // the memory pools' own lock (the driver's, on a GPU)
    std::uint64_t capacity = 0;    // device memory; 0: unlimited
    std::uint64_t pool_bytes = 0;  // reserved by every pool
};

State& state() {
    static State s;
    return s;
}

void count(const char* name) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    ++s.calls[name];
}

void add_block(const void* p, std::size_t bytes) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    s.device_blocks[p] = {bytes, current_device};
}

bool remove_block(const void* p) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    return s.device_blocks.erase(p) != 0;
}

// The device of the device block `p` points into; -1 when it points into none.
int device_block(const void* p) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    auto it = s.device_blocks.upper_bound(p);
    if (it == s.device_blocks.begin()) {
        return -1;
    }
    --it;
    return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second.first ? it->second.second
                                                                                                : -1;
}

bool is_device(const void* p) {
    return device_block(p) >= 0;
}

void* host_block(std::size_t bytes) {
    return ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{256});
}
void free_host_block(void* p) {
    ::operator delete (p, std::align_val_t{256});
}

}  // namespace

namespace syncblob_standin {

std::uint64_t calls(const std::string& name) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    const auto it = s.calls.find(name);
    return it == s.calls.end() ? 0 : it->second;
}

std::map<std::string, std::uint64_t> all_calls() {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    return s.calls;
}

std::uint64_t frees_on(const void* stream) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    const auto it = s.frees_on.find(stream);
    return it == s.frees_on.end() ? 0 : it->second;
}

void reset() {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    s.calls.clear();
    s.frees_on.clear();
}

void set_device_count(int devices) {
    state().devices.store(devices < 1 ? 1 : devices);
}

void set_device_capacity(std::uint64_t bytes) {
    auto& s = state();
    const std::lock_guard lock(s.pools);
    s.capacity = bytes;
}

}  // namespace syncblob_standin

extern "C" {

// ---- devices and errors ------------------------------------------------------------------------------
cudaError_t cudaGetLastError(void) {
    return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t) {
    return "stand-in error";
}
const char* cudaGetErrorName(cudaError_t) {
    return "cudaErrorStandIn";
}
cudaError_t cudaGetDeviceCount(int* count) {
    *count = state().devices.load();
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
    *device = current_device;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= state().devices.load()) {
        return cudaErrorInvalidDevice;
    }
    current_device = device;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr, int) {
    *value = 1;  // memory pools (and anything else asked) supported
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    count("cudaDeviceSynchronize");
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
    *attributes = cudaPointerAttributes{};
    const int device = device_block(ptr);
    attributes->type = device >= 0 ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    attributes->device = device >= 0 ? device : current_device;
    return cudaSuccess;
}

// ---- memory --------------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, size_t size) {
    count("cudaMalloc");
    *p = host_block(size);
    add_block(*p, size);
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    count("cudaFree");
    if (p != nullptr && remove_block(p)) {
        free_host_block(p);
    }
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t size) {
    count("cudaMallocHost");
    *p = host_block(size);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
    count("cudaFreeHost");
    free_host_block(p);
    return cudaSuccess;
}
cudaError_t cudaHostRegister(void*, size_t, unsigned int) {
    count("cudaHostRegister");
    return cudaSuccess;
}
cudaError_t cudaHostUnregister(void*) {
    return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const struct cudaMemPoolProps*) {
    *pool = new CUmemPoolHandle_st;
    return cudaSuccess;
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
    for (auto& [size, blocks] : pool->free_blocks) {
        for (void* b : blocks) {
            remove_block(b);
            free_host_block(b);
        }
    }
    delete pool;
    return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, enum cudaMemPoolAttr, void*) {
    return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
    const std::lock_guard lock(state().pools);
    auto* out = static_cast<std::uint64_t*>(value);
    *out = attr == cudaMemPoolAttrReservedMemCurrent || attr == cudaMemPoolAttrReservedMemHigh ? pool->reserved : 0;
    return cudaSuccess;
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t) {
    count("cudaMemPoolTrimTo");
    const std::lock_guard lock(state().pools);
    for (auto& [size, blocks] : pool->free_blocks) {
        for (void* b : blocks) {
            remove_block(b);
            free_host_block(b);
            pool->reserved -= size;
            state().pool_bytes -= size;
        }
        blocks.clear();
    }
    return cudaSuccess;
}

extern "C++" {  // a C++ helper inside the C block: C++ linkage for its C++ return type
namespace {
std::map<void*, std::pair<cudaMemPool_t, std::size_t>>& pool_blocks() {
    static std::map<void*, std::pair<cudaMemPool_t, std::size_t>> blocks;
    return blocks;
}
}  // namespace
}  // extern "C++"

cudaError_t cudaMallocFromPoolAsync(void** p, size_t size, cudaMemPool_t pool, cudaStream_t) {
    count("cudaMallocFromPoolAsync");
    auto& s = state();
    const std::lock_guard lock(s.pools);
    auto& cached = pool->free_blocks[size];
    if (!cached.empty()) {
        *p = cached.back();
        cached.pop_back();
    } else {
        if (s.capacity != 0 && s.pool_bytes + size > s.capacity) {
            count("cudaMallocFromPoolAsync out of memory");
            return cudaErrorMemoryAllocation;
        }
        *p = host_block(size);
        add_block(*p, size);
        pool->reserved += size;
        s.pool_bytes += size;
    }
    pool_blocks()[*p] = {pool, size};
    return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
    count("cudaFreeAsync");
    {
        auto& s = state();
        const std::lock_guard lock(s.mutex);
        ++s.frees_on[stream];
    }
    const std::lock_guard lock(state().pools);
    const auto it = pool_blocks().find(p);
    if (it == pool_blocks().end()) {
        return cudaErrorInvalidValue;
    }
    it->second.first->free_blocks[it->second.second].push_back(p);
    pool_blocks().erase(it);
    return cudaSuccess;
}

// ---- copies and fills: run at once -----------------------------------------------------------------
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind) {
    count("cudaMemcpy");
    std::memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind, cudaStream_t) {
    count(is_device(dst) && !is_device(src)   ? "cudaMemcpyAsync H->D"
          : !is_device(dst) && is_device(src) ? "cudaMemcpyAsync D->H"
                                              : "cudaMemcpyAsync");
    std::memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t) {
    count("cudaMemsetAsync");
    std::memset(p, value, n);
    return cudaSuccess;
}

// ---- streams and events: work is done when issued ---------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
    *stream = new CUstream_st{current_device};
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete stream;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    count("cudaStreamSynchronize");
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
    count("cudaStreamWaitEvent");
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
    count("cudaEventCreateWithFlags");
    *event = new CUevent_st{current_device};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    count("cudaEventRecord");
    // The special handles (null, cudaStreamLegacy, cudaStreamPerThread) are the current device's.
    const bool special = stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
    if (!special && stream->device != event->device) {
        return cudaErrorInvalidResourceHandle;  // an event of one device, a stream of another
    }
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t) {
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
    count("cudaEventSynchronize");
    return cudaSuccess;
}

// ---- cuBLAS (host pointer mode: results written at once) ------------------------------------------
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
    *handle = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    handle->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t) {
    return "CUBLAS_STATUS_STAND_IN";
}
const char* cublasGetStatusString(cublasStatus_t) {
    return "stand-in cuBLAS status";
}

cublasStatus_t cublasSasum_v2_64(cublasHandle_t h, int64_t n, const float* x, int64_t incx, float* result) {
    count(h->mode == CUBLAS_POINTER_MODE_HOST ? "cublasSasum (host result)" : "cublasSasum (device result)");
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += std::fabs(static_cast<double>(x[i * incx]));
    }
    *result = static_cast<float>(sum);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDasum_v2_64(cublasHandle_t h, int64_t n, const double* x, int64_t incx, double* result) {
    count(h->mode == CUBLAS_POINTER_MODE_HOST ? "cublasDasum (host result)" : "cublasDasum (device result)");
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += std::fabs(x[i * incx]);
    }
    *result = sum;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSdot_v2_64(cublasHandle_t h, int64_t n, const float* x, int64_t incx, const float* y, int64_t incy,
                                float* result) {
    count(h->mode == CUBLAS_POINTER_MODE_HOST ? "cublasSdot (host result)" : "cublasSdot (device result)");
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(x[i * incx]) * static_cast<double>(y[i * incy]);
    }
    *result = static_cast<float>(sum);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDdot_v2_64(cublasHandle_t h, int64_t n, const double* x, int64_t incx, const double* y,
                                int64_t incy, double* result) {
    count(h->mode == CUBLAS_POINTER_MODE_HOST ? "cublasDdot (host result)" : "cublasDdot (device result)");
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += x[i * incx] * y[i * incy];
    }
    *result = sum;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSaxpy_v2_64(cublasHandle_t, int64_t n, const float* alpha, const float* x, int64_t incx, float* y,
                                 int64_t incy) {
    for (int64_t i = 0; i < n; ++i) {
        y[i * incy] += *alpha * x[i * incx];
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDaxpy_v2_64(cublasHandle_t, int64_t n, const double* alpha, const double* x, int64_t incx,
                                 double* y, int64_t incy) {
    for (int64_t i = 0; i < n; ++i) {
        y[i * incy] += *alpha * x[i * incx];
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSscal_v2_64(cublasHandle_t, int64_t n, const float* alpha, float* x, int64_t incx) {
    for (int64_t i = 0; i < n; ++i) {
        x[i * incx] *= *alpha;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDscal_v2_64(cublasHandle_t, int64_t n, const double* alpha, double* x, int64_t incx) {
    for (int64_t i = 0; i < n; ++i) {
        x[i * incx] *= *alpha;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// ---- NCCL: the ranks of a communicator meet in each collective ------------------------------------------
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
    if (ndev < 1) {
        return ncclInvalidArgument;
    }
    const auto clique = std::make_shared<Clique>(ndev);
    for (int r = 0; r < ndev; ++r) {
        comms[r] = new ncclComm{r, clique};
    }
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    delete comm;
    return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t) {
    return "stand-in NCCL error";
}
const char* ncclGetLastError(ncclComm_t) {
    return "";
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
    *error = ncclSuccess;
    return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    *count = comm->clique->size;
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) {
    count("ncclGroupStart");
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    count("ncclGroupEnd");
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    *rank = comm->rank;
    return ncclSuccess;
}

namespace {
std::size_t nccl_size(ncclDataType_t t) {
    switch (t) {
        case ncclInt8:
        case ncclUint8:
            return 1;
        case ncclFloat16:
        case ncclBfloat16:
            return 2;
        case ncclInt32:
        case ncclUint32:
        case ncclFloat32:
            return 4;
        default:
            return 8;
    }
}
}  // namespace

}  // extern "C"

namespace {

template <class V>
void reduce_into(std::vector<Clique::Call>& calls, bool mean) {
    std::vector<V> sum(calls[0].count, V{});
    for (const auto& c : calls) {
        for (std::size_t i = 0; i < c.count; ++i) {
            sum[i] += static_cast<const V*>(c.send)[i];
        }
    }
    for (auto& v : sum) {
        v = mean ? v / static_cast<V>(calls.size()) : v;
    }
    for (const auto& c : calls) {
        std::memcpy(c.recv, sum.data(), c.count * sizeof(V));
    }
}

// Runs the collective every rank has called: each rank's call alike, or ncclInvalidUsage.
ncclResult_t run(std::vector<Clique::Call>& calls) {
    const Clique::Call& first = calls[0];
    for (const auto& c : calls) {
        if (c.kind != first.kind || c.count != first.count || c.type != first.type || c.op != first.op ||
            c.root != first.root) {
            return ncclInvalidUsage;
        }
    }
    const std::size_t bytes = first.count * nccl_size(first.type);
    if (first.kind == "ncclBroadcast") {
        if (first.root < 0 || static_cast<std::size_t>(first.root) >= calls.size()) {
            return ncclInvalidArgument;
        }
        const void* from = calls[static_cast<std::size_t>(first.root)].send;
        for (const auto& c : calls) {
            std::memmove(c.recv, from, bytes);
        }
    } else if (first.kind == "ncclAllGather") {
        for (std::size_t k = 0; k < calls.size(); ++k) {
            for (const auto& c : calls) {
                std::memmove(static_cast<char*>(c.recv) + k * bytes, calls[k].send, bytes);
            }
        }
    } else if (calls.size() == 1) {
        std::memmove(first.recv, first.send, bytes);  // one rank: the sum and the mean are its own values
    } else if (first.type == ncclFloat32) {
        reduce_into<float>(calls, first.op == ncclAvg);
    } else if (first.type == ncclFloat64) {
        reduce_into<double>(calls, first.op == ncclAvg);
    } else {
        return ncclInvalidArgument;  // the stand-in reduces floats and doubles only
    }
    return ncclSuccess;
}

// Rank `comm`'s part of a collective: one rank runs it at once; else the last rank to arrive runs it
// for every rank, the others wait for it (a minute at most: then a call that some rank never made
// is an error, where a GPU would wait until the communicator is aborted).
ncclResult_t collective(ncclComm_t comm, const Clique::Call& call) {
    count(call.kind.c_str());
    Clique& c = *comm->clique;
    std::unique_lock lock(c.mutex);
    c.calls[static_cast<std::size_t>(comm->rank)] = call;
    if (++c.arrived == c.size) {
        c.result = run(c.calls);
        c.arrived = 0;
        ++c.generation;
        c.met.notify_all();
        return c.result;
    }
    const std::uint64_t generation = c.generation;
    if (!c.met.wait_for(lock, std::chrono::minutes(1), [&] { return c.generation != generation; })) {
        --c.arrived;
        return ncclSystemError;
    }
    return c.result;
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t n, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t) {
    return collective(comm, {"ncclAllReduce", send, recv, n, type, op, 0});
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t n, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t) {
    return collective(comm, {"ncclBroadcast", send, recv, n, type, ncclSum, root});
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t n, ncclDataType_t type, ncclComm_t comm, cudaStream_t) {
    return collective(comm, {"ncclAllGather", send, recv, n, type, ncclSum, 0});
}

}  // extern "C"
