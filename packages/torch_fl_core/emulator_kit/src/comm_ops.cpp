// Running collective and point-to-point operations of emulated communicators.
//
// A collective moves through the shared segment in steps: every rank copies
// its part of the step into its own slot, passes a barrier, reads what it
// needs from all slots into its receive buffer, and passes a second barrier
// before the slots are reused. The first step also compares every rank's
// arguments with rank 0's. Reductions fold the slots in rank order, so every
// rank gets the same bits.
//
// A send fills its pair's mailbox one chunk at a time and the receiver drains
// it; a group polls all its sends and receives in turn, so none of them
// waits for another to finish first (no deadlock in a ring).
#include "emu_kit/comm_ops.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "emu_kit/comm_reduce.h"

namespace emu_kit {

const char* op_kind_name(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::reduce:
      return "reduce";
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::all_to_all:
      return "all_to_all";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
    case OpKind::comm_split:
      return "comm_split";
  }
  return "an unknown operation";
}

namespace {

using Clock = std::chrono::steady_clock;

bool is_point_to_point(OpKind kind) { return kind == OpKind::send || kind == OpKind::recv; }

std::string describe(const CollectiveDesc& d) {
  std::string s = op_kind_name(static_cast<OpKind>(d.kind));
  s += "(count " + std::to_string(d.count) + ", " + dtype_name(d.dtype);
  const auto kind = static_cast<OpKind>(d.kind);
  if (kind == OpKind::all_reduce || kind == OpKind::reduce || kind == OpKind::reduce_scatter) {
    s += std::string(", ") + reduce_op_name(d.op);
  }
  if (kind == OpKind::broadcast || kind == OpKind::reduce) s += ", root " + std::to_string(d.root);
  return s + ")";
}

}  // namespace

void check_same_arguments(Comm& comm, const std::string& what) {
  const CollectiveDesc first = comm.desc_of(0);
  for (int r = 1; r < comm.nranks(); ++r) {
    const CollectiveDesc d = comm.desc_of(r);
    if (d.kind != first.kind || d.dtype != first.dtype || d.op != first.op ||
        d.root != first.root || d.count != first.count) {
      throw CommError(TFL_ERROR_INVALID_VALUE, what + ": rank " + std::to_string(r) + " called " +
                                                   describe(d) + " but rank 0 called " +
                                                   describe(first));
    }
  }
}

