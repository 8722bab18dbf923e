/*
 * acl/acl.h of the torch-fl CANN emulator: process initialisation, on top of the runtime API.
 */
#ifndef ACL_ACL_H_
#define ACL_ACL_H_

#include "acl_mdl.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAJOR_VERSION 8
#define ACL_MINOR_VERSION 0
#define ACL_PATCH_VERSION 0

/* Once per process; a repeat returns ACL_ERROR_REPEAT_INITIALIZE. configPath may be NULL. */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize();
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion,
                                             int32_t* patchVersion);

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_H_ */
