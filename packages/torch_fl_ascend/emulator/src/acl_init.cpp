// aclInit / aclFinalize, the version and the data type sizes.
#include <unistd.h>

#include "acl_state.h"

using namespace acl_emu;

extern "C" {

aclError aclInit(const char* configPath) {
  State& s = S();
  if (int injected = s.ledger.enter("aclInit")) return fail(injected, "aclInit: injected fault");
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.initialized)
    return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised in this process");
  if (configPath != nullptr && configPath[0] != '\0' && access(configPath, R_OK) != 0)
    return fail(ACL_ERROR_INVALID_FILE, "aclInit: config file '%s' cannot be read", configPath);
  if (!s.ever_initialized) {
    const size_t n = emu_kit::env_size("ASCEND_EMU_DEVICES", 2);
    const size_t mb = emu_kit::env_size("ASCEND_EMU_MEMORY_MB", 4096);
    s.devices.resize(n);
    for (size_t i = 0; i < n; ++i) {
      s.devices[i].id = static_cast<int32_t>(i);
      s.devices[i].memory.capacity = mb << 20;
      s.devices[i].peer.assign(n, false);
    }
    s.ever_initialized = true;
  }
  s.initialized = true;
  return ACL_SUCCESS;
}

aclError aclFinalize() {
  ACL_ENTER("aclFinalize");
  State& s = S();
  std::vector<StreamRef> all;
  for (int32_t d = 0; d < static_cast<int32_t>(s.devices.size()); ++d) {
    for (StreamRef& st : device_streams(d)) all.push_back(std::move(st));
  }
  std::string ignored;
  for (const StreamRef& st : all) st->drain(&ignored);
  std::lock_guard<std::mutex> lk(s.mu);
  s.initialized = false;
  return ACL_SUCCESS;
}

aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion) {
  if (int injected = S().ledger.enter("aclrtGetVersion"))
    return fail(injected, "aclrtGetVersion: injected fault");
  if (!majorVersion || !minorVersion || !patchVersion)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: NULL output");
  *majorVersion = ACL_MAJOR_VERSION;
  *minorVersion = ACL_MINOR_VERSION;
  *patchVersion = ACL_PATCH_VERSION;
  return ACL_SUCCESS;
}

size_t aclDataTypeSize(aclDataType dataType) {
  switch (dataType) {
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8:
      return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
      return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_COMPLEX32:
      return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
    case ACL_COMPLEX64:
      return 8;
    case ACL_COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

}  // extern "C"
