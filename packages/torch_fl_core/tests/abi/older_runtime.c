/* A runtime built against a frozen older header (runtime_v1_0.h by default,
 * or the one TFL_TEST_HEADER names, e.g. runtime_v1_1.h): its table is that
 * version's table, struct_size included. It serves the sim runtime's
 * functions (dlopen of TFL_TEST_SIM_LIBRARY), so a newer core loading it runs
 * real work through a table that ends where that version ended. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TFL_TEST_HEADER
#define TFL_TEST_HEADER "runtime_v1_0.h"
#endif
#ifndef TFL_TEST_NAME
#define TFL_TEST_NAME "sim-v1.0"
#endif
#include TFL_TEST_HEADER

static tfl_runtime_v1 table;

const tfl_runtime_v1* tfl_runtime_get(uint32_t abi_version) {
  if (abi_version != TFL_RUNTIME_ABI_VERSION) return NULL;
  if (table.struct_size == 0) {
    const char* path = getenv("TFL_TEST_SIM_LIBRARY");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    tfl_runtime_get_fn get = lib ? (tfl_runtime_get_fn)dlsym(lib, TFL_RUNTIME_ENTRY_SYMBOL) : NULL;
    const tfl_runtime_v1* sim = get ? get(abi_version) : NULL;
    if (sim == NULL) {
      fprintf(stderr, "older_runtime: cannot load the sim runtime from TFL_TEST_SIM_LIBRARY=%s\n",
              path ? path : "(unset)");
      return NULL;
    }
    /* An older table is a prefix of every later v1 table. */
    memcpy(&table, sim, sizeof(table));
    table.struct_size = (uint32_t)sizeof(tfl_runtime_v1);
    table.name = TFL_TEST_NAME;
#ifdef TFL_TEST_SHORTER_BY /* a table shorter than v1.0: core must refuse it */
    table.struct_size -= TFL_TEST_SHORTER_BY;
#endif
#ifdef TFL_TEST_NULL_FIELD /* a v1.0 function left NULL: core must refuse it */
    table.TFL_TEST_NULL_FIELD = NULL;
#endif
  }
  return &table;
}

/* The device probe older runtimes exported off the table (before v1.2's
 * probe field): torch_fl.vendors.sdk.probe_runtime falls back to it. */
int tfl_test_probe(int* count, char* msg, size_t len) {
  *count = 3;
  if (msg && len) snprintf(msg, len, "probed off the table");
  return 0;
}
