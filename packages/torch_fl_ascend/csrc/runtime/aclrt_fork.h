// Fork: what each part of the runtime forgets in a forked child (aclrt_fork.cpp says why).
#pragma once

#include <new>

namespace tfl_aclrt {

// Re-makes `m` in place: a lock held by a thread that did not fork is never waited for, and the
// parent's objects are abandoned, never destroyed.
template <typename M>
void remake(M& m) {
  new (&m) M();
}

}  // namespace tfl_aclrt
