#include "glue/deterministic_fill.h"

namespace torch_fl {

bool& deterministic_fill_active() {
  static thread_local bool active = false;
  return active;
}

}  // namespace torch_fl
