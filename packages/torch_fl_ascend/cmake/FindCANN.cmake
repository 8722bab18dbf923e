# FindCANN: Huawei's CANN toolkit (aclrt runtime, nnopbase, the ACLNN operator library, HCCL).
#
#   find_package(CANN REQUIRED)
#
# Looks under CANN_HOME (CMake variable), else the environment's ASCEND_TOOLKIT_HOME, else
# ASCEND_HOME, else /usr/local/Ascend/ascend-toolkit/latest (shared_cmake/TorchFlSdk.cmake).
# Defines CANN_FOUND, CANN_HOME, CANN_{ACL,ACLNN}_INCLUDE_DIR,
# CANN_{ASCENDCL,NNOPBASE,OPAPI,HCCL}_LIBRARY, CANN_IS_EMULATOR (the torch-fl emulator's
# ascend_emulator.h is there) and imported targets CANN::ascendcl, CANN::nnopbase, CANN::opapi,
# CANN::hccl.
include_guard(GLOBAL)
include(TorchFlSdk)

torch_fl_find_sdk(CANN
  PRODUCT "CANN toolkit"
  HOME CANN_HOME
  ENV ASCEND_TOOLKIT_HOME ASCEND_HOME
  DEFAULT "/usr/local/Ascend/ascend-toolkit/latest"
  HEADERS ACL acl/acl.h ACLNN aclnn/acl_meta.h
  LIBRARIES ASCENDCL ascendcl NNOPBASE nnopbase OPAPI opapi HCCL hccl
  EMULATOR_HEADER ascend_emulator.h
  PACKAGE ascend)
if(CANN_FOUND)
  set_property(TARGET CANN::nnopbase CANN::hccl PROPERTY INTERFACE_LINK_LIBRARIES CANN::ascendcl)
  set_property(TARGET CANN::opapi PROPERTY INTERFACE_LINK_LIBRARIES CANN::nnopbase)
endif()