namespace {

void run_collective(const Op& o, uint64_t serial) {
  Comm& c = *o.comm;
  const int n = c.nranks();
  const int me = c.rank();
  const size_t es = dtype_size(o.dtype);
  const bool per_peer = o.kind == OpKind::reduce_scatter || o.kind == OpKind::all_to_all;
  const size_t step = kCollectiveSlotBytes / es / (per_peer ? static_cast<size_t>(n) : 1);
  const std::string what = std::string(op_kind_name(o.kind)) + " #" + std::to_string(serial);
  const auto* send = static_cast<const unsigned char*>(o.send);
  auto* recv = static_cast<unsigned char*>(o.recv);

  CollectiveDesc desc;
  desc.kind = static_cast<uint32_t>(o.kind);
  desc.dtype = o.dtype;
  desc.op = o.op;
  desc.root = o.root;
  desc.count = o.count;
  c.publish_desc(desc);

  std::vector<const void*> srcs(static_cast<size_t>(n));
  for (size_t off = 0; off < o.count; off += step) {
    const size_t m = std::min(step, o.count - off);
    const size_t bytes = m * es;
    unsigned char* mine = c.collective_slot(me);
    switch (o.kind) {
      case OpKind::broadcast:
        if (me == o.root) std::memcpy(mine, send + off * es, bytes);
        break;
      case OpKind::reduce_scatter:
      case OpKind::all_to_all:
        for (int d = 0; d < n; ++d) {
          std::memcpy(mine + static_cast<size_t>(d) * bytes,
                      send + (static_cast<size_t>(d) * o.count + off) * es, bytes);
        }
        break;
      default:
        std::memcpy(mine, send + off * es, bytes);
        break;
    }
    c.barrier(what);
    if (off == 0) check_same_arguments(c, what);
    switch (o.kind) {
      case OpKind::all_reduce:
      case OpKind::reduce:
        if (o.kind == OpKind::all_reduce || me == o.root) {
          for (int r = 0; r < n; ++r) srcs[static_cast<size_t>(r)] = c.collective_slot(r);
          reduce_buffers(recv + off * es, srcs.data(), n, m, o.dtype, o.op);
        }
        break;
      case OpKind::broadcast:
        std::memcpy(recv + off * es, c.collective_slot(o.root), bytes);
        break;
      case OpKind::all_gather:
        for (int r = 0; r < n; ++r) {
          std::memcpy(recv + (static_cast<size_t>(r) * o.count + off) * es, c.collective_slot(r),
                      bytes);
        }
        break;
      case OpKind::reduce_scatter:
        for (int r = 0; r < n; ++r) {
          srcs[static_cast<size_t>(r)] = c.collective_slot(r) + static_cast<size_t>(me) * bytes;
        }
        reduce_buffers(recv + off * es, srcs.data(), n, m, o.dtype, o.op);
        break;
      case OpKind::all_to_all:
        for (int r = 0; r < n; ++r) {
          std::memcpy(recv + (static_cast<size_t>(r) * o.count + off) * es,
                      c.collective_slot(r) + static_cast<size_t>(me) * bytes, bytes);
        }
        break;
      default:
        break;
    }
    c.barrier(what);  // every rank has read the slots: they may be refilled
  }
}

// One send or receive in progress.
struct Transfer {
  const Op* op;
  size_t total = 0;  // bytes
  size_t done = 0;
  bool finished() const { return done >= total; }
};

// Moves one chunk of `t` if its mailbox allows; true when it did.
bool step_transfer(Transfer& t) {
  const Op& o = *t.op;
  Comm& c = *o.comm;
  if (o.kind == OpKind::send) {
    Mailbox& mb = c.mailbox(c.rank(), o.peer);
    const uint64_t written = mb.written.load(std::memory_order_relaxed);
    if (mb.read.load(std::memory_order_acquire) != written) return false;  // peer has not read yet
    const size_t chunk = std::min(kPointToPointSlotBytes, t.total - t.done);
    std::memcpy(c.mailbox_data(c.rank(), o.peer),
                static_cast<const unsigned char*>(o.send) + t.done, chunk);
    mb.message_bytes = t.total;
    mb.chunk_bytes = chunk;
    mb.written.store(written + 1, std::memory_order_release);
    t.done += chunk;
    return true;
  }
  Mailbox& mb = c.mailbox(o.peer, c.rank());
  const uint64_t read = mb.read.load(std::memory_order_relaxed);
  if (mb.written.load(std::memory_order_acquire) == read) return false;  // nothing sent yet
  if (mb.message_bytes != t.total) {
    throw CommError(TFL_ERROR_INVALID_VALUE,
                    c.who() + ": recv from rank " + std::to_string(o.peer) + " expects " +
                        std::to_string(t.total) + " bytes, but rank " + std::to_string(o.peer) +
                        " sent " + std::to_string(mb.message_bytes));
  }
  const size_t chunk = mb.chunk_bytes;
  std::memcpy(static_cast<unsigned char*>(o.recv) + t.done, c.mailbox_data(o.peer, c.rank()),
              chunk);
  mb.read.store(read + 1, std::memory_order_release);
  t.done += chunk;
  return true;
}

std::string pending_text(const Transfer& t) {
  const Op& o = *t.op;
  return std::string(op_kind_name(o.kind)) + (o.kind == OpKind::send ? " to" : " from") + " rank " +
         std::to_string(o.peer) + " (" + std::to_string(t.done) + " of " + std::to_string(t.total) +
         " bytes)";
}

// Runs all sends and receives together; a failure names its communicator.
void run_point_to_point(std::vector<Transfer>& transfers, Comm** failed) {
  auto last_progress = Clock::now();
  unsigned spins = 0;
  for (;;) {
    bool all_done = true;
    bool progressed = false;
    for (size_t i = 0; i < transfers.size(); ++i) {
      Transfer& t = transfers[i];
      if (t.finished()) continue;
      all_done = false;
      // Messages of one direction of a pair go in issue order.
      bool earlier_pending = false;
      for (size_t j = 0; j < i && !earlier_pending; ++j) {
        const Op& a = *transfers[j].op;
        earlier_pending = !transfers[j].finished() && a.comm == t.op->comm &&
                          a.kind == t.op->kind && a.peer == t.op->peer;
      }
      if (earlier_pending) continue;
      *failed = t.op->comm.get();
      if (step_transfer(t)) progressed = true;
    }
    if (all_done) return;
    if (progressed) {
      last_progress = Clock::now();
      spins = 0;
      continue;
    }
    for (const Transfer& t : transfers) {
      if (t.finished()) continue;
      *failed = t.op->comm.get();
      t.op->comm->check_aborted();
      const auto limit = std::chrono::milliseconds(t.op->comm->timeout_ms());
      if (Clock::now() - last_progress > limit) {
        throw CommError(TFL_ERROR_TIMEOUT,
                        t.op->comm->who() + " timed out after " +
                            std::to_string(t.op->comm->timeout_ms()) + " ms waiting for rank " +
                            std::to_string(t.op->peer) + " in " + pending_text(t));
      }
    }
    Comm::backoff(&spins);
  }
}

}  // namespace

void run_ops(const std::vector<Op>& ops) noexcept {
  // Lock each communicator once, in address order (no lock-order cycles).
  std::vector<Comm*> comms;
  for (const Op& o : ops) comms.push_back(o.comm.get());
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (Comm* c : comms) locks.emplace_back(c->run_mutex());

  const auto usable = [](const Op& o) { return o.comm->error(nullptr) == TFL_OK; };
  std::vector<Transfer> transfers;
  for (const Op& o : ops) {
    if (!is_point_to_point(o.kind) || !usable(o)) continue;
    transfers.push_back(Transfer{&o, o.count * dtype_size(o.dtype), 0});
  }
  Comm* failed = nullptr;
  try {
    if (!transfers.empty()) run_point_to_point(transfers, &failed);
  } catch (const CommError& e) {
    failed->fail(e.status(), e.what());
  } catch (const std::exception& e) {
    if (failed != nullptr) failed->fail(TFL_ERROR_DEVICE, e.what());
  }
  for (const Op& o : ops) {
    if (is_point_to_point(o.kind) || !usable(o) || o.count == 0) continue;
    try {
      run_collective(o, o.comm->next_serial());
    } catch (const CommError& e) {
      o.comm->fail(e.status(), e.what());
    } catch (const std::exception& e) {
      o.comm->fail(TFL_ERROR_DEVICE, e.what());
    }
  }
}

}  // namespace emu_kit
