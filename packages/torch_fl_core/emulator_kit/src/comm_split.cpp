// comm_split for emulated communicators: a blocking collective of the parent in
// which every rank publishes its color and key through its slot; each color
// then joins a communicator whose id every member derives alike.
#include "emu_kit/comm_split.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "emu_kit/comm_ops.h"

namespace emu_kit {

CommPtr split_comm(Comm& parent, int color, int key) {
  // Operations already enqueued on the parent run first, so the split's
  // barriers do not interleave with theirs.
  parent.drain();
  std::unique_lock<std::mutex> lock(parent.run_mutex());
  std::string why;
  const tfl_status failed = parent.error(&why);
  if (failed != TFL_OK) throw CommError(failed, "the communicator failed earlier: " + why);

  const int32_t mine[2] = {color, key};
  std::memcpy(parent.collective_slot(parent.rank()), mine, sizeof mine);
  CollectiveDesc desc;
  desc.kind = static_cast<uint32_t>(OpKind::comm_split);
  parent.publish_desc(desc);
  const uint64_t serial = parent.next_serial();
  const std::string what = "comm_split #" + std::to_string(serial);
  try {
    parent.barrier(what);
    check_same_arguments(parent, what);
  } catch (const CommError& e) {
    parent.fail(e.status(), e.what());
    throw;
  }
  // (key, parent rank) of the ranks of this color: the new ranks' order.
  std::vector<std::pair<int32_t, int>> members;
  for (int r = 0; r < parent.nranks(); ++r) {
    int32_t theirs[2];
    std::memcpy(theirs, parent.collective_slot(r), sizeof theirs);
    if (color >= 0 && theirs[0] == color) members.emplace_back(theirs[1], r);
  }
  try {
    parent.barrier(what);  // all have read the slots
  } catch (const CommError& e) {
    parent.fail(e.status(), e.what());
    throw;
  }
  lock.unlock();
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end());
  int rank = 0;
  while (members[static_cast<size_t>(rank)].second != parent.rank()) ++rank;
  return std::make_shared<Comm>(static_cast<int>(members.size()), parent.derived_id(serial, color),
                                rank, parent.device(), parent.timeout_ms());
}

}  // namespace emu_kit
