#include "router/route_phases.h"

namespace torch_fl::route_phases {

Counters take() {
#if TORCH_FL_ROUTE_PHASES
  Counters c = t_counters;
  t_counters = Counters{};
  return c;
#else
  return Counters{};
#endif
}

uint64_t ticks_now() {
#if TORCH_FL_ROUTE_PHASES
  return now();
#else
  return 0;
#endif
}

}  // namespace torch_fl::route_phases
