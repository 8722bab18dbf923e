// A vendor's collective library (include/torch_fl/collective.h): loaded once
// per path, its table checked as the runtime table is (version, size, every
// required field set), and its failures turned into one kind of message.
#pragma once

#include <torch_fl/collective.h>

#include <mutex>
#include <string>
#include <vector>

namespace torch_fl::distributed {

class CollectiveLibrary {
 public:
  // dlopen(path) + tfl_collective_get(TFL_COLLECTIVE_ABI_VERSION), checked.
  // The same path twice gives the same object (process lifetime: a library's
  // communicators may outlive any one group). Throws naming the path and
  // what is wrong with it.
  static const CollectiveLibrary& load(const std::string& path);

  const tfl_collective_v1& table() const { return *table_; }
  // Hands the library the process's runtime table (v1.1's attach_runtime),
  // once; throws naming the library when it refuses that runtime.
  void attach(const tfl_runtime_v1& runtime) const;
  const std::string& path() const { return path_; }
  const char* name() const { return table_->name ? table_->name : "?"; }
  bool has_split() const { return TFL_COLLECTIVE_HAS(table_, comm_split); }

  // "<call> failed: <STATUS>: <library message>" for a status `call` returned.
  std::string describe(tfl_status status, const char* call) const;
  const char* status_name(tfl_status status) const;

 private:
  CollectiveLibrary(std::string path, const tfl_collective_v1* table)
      : path_(std::move(path)), table_(table) {}
  std::string path_;
  const tfl_collective_v1* table_;
  mutable std::once_flag attached_;
};

// The table's fields and whether `path`'s library has each (for
// torch_fl.distributed's reports and the ABI tests).
struct CollectiveField {
  std::string name;
  unsigned minor;
  bool present;
};
std::vector<CollectiveField> collective_fields(const std::string& path);

}  // namespace torch_fl::distributed
