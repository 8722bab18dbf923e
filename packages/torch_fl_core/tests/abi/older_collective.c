/* A collective library built against the frozen v1.0 header
 * (collective_v1_0.h): its table ends where v1.0 ended, struct_size
 * included. It serves the sim library's functions (dlopen of
 * TFL_TEST_SIM_LIBRARY), so a newer core loading it runs real collectives
 * through a v1.0 table. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective_v1_0.h"

static tfl_collective_v1 table;

const tfl_collective_v1* tfl_collective_get(uint32_t abi_version) {
  if (abi_version != TFL_COLLECTIVE_ABI_VERSION) return NULL;
  if (table.struct_size == 0) {
    const char* path = getenv("TFL_TEST_SIM_LIBRARY");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    tfl_collective_get_fn get =
        lib ? (tfl_collective_get_fn)dlsym(lib, TFL_COLLECTIVE_ENTRY_SYMBOL) : NULL;
    const tfl_collective_v1* sim = get ? get(abi_version) : NULL;
    if (sim == NULL) {
      fprintf(stderr, "older_collective: no sim collective library at TFL_TEST_SIM_LIBRARY=%s\n",
              path ? path : "(unset)");
      return NULL;
    }
    /* An older table is a prefix of every later v1 table. */
    memcpy(&table, sim, sizeof(table));
    table.struct_size = (uint32_t)sizeof(tfl_collective_v1);
    table.name = "sim-v1.0";
  }
  return &table;
}
