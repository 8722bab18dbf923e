/* Counts the calling thread's heap allocations between two calls, for the
 * per-call budget test (test_call_budget.py). Preloaded (LD_PRELOAD) into a
 * child process: malloc, calloc and realloc forward to glibc's own entry
 * points and count while the thread has counting switched on. */
#include <stddef.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);

/* initial-exec: a global-dynamic TLS access may call malloc itself (the
 * first access from a thread allocates its block), which recursed here. */
#define TFL_TLS __thread __attribute__((tls_model("initial-exec")))
static TFL_TLS int counting;
static TFL_TLS long counted;

void* malloc(size_t n) {
  if (counting) ++counted;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  if (counting) ++counted;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  if (counting) ++counted;
  return __libc_realloc(p, n);
}

void tfl_malloc_count_start(void) {
  counted = 0;
  counting = 1;
}
long tfl_malloc_count_stop(void) {
  counting = 0;
  return counted;
}
