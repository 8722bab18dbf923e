// torch.accelerator.Graph for flagos (torch >= 2.12 has at::GraphImplInterface
// and its registry; older torch has neither, and this file registers nothing).
// Over the runtime's graph seat (DeviceGraph), or in mirror mode over the
// mirrored backend's own graph implementation, as torch.flagos.Graph does.
#include "glue/accelerator_graph.h"

#if __has_include(<ATen/core/GraphImplInterface.h>)
#include <ATen/core/GraphImplInterface.h>
#define TORCH_FL_HAS_GRAPH_IMPL 1
#endif

#include <c10/core/DeviceType.h>

#include <memory>
#include <mutex>

#include "glue/device_graph.h"
#include "glue/graph_capture.h"
#include "glue/runtime_access.h"

namespace torch_fl {

#ifdef TORCH_FL_HAS_GRAPH_IMPL
namespace {

int seat_mode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::ThreadLocal:
      return TFL_CAPTURE_MODE_THREAD_LOCAL;
    case at::GraphCaptureMode::Relaxed:
      return TFL_CAPTURE_MODE_RELAXED;
    default:
      return TFL_CAPTURE_MODE_GLOBAL;  // as torch.cuda's default
  }
}

class FlagosGraphImpl final : public at::GraphImplInterface {
 public:
  explicit FlagosGraphImpl(const at::GraphImplArgs& args) {
    if (const auto type = mirror_device_type()) {
      ensure_mirror_initialized();
      mirrored_ = at::create_graph_impl(*type, args);
      TORCH_CHECK(mirrored_ != nullptr, "torch.accelerator.Graph: flagos runtime ", runtime_name(),
                  " mirrors ", c10::DeviceTypeName(*type, true),
                  ", which has no graph implementation in this torch");
      return;
    }
    TORCH_CHECK(runtime_records_graphs(), "torch.accelerator.Graph: flagos runtime ",
                runtime_name(),
                " cannot capture device graphs: it declares no graph seat (runtime ABI v1.3 "
                "graph_* functions with TFL_CAP_GRAPHS)");
    seat_ = std::make_unique<DeviceGraph>();
  }

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
    if (seat_) {
      seat_->capture_begin(pool.second != 0 ? pool.second : pool.first, seat_mode(mode));
      return;
    }
    mirrored_->capture_begin(pool, mode);
    set_capturing_device(current_device());
  }
  void capture_end() override {
    if (seat_) {
      seat_->capture_end();
      return;
    }
    set_capturing_device(-1);
    mirrored_->capture_end();
  }
  void instantiate() override { seat_ ? seat_->instantiate() : mirrored_->instantiate(); }
  void replay() override { seat_ ? seat_->replay() : mirrored_->replay(); }
  void reset() override { seat_ ? seat_->reset() : mirrored_->reset(); }
  at::MempoolId_t pool() const override {
    return seat_ ? at::MempoolId_t{0, static_cast<c10::CaptureId_t>(seat_->pool())}
                 : mirrored_->pool();
  }
  void enable_debug_mode() override {
    if (mirrored_) mirrored_->enable_debug_mode();
  }
  void debug_dump(const std::string& path) override {
    TORCH_CHECK(mirrored_ != nullptr, "torch.accelerator.Graph: flagos runtime ", runtime_name(),
                " records graphs through the graph seat, which has no dump format");
    mirrored_->debug_dump(path);
  }

 private:
  std::unique_ptr<DeviceGraph> seat_;
  std::unique_ptr<at::GraphImplInterface> mirrored_;
};

}  // namespace

bool register_accelerator_graph() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Keyed by the backend's name, known once PrivateUse1 is renamed.
    const std::string key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, false);
    if (at::GraphImplRegistry()->Has(key)) return;
    at::GraphImplRegistry()->Register(key, [](const at::GraphImplArgs& args) {
      return std::unique_ptr<at::GraphImplInterface>(std::make_unique<FlagosGraphImpl>(args));
    });
  });
  return true;
}

#else

bool register_accelerator_graph() { return false; }

#endif

}  // namespace torch_fl
