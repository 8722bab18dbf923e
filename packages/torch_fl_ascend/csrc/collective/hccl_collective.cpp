// The ascend vendor's collective library (torch_fl/collective.h) over HCCL's C API (hccl.h),
// through the kit's collective library (torch_fl/kit/sdk_collective.h): root-info
// communicators, HCCL's collectives and point to point on the aclrtStream the attached runtime
// gives for each flagos stream. HCCL's dialect, as the kit needs it:
//  - groups: HCCL has none; the kit keeps them per thread and at the outermost group_end issues
//    each run's sends and receives on one communicator and stream as one HcclBatchSendRecv (so
//    rings and all pairs progress together), collectives in issue order;
//  - AVG: HCCL has none (core then sums and divides);
//  - fp64, and uint8 other than MAX/MIN, are not HCCL reduction types (core then all-gathers
//    and reduces on the device);
//  - broadcast: in place (the root's data must be in the buffer every rank receives in);
//  - abort: HCCL has no abort call; HcclCommDestroy releases the communicator, which ends queued
//    operations' waits, and every later call is refused as aborted.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <torch_fl/kit/sdk_collective.h>
#include <torch_fl/kit/sdk_errors.h>

#include <vector>

namespace {

using torch_fl::kit::GroupMode;
using torch_fl::kit::P2p;

struct Hccl {
  using Comm = HcclComm;
  static constexpr const char* kLibrary = "HCCL";
  static constexpr const char* kTable = "hccl";
  static constexpr size_t kIdBytes = sizeof(HcclRootInfo::internal);
  static constexpr GroupMode kGroups = GroupMode::batched_p2p;
  static constexpr bool kBroadcastInPlace = true;
  static constexpr bool kAllToAll = true;
  static constexpr int kSuccess = HCCL_SUCCESS;
  static constexpr int kInProgress = -1;
  static constexpr int kByte = HCCL_DATA_TYPE_UINT8;

  static int type(int dtype) {
    static const HcclDataType kTypes[TFL_DTYPE_COUNT] = {
        HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP32,
        HCCL_DATA_TYPE_FP64,  HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_UINT8,
        HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT8};
    return kTypes[dtype];
  }
  static int op(int reduce_op) {
    static const int kOps[TFL_REDUCE_OP_COUNT] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD,
                                                  HCCL_REDUCE_MIN, HCCL_REDUCE_MAX, -1};
    return kOps[reduce_op];
  }
  // HCCL's documented reduction types: no fp64, uint8 for MAX/MIN only.
  static const char* cannot_reduce(int dtype, int reduce_op) {
    if (dtype == TFL_DTYPE_F64) return "HCCL does not reduce fp64 data";
    if (dtype == TFL_DTYPE_U8 && reduce_op != TFL_REDUCE_MAX && reduce_op != TFL_REDUCE_MIN) {
      return "HCCL does not reduce uint8 data with this operation";
    }
    return nullptr;
  }
  static constexpr torch_fl::kit::SdkError<int> kErrors[] = {
      TFL_KIT_SDK_ERROR(HCCL_SUCCESS, TFL_OK),
      TFL_KIT_SDK_ERROR(HCCL_E_PARA, TFL_ERROR_INVALID_VALUE),
      TFL_KIT_SDK_ERROR(HCCL_E_PTR, TFL_ERROR_INVALID_POINTER),
      TFL_KIT_SDK_ERROR(HCCL_E_NOT_SUPPORT, TFL_ERROR_NOT_SUPPORTED),
      TFL_KIT_SDK_ERROR(HCCL_E_MEMORY, TFL_ERROR_OUT_OF_MEMORY),
      TFL_KIT_SDK_ERROR(HCCL_E_TIMEOUT, TFL_ERROR_TIMEOUT),
      TFL_KIT_SDK_ERROR(HCCL_E_REMOTE, TFL_ERROR_ABORTED),
  };
  static tfl_status status_of(int r) { return torch_fl::kit::sdk_status(kErrors, r); }

  // libhccl.so is linked (torch_fl_ascend.sdk loads it before this library).
  static std::string load() { return ""; }
  static const char* error_string(int r) { return HcclGetErrorString(static_cast<HcclResult>(r)); }
  static const char* last_error(Comm) { return aclGetRecentErrMsg(); }  // CANN's recent message

  static int unique_id(void* id) { return HcclGetRootInfo(static_cast<HcclRootInfo*>(id)); }
  static int comm_init(Comm* c, int nranks, const void* id, int rank) {
    return HcclCommInitRootInfo(static_cast<uint32_t>(nranks), static_cast<const HcclRootInfo*>(id),
                                static_cast<uint32_t>(rank), c);
  }
  static int comm_destroy(Comm c) { return HcclCommDestroy(c); }
  static int comm_abort(Comm c) { return HcclCommDestroy(c); }
  static int async_error(Comm c, int* e) {
    HcclResult async = HCCL_SUCCESS;
    const HcclResult r = HcclGetCommAsyncError(c, &async);
    *e = async;
    return r;
  }

  static HcclDataType t(int type) { return static_cast<HcclDataType>(type); }
  static HcclReduceOp o(int op) { return static_cast<HcclReduceOp>(op); }
  static aclrtStream s(void* stream) { return static_cast<aclrtStream>(stream); }
  static void* w(const void* p) { return const_cast<void*>(p); }

  static int all_reduce(const void* send, void* recv, size_t n, int type, int op, Comm c,
                        void* st) {
    return HcclAllReduce(w(send), recv, n, t(type), o(op), c, s(st));
  }
  static int broadcast(const void*, void* recv, size_t n, int type, int root, Comm c, void* st) {
    return HcclBroadcast(recv, n, t(type), static_cast<uint32_t>(root), c, s(st));
  }
  static int reduce(const void* send, void* recv, size_t n, int type, int op, int root, Comm c,
                    void* st) {
    return HcclReduce(w(send), recv ? recv : w(send), n, t(type), o(op),
                      static_cast<uint32_t>(root), c, s(st));
  }
  static int all_gather(const void* send, void* recv, size_t n, int type, Comm c, void* st) {
    return HcclAllGather(w(send), recv, n, t(type), c, s(st));
  }
  static int reduce_scatter(const void* send, void* recv, size_t n, int type, int op, Comm c,
                            void* st) {
    return HcclReduceScatter(w(send), recv, n, t(type), o(op), c, s(st));
  }
  static int all_to_all(const void* send, void* recv, size_t n, int type, Comm c, void* st) {
    return HcclAlltoAll(send, n, t(type), recv, n, t(type), c, s(st));
  }
  static int send(const void* buf, size_t n, int type, int peer, Comm c, void* st) {
    return HcclSend(w(buf), n, t(type), static_cast<uint32_t>(peer), c, s(st));
  }
  static int recv(void* buf, size_t n, int type, int peer, Comm c, void* st) {
    return HcclRecv(buf, n, t(type), static_cast<uint32_t>(peer), c, s(st));
  }
  static int send_recv(const P2p* items, size_t n, Comm c, void* st) {
    std::vector<HcclSendRecvItem> batch;
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back({items[i].send ? HCCL_SEND : HCCL_RECV, items[i].buf, items[i].bytes,
                       HCCL_DATA_TYPE_UINT8, static_cast<uint32_t>(items[i].peer)});
    }
    return HcclBatchSendRecv(batch.data(), static_cast<uint32_t>(batch.size()), c, s(st));
  }
};

}  // namespace

TFL_SDK_COLLECTIVE(Hccl)
