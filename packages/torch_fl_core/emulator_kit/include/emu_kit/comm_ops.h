// Running collective and point-to-point operations of emulated communicators:
// the work of one stream task, through the communicators' shared segments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "emu_kit/comm.h"

namespace emu_kit {

enum class OpKind : uint32_t {
  all_reduce = 1,
  broadcast,
  reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  send,
  recv,
  comm_split,  // not an operation of run_ops: the kind split's barrier checks
};

const char* op_kind_name(OpKind kind) noexcept;

// One validated operation, as the call gave it.
struct Op {
  OpKind kind;
  const void* send = nullptr;  // send and recv: the one buffer is `send` / `recv`
  void* recv = nullptr;
  size_t count = 0;
  int dtype = 0;
  int op = 0;
  int root = 0;
  int peer = 0;
  CommPtr comm;
};

// Every rank's CollectiveDesc equals rank 0's, else CommError naming the
// rank that differs (after the first barrier of a collective).
void check_same_arguments(Comm& comm, const std::string& what);

// Runs `ops` (one call, or a group) as one stream task: sends and receives
// progress together, then the collectives run in issue order. An operation
// of a communicator that has failed is skipped; a failure becomes its
// communicator's asynchronous error. Never throws.
void run_ops(const std::vector<Op>& ops) noexcept;

}  // namespace emu_kit
