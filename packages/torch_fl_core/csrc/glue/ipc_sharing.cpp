// flagos memory shared between processes through the runtime's IPC handles
// (runtime ABI v1.1): `torch.ops.torch_fl.ipc_export(t)` gives the handle of
// t's storage for another process, `torch.ops.torch_fl.ipc_open(handle, ...)`
// maps it there as a flagos tensor (torch_fl.multiprocessing pickles with them).
//
// Exporting first gives the storage an allocation of its own, as
// share_memory_() does for CPU storages: a caching-allocator block shares its
// segment with other tensors and is reused once the sender drops it, so the
// receiver would see another tensor's bytes. With its own allocation the
// receiver's mapping outlives the sender's free, and a handle the sender no
// longer holds fails to open instead of aliasing new data.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstring>

#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

// Asked at import (torch_fl.multiprocessing): must not count as using the runtime.
bool ipc_supported() {
  const tfl_runtime_v1* rt = runtime_table_if_active();
  return rt != nullptr && TFL_RUNTIME_HAS(rt, ipc_get_handle) &&
         TFL_RUNTIME_HAS(rt, ipc_open_handle) && TFL_RUNTIME_HAS(rt, ipc_close_handle);
}

void check_supported(const char* op) {
  TORCH_CHECK(ipc_supported(), op, ": runtime '", runtime_name(),
              "' cannot share device memory between processes (its table has no "
              "ipc_get_handle/ipc_open_handle: runtime ABI v1.1)");
}

struct OwnAllocation {
  void* base;
  c10::DeviceIndex device;
};

// An exported storage's own allocation: the streams may still use it, so the
// device finishes before the runtime frees it (a deleter must not throw).
void free_own_allocation(void* ctx) {
  auto* own = static_cast<OwnAllocation*>(ctx);
  if (runtime_active() && !in_bad_fork()) {
    const tfl_runtime_v1& rt = runtime();
    int prev = -1;
    if (rt.get_device(&prev) == TFL_OK && prev != own->device) rt.set_device(own->device);
    rt.device_synchronize();
    rt.free(own->base);
    if (prev >= 0 && prev != own->device) rt.set_device(prev);
  }
  delete own;
}

// A mapping of another process's allocation, released with ipc_close_handle.
void close_mapping(void* base) {
  if (runtime_active() && !in_bad_fork()) runtime().ipc_close_handle(base);
}

bool owns_its_allocation(const c10::StorageImpl& storage) {
  const c10::DeleterFnPtr d = storage.data_ptr().get_deleter();
  return d == &free_own_allocation || d == &close_mapping;
}

// Moves the storage's bytes into an allocation of its own (same StorageImpl,
// so every tensor over it follows), once.
void give_own_allocation(c10::StorageImpl& storage, c10::DeviceIndex device) {
  const size_t nbytes = storage.nbytes();
  void* fresh = nullptr;
  TFL_CALL(device, malloc, &fresh, nbytes);
  const tfl_status st =
      runtime().memcpy(fresh, storage.data(), nbytes, TFL_MEMCPY_DEVICE_TO_DEVICE);
  if (st != TFL_OK) {
    runtime().free(fresh);
    throw_runtime_error(st, "memcpy", device);
  }
  storage.set_data_ptr_noswap(c10::DataPtr(fresh, new OwnAllocation{fresh, device},
                                           &free_own_allocation,
                                           c10::Device(c10::DeviceType::PrivateUse1, device)));
}

// (handle bytes as a CPU uint8 tensor, the storage's offset in its allocation)
std::tuple<at::Tensor, int64_t> ipc_export(const at::Tensor& self) {
  TORCH_CHECK(self.device().is_privateuseone(),
              "torch_fl::ipc_export: expected a flagos tensor, got ", self.device());
  check_supported("torch_fl::ipc_export");
  c10::StorageImpl& storage = *self.storage().unsafeGetStorageImpl();
  TORCH_CHECK(storage.nbytes() > 0, "torch_fl::ipc_export: the storage is empty");
  const c10::DeviceIndex device = self.device().index();
  CurrentDeviceScope scope(device);
  // The receiver reads what every stream of the sender has written so far.
  TFL_CALL(device, device_synchronize);
  if (!owns_its_allocation(storage)) give_own_allocation(storage, device);
  tfl_ipc_handle handle;
  size_t offset = 0, size = 0;
  TFL_CALL(device, ipc_get_handle, storage.data(), &handle, &offset, &size);
  at::Tensor bytes = at::empty({TFL_IPC_HANDLE_SIZE}, at::kByte);
  std::memcpy(bytes.data_ptr(), handle.bytes, TFL_IPC_HANDLE_SIZE);
  return {bytes, static_cast<int64_t>(offset)};
}

// A flagos uint8 tensor over `nbytes` at `offset` of the exported allocation.
at::Tensor ipc_open(const at::Tensor& handle_bytes, int64_t offset, int64_t nbytes) {
  check_supported("torch_fl::ipc_open");
  TORCH_CHECK(handle_bytes.device().is_cpu() && handle_bytes.scalar_type() == at::kByte &&
                  handle_bytes.numel() == TFL_IPC_HANDLE_SIZE,
              "torch_fl::ipc_open: the handle must be ", TFL_IPC_HANDLE_SIZE,
              " CPU bytes (what ipc_export gave)");
  TORCH_CHECK(offset >= 0 && nbytes > 0, "torch_fl::ipc_open: bad offset ", offset, " or size ",
              nbytes);
  tfl_ipc_handle handle;
  std::memcpy(handle.bytes, handle_bytes.contiguous().data_ptr(), TFL_IPC_HANDLE_SIZE);
  void* base = nullptr;
  size_t size = 0;
  int device = -1;
  TFL_CALL(-1, ipc_open_handle, &handle, &base, &size, &device);
  c10::DataPtr data(
      static_cast<char*>(base) + offset, base, &close_mapping,
      c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  TORCH_CHECK(static_cast<size_t>(offset) <= size && static_cast<size_t>(nbytes) <= size - offset,
              "torch_fl::ipc_open: ", nbytes, " bytes at offset ", offset,
              " run past the exported allocation of ", size, " bytes on flagos:", device);
  TORCH_CHECK(device < device_count(),
              "torch_fl::ipc_open: the exported memory is on flagos:", device,
              ", and this process has ", static_cast<int>(device_count()), " device",
              device_count() == 1 ? "" : "s");
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes),
                       std::move(data), /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor out = at::empty(
      {0}, at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
  out.set_(storage, 0, {nbytes}, {1});
  return out;
}

}  // namespace

bool runtime_shares_memory() { return ipc_supported(); }

TORCH_LIBRARY_FRAGMENT(torch_fl, m) {
  m.def("ipc_export(Tensor self) -> (Tensor, int)");
  m.def("ipc_open(Tensor handle, int offset, int nbytes) -> Tensor");
}

TORCH_LIBRARY_IMPL(torch_fl, PrivateUse1, m) { m.impl("ipc_export", TORCH_FN(ipc_export)); }

// The handle is a CPU tensor; the result a flagos one.
TORCH_LIBRARY_IMPL(torch_fl, CompositeExplicitAutograd, m) {
  m.impl("ipc_open", TORCH_FN(ipc_open));
}

}  // namespace torch_fl
