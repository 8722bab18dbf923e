#include "distributed/collective_library.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

namespace torch_fl::distributed {
namespace {

std::mutex g_mutex;
std::map<std::string, std::unique_ptr<CollectiveLibrary>>& libraries() {
  static auto* loaded = new std::map<std::string, std::unique_ptr<CollectiveLibrary>>();
  return *loaded;  // never destroyed: communicators may be released at exit
}

const tfl_collective_v1* open_table(const std::string& path) {
  // RTLD_GLOBAL is not needed: the table is reached through its entry point.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    TORCH_CHECK(false, "torch_fl.distributed: cannot load the collective library ", path, ": ",
                why ? why : "dlopen failed");
  }
  auto get = reinterpret_cast<tfl_collective_get_fn>(dlsym(handle, TFL_COLLECTIVE_ENTRY_SYMBOL));
  TORCH_CHECK(get != nullptr, "torch_fl.distributed: ", path, " exports no ",
              TFL_COLLECTIVE_ENTRY_SYMBOL, ": it is not a torch-fl collective library");
  const tfl_collective_v1* table = get(TFL_COLLECTIVE_ABI_VERSION);
  TORCH_CHECK(table != nullptr, "torch_fl.distributed: ", path,
              " does not speak collective ABI version ", TFL_COLLECTIVE_ABI_VERSION);
  TORCH_CHECK(table->abi_version == TFL_COLLECTIVE_ABI_VERSION, "torch_fl.distributed: ", path,
              " returned a table of collective ABI version ", table->abi_version, ", not ",
              TFL_COLLECTIVE_ABI_VERSION);
  TORCH_CHECK(table->struct_size >= TFL_COLLECTIVE_V1_0_SIZE, "torch_fl.distributed: ", path,
              "'s collective table is ", table->struct_size, " bytes, less than the ",
              TFL_COLLECTIVE_V1_0_SIZE, " of v1.0");
  // Every v1.0 field must be set, except those the header names optional.
  std::string missing;
#define TFL_OPTIONAL_FIELD(f) || std::string(#f) == field
#define TFL_CHECK_FIELD(f, minor, returns)                                               \
  if ((minor) == 0 && table->f == nullptr) {                                             \
    const std::string field = #f;                                                        \
    if (!(false TFL_COLLECTIVE_V1_OPTIONAL(TFL_OPTIONAL_FIELD))) missing += " " + field; \
  }
  TFL_COLLECTIVE_V1_FUNCTIONS(TFL_CHECK_FIELD)
#undef TFL_CHECK_FIELD
#undef TFL_OPTIONAL_FIELD
  TORCH_CHECK(missing.empty(), "torch_fl.distributed: ", path,
              "'s collective table leaves required fields NULL:", missing);
  return table;
}

}  // namespace

const CollectiveLibrary& CollectiveLibrary::load(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& loaded = libraries();
  auto it = loaded.find(path);
  if (it == loaded.end()) {
    std::unique_ptr<CollectiveLibrary> lib(new CollectiveLibrary(path, open_table(path)));
    it = loaded.emplace(path, std::move(lib)).first;
  }
  return *it->second;
}

void CollectiveLibrary::attach(const tfl_runtime_v1& runtime) const {
  std::call_once(attached_, [&] {
    if (!TFL_COLLECTIVE_HAS(table_, attach_runtime)) return;  // a v1.0 library: nothing to give
    const tfl_status st = table_->attach_runtime(&runtime);
    TORCH_CHECK(st == TFL_OK, "torch_fl.distributed: the collective library ", path_,
                " refuses runtime '", runtime.name ? runtime.name : "?",
                "': ", describe(st, "attach_runtime"));
  });
}

const char* CollectiveLibrary::status_name(tfl_status status) const {
  const char* s = table_->status_name ? table_->status_name(status) : nullptr;
  return s ? s : "unknown status";
}

std::string CollectiveLibrary::describe(tfl_status status, const char* call) const {
  const char* message = table_->last_error ? table_->last_error() : nullptr;
  std::string text = std::string(name()) + " " + call + " failed: " + status_name(status);
  if (message != nullptr && *message != '\0') text += std::string(": ") + message;
  return text;
}

std::vector<CollectiveField> collective_fields(const std::string& path) {
  const tfl_collective_v1* table = &CollectiveLibrary::load(path).table();
  std::vector<CollectiveField> fields;
#define TFL_FIELD(f, minor, returns) fields.push_back({#f, (minor), TFL_COLLECTIVE_HAS(table, f)});
  TFL_COLLECTIVE_V1_FUNCTIONS(TFL_FIELD)
#undef TFL_FIELD
  return fields;
}

}  // namespace torch_fl::distributed
