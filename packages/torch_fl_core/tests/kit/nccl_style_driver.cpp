// Drives the kit's collective library (torch_fl/kit/sdk_collective.h) in the NCCL-style dialect
// (torch_fl/kit/nccl_style_collective.h) over the fake library (fake_ccl.cpp) with a minimal
// runtime, and prints what the fake library was called with per scenario. Built three times:
// -DMIXED_GROUPS=1 (NCCL's dialect: groups pass through), 0 (ECCL's: one library group per run
// of one kind), both with -DREDUCES_64BIT=0, and -DBATCHED=1 (a library without groups, as
// HCCL: each run's sends and receives as one batch).
#include <dlfcn.h>
#include <torch_fl/kit/nccl_style_collective.h>

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

struct Fake {
  static constexpr const char* kLibrary = "FAKE";
  static constexpr const char* kTable = "fake";
  static constexpr const char* kPrefix = "fake";
  static constexpr const char* kSoname = "libfakeccl.so";
  static constexpr const char* kMissing = "build tests/kit/fake_ccl.cpp";
  static constexpr bool kReduces64Bit = REDUCES_64BIT;
  static constexpr bool kMixedGroups = MIXED_GROUPS;
};

int g_device = 0;
tfl_status get_device(int* d) {
  *d = g_device;
  return TFL_OK;
}
tfl_status set_device(int d) {
  g_device = d;
  return TFL_OK;
}
tfl_status native_stream(tfl_stream s, int, void** out) {
  *out = s;  // the fake's "SDK stream" is the tfl_stream itself
  return TFL_OK;
}
const char* no_error() { return ""; }

#ifndef BATCHED
#define BATCHED 0
#endif
// The same library seen as one without groups: sends and receives go as one batch.
struct Batched : torch_fl::kit::nccl_style::Dialect<Fake> {
  static constexpr torch_fl::kit::GroupMode kGroups = torch_fl::kit::GroupMode::batched_p2p;
  static int send_recv(const torch_fl::kit::P2p* items, size_t n, Comm, void*) {
    static auto* batch = reinterpret_cast<int (*)(const int*, const size_t*, const int*, size_t)>(
        dlsym(RTLD_DEFAULT, "fakeBatchSendRecv"));
    std::vector<int> send, peer;
    std::vector<size_t> bytes;
    for (size_t i = 0; i < n; ++i) {
      send.push_back(items[i].send);
      bytes.push_back(items[i].bytes);
      peer.push_back(items[i].peer);
    }
    return batch(send.data(), bytes.data(), peer.data(), n);
  }
};
using Library = torch_fl::kit::SdkCollective<
    std::conditional_t<BATCHED, Batched, torch_fl::kit::nccl_style::Dialect<Fake>>>;

const char* (*fake_log)() = nullptr;
void (*fake_reset)() = nullptr;

void show(const char* scenario, tfl_status st, const tfl_collective_v1* t) {
  std::printf("== %s: %d %s\n%s", scenario, static_cast<int>(st), st ? t->last_error() : "",
              fake_log());
  fake_reset();
}

}  // namespace

int main(int argc, char** argv) {
  const tfl_collective_v1* t = Library::get(1);
  if (argc > 2) {  // the library is not loadable: every call says why
    tfl_comm_id id;
    const tfl_status st = t->unique_id(&id);
    std::printf("== missing: %d %s\n", static_cast<int>(st), t->last_error());
    return 0;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return 2;
  fake_log = reinterpret_cast<const char* (*)()>(dlsym(lib, "fake_log"));
  fake_reset = reinterpret_cast<void (*)()>(dlsym(lib, "fake_reset"));
  tfl_runtime_v1 rt;
  std::memset(&rt, 0, sizeof rt);
  rt.abi_version = TFL_RUNTIME_ABI_VERSION;
  rt.struct_size = sizeof rt;
  rt.name = "fake";
  rt.last_error = no_error;
  rt.get_device = get_device;
  rt.set_device = set_device;
  rt.native_stream = native_stream;
  tfl_comm_id id;
  show("before attach", t->unique_id(&id), t);
  show("attach", t->attach_runtime(&rt), t);
  show("unique_id", t->unique_id(&id), t);
  tfl_comm comm = nullptr;
  show("comm_init", t->comm_init(&comm, 2, &id, 1, 1, 0), t);
  auto* s = reinterpret_cast<tfl_stream>(0x5);
  char buf[1024];
  show("all_reduce f32 sum", t->all_reduce(buf, buf, 4, TFL_DTYPE_F32, TFL_REDUCE_SUM, comm, s), t);
  show("all_reduce bool min", t->all_reduce(buf, buf, 4, TFL_DTYPE_BOOL, TFL_REDUCE_MIN, comm, s),
       t);
  show("all_reduce bool sum", t->all_reduce(buf, buf, 4, TFL_DTYPE_BOOL, TFL_REDUCE_SUM, comm, s),
       t);
  show("all_reduce i32 avg", t->all_reduce(buf, buf, 4, TFL_DTYPE_I32, TFL_REDUCE_AVG, comm, s), t);
  show("all_reduce i64 sum", t->all_reduce(buf, buf, 4, TFL_DTYPE_I64, TFL_REDUCE_SUM, comm, s), t);
  show("all_reduce fails", t->all_reduce(buf, buf, 13, TFL_DTYPE_F32, TFL_REDUCE_SUM, comm, s), t);
  show("broadcast f64", t->broadcast(buf, buf, 3, TFL_DTYPE_F64, 1, comm, s), t);
  show("all_to_all", t->all_to_all(buf, buf + 512, 2, TFL_DTYPE_F32, comm, s), t);
  tfl_status st = t->group_start();
  if (st == TFL_OK) st = t->all_reduce(buf, buf, 4, TFL_DTYPE_F32, TFL_REDUCE_SUM, comm, s);
  if (st == TFL_OK) st = t->all_reduce(buf, buf, 5, TFL_DTYPE_F32, TFL_REDUCE_SUM, comm, s);
  if (st == TFL_OK) st = t->all_gather(buf, buf + 512, 4, TFL_DTYPE_I64, comm, s);
  if (st == TFL_OK) st = t->send(buf, 4, TFL_DTYPE_F32, 0, comm, s);
  if (st == TFL_OK) st = t->all_to_all(buf, buf + 512, 1, TFL_DTYPE_U8, comm, s);
  if (st == TFL_OK) st = t->recv(buf, 4, TFL_DTYPE_F32, 0, comm, s);
  if (st == TFL_OK) st = t->all_reduce(buf, buf, 6, TFL_DTYPE_F32, TFL_REDUCE_MAX, comm, s);
  if (st == TFL_OK) st = t->group_end();
  show("group of three kinds", st, t);
  show("send to a rank it lacks", t->send(buf, 4, TFL_DTYPE_F32, 2, comm, s), t);
  show("group_end alone", t->group_end(), t);
  show("comm_abort", t->comm_abort(comm), t);
  show("after abort", t->all_reduce(buf, buf, 4, TFL_DTYPE_F32, TFL_REDUCE_SUM, comm, s), t);
  show("comm_destroy", t->comm_destroy(comm), t);
  return 0;
}
