// A fake NCCL-style collective library for the kit's tests: NCCL's function shapes under the
// prefix "fake", each call appended to a log (name and arguments) instead of communicating.
// fakeAllReduce of a count of 13 fails with an invalid-argument result (6: remote error) to test
// the mapping of SDK failures; fake_log() / fake_reset() let the driver read and clear the log.
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#define FAKE extern "C" __attribute__((visibility("default")))

namespace {
std::string g_log;
int g_depth = 0;
void note(const char* format, ...) __attribute__((format(printf, 1, 2)));
void note(const char* format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  g_log += line;
  g_log += "\n";
}
struct Id {
  char internal[128];
};
}  // namespace

FAKE const char* fake_log() { return g_log.c_str(); }
FAKE void fake_reset() { g_log.clear(); }

FAKE int fakeGetUniqueId(Id* id) {
  std::memset(id->internal, 7, sizeof id->internal);
  return 0;
}
FAKE int fakeCommInitRank(void** comm, int nranks, Id id, int rank) {
  note("CommInitRank %d/%d id%d", rank, nranks, id.internal[0]);
  *comm = reinterpret_cast<void*>(0x1000 + rank);
  return 0;
}
FAKE int fakeCommDestroy(void*) {
  note("CommDestroy");
  return 0;
}
FAKE int fakeCommAbort(void*) {
  note("CommAbort");
  return 0;
}
FAKE int fakeCommGetAsyncError(void*, int* error) {
  *error = 0;
  return 0;
}
FAKE const char* fakeGetErrorString(int r) { return r == 6 ? "remote error" : "fake error"; }
FAKE int fakeAllReduce(const void*, void*, size_t count, int type, int op, void*, void* stream) {
  note("AllReduce count=%zu type=%d op=%d stream=%p depth=%d", count, type, op, stream, g_depth);
  return count == 13 ? 6 : 0;
}
FAKE int fakeBroadcast(const void*, void*, size_t count, int type, int root, void*, void*) {
  note("Broadcast count=%zu type=%d root=%d depth=%d", count, type, root, g_depth);
  return 0;
}
FAKE int fakeReduce(const void*, void*, size_t count, int type, int op, int root, void*, void*) {
  note("Reduce count=%zu type=%d op=%d root=%d depth=%d", count, type, op, root, g_depth);
  return 0;
}
FAKE int fakeAllGather(const void*, void*, size_t count, int type, void*, void*) {
  note("AllGather count=%zu type=%d depth=%d", count, type, g_depth);
  return 0;
}
FAKE int fakeReduceScatter(const void*, void*, size_t count, int type, int op, void*, void*) {
  note("ReduceScatter count=%zu type=%d op=%d depth=%d", count, type, op, g_depth);
  return 0;
}
FAKE int fakeSend(const void*, size_t count, int type, int peer, void*, void*) {
  note("Send count=%zu type=%d peer=%d depth=%d", count, type, peer, g_depth);
  return 0;
}
FAKE int fakeRecv(void*, size_t count, int type, int peer, void*, void*) {
  note("Recv count=%zu type=%d peer=%d depth=%d", count, type, peer, g_depth);
  return 0;
}
FAKE int fakeGroupStart() {
  note("GroupStart");
  ++g_depth;
  return 0;
}
FAKE int fakeGroupEnd() {
  note("GroupEnd");
  --g_depth;
  return 0;
}
// A library without groups batches sends and receives (HCCL's HcclBatchSendRecv): one line,
// each item S<bytes>@<peer> or R<bytes>@<peer>.
FAKE int fakeBatchSendRecv(const int* send, const size_t* bytes, const int* peer, size_t n) {
  std::string line = "BatchSendRecv";
  for (size_t i = 0; i < n; ++i) {
    line += " " + std::string(send[i] ? "S" : "R") + std::to_string(bytes[i]) + "@" +
            std::to_string(peer[i]);
  }
  note("%s", line.c_str());
  return 0;
}
