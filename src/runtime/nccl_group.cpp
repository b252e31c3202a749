// NCCL, reached through dlsym (see nccl_group.h). The header only supplies types.
#include "runtime/nccl_group.h"

#include <dlfcn.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "ganengine/error.h"
#include "runtime/cuda_context.h"

namespace ge {
namespace {

struct Nccl {
  ncclResult_t (*get_version)(int*) = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
  std::string error;
};

template <class F>
void resolve(void* lib, const char* name, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out && error->empty()) *error = std::string("libnccl.so.2 lacks ") + name;
}

const Nccl& nccl() {
  static const Nccl loaded = [] {
    Nccl n;
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      n.error = "multi-GPU training needs NCCL, which could not be loaded (" + std::string(dlerror()) +
                "): install it (NVIDIA's libnccl2 package, or the nvidia-nccl wheel) and put libnccl.so.2 on "
                "LD_LIBRARY_PATH";
      return n;
    }
    resolve(lib, "ncclGetVersion", &n.get_version, &n.error);
    resolve(lib, "ncclGetUniqueId", &n.get_unique_id, &n.error);
    resolve(lib, "ncclCommInitRank", &n.comm_init_rank, &n.error);
    resolve(lib, "ncclCommInitAll", &n.comm_init_all, &n.error);
    resolve(lib, "ncclCommDestroy", &n.comm_destroy, &n.error);
    resolve(lib, "ncclCommAbort", &n.comm_abort, &n.error);
    resolve(lib, "ncclAllReduce", &n.all_reduce, &n.error);
    resolve(lib, "ncclGroupStart", &n.group_start, &n.error);
    resolve(lib, "ncclGroupEnd", &n.group_end, &n.error);
    resolve(lib, "ncclGetErrorString", &n.error_string, &n.error);
    return n;  // stays loaded for the life of the process
  }();
  if (!loaded.error.empty()) fail(loaded.error);
  return loaded;
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(what, " failed: ", nccl().error_string(r));
}

ncclDataType_t nccl_type(const Tensor& t) {
  switch (t.dtype()) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default: fail("NCCL all-reduce of ", t.str(), ": only f32, f16 and bf16 tensors are reduced");
  }
}

class NcclReplicaGroup : public ReplicaGroup {
 public:
  NcclReplicaGroup(ncclComm_t comm, int rank, int size, Device device)
      : comm_(comm), rank_(rank), size_(size), device_(device) {}
  ~NcclReplicaGroup() override {
    if (!aborted_) nccl().comm_destroy(comm_);
  }
  void abort() override {
    // ncclCommAbort ends the communicator's pending operations on the device too, so a stream
    // stuck waiting for a failed peer is released.
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_) return;
    aborted_ = true;
    nccl().comm_abort(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_mean(const std::vector<Tensor>& tensors) override { reduce(tensors, ncclAvg); }
  void all_reduce_max(const Tensor& t) override { reduce({t}, ncclMax); }
  void all_reduce_sum(const Tensor& t) override { reduce({t}, ncclSum); }

 private:
  // One NCCL group call: the tensors go out together, in place, on this device's stream.
  void reduce(const std::vector<Tensor>& tensors, ncclRedOp_t op) {
    if (aborted_) fail("NCCL replica ", rank_, ": the group was aborted after another replica failed");
    const Nccl& n = nccl();
    cudaStream_t stream = gpu::context(device_.index).stream();
    check(n.group_start(), "ncclGroupStart");
    for (const Tensor& t : tensors) {
      GE_CHECK(t.device() == device_, "NCCL all-reduce on ", device_.str(), " of a tensor on ", t.device().str());
      check(n.all_reduce(t.data(), t.data(), static_cast<size_t>(t.numel()), nccl_type(t), op, comm_, stream),
            "ncclAllReduce");
    }
    check(n.group_end(), "ncclGroupEnd");
  }
  ncclComm_t comm_;
  int rank_, size_;
  Device device_;
  std::mutex abort_mu_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::string nccl_version() {
  int v = 0;
  check(nccl().get_version(&v), "ncclGetVersion");
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  check(nccl().get_unique_id(&id), "ncclGetUniqueId");
  static_assert(sizeof(id.internal) == sizeof(NcclUniqueId), "ncclUniqueId size");
  NcclUniqueId out;
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

std::vector<std::unique_ptr<ReplicaGroup>> make_nccl_groups(const std::vector<Device>& devices) {
  std::vector<int> ids;
  for (const Device& d : devices) {
    GE_CHECK(d.is_cuda(), "NCCL replicas live on GPUs, got ", d.str());
    gpu::context(d.index);  // fails clearly when the GPU is not there
    ids.push_back(d.index);
  }
  std::vector<ncclComm_t> comms(devices.size());
  check(nccl().comm_init_all(comms.data(), static_cast<int>(devices.size()), ids.data()), "ncclCommInitAll");
  std::vector<std::unique_ptr<ReplicaGroup>> out;
  for (size_t k = 0; k < devices.size(); ++k)
    out.push_back(std::make_unique<NcclReplicaGroup>(comms[k], static_cast<int>(k), static_cast<int>(devices.size()),
                                                     devices[k]));
  return out;
}

std::unique_ptr<ReplicaGroup> make_nccl_group(const NcclUniqueId& id, int rank, int size, Device device) {
  GE_CHECK(device.is_cuda(), "an NCCL replica lives on a GPU, got ", device.str());
  GE_CHECK(rank >= 0 && rank < size, "NCCL rank ", rank, " of ", size);
  gpu::context(device.index);  // makes the device current for the communicator
  ncclUniqueId raw;
  std::memcpy(raw.internal, id.data(), id.size());
  ncclComm_t comm = nullptr;
  check(nccl().comm_init_rank(&comm, size, raw, rank), "ncclCommInitRank");
  return std::make_unique<NcclReplicaGroup>(comm, rank, size, device);
}

}  // namespace ge
