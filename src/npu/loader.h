/*
 * loader.h - finds the Ascend runtime at run time and fills a table with
 * the functions the npu backend calls.
 *
 * CANN lays its libraries out differently from release to release (one
 * libopapi.so, or one library per operator family), and a custom kernel
 * package brings its own libcust_opapi.so.  Loading every candidate with
 * dlopen and looking each symbol up across all of them, in load order,
 * works with any layout without building against any of them.
 */
#ifndef MOEPERM_NPU_LOADER_H
#define MOEPERM_NPU_LOADER_H

#include <stddef.h>

#include "acl.h"

/* More than the default list (six names) and any sane MOEPERM_ASCEND_LIBS. */
#define ACL_MAX_LIBS 16

typedef struct acl_api {
    void *handles[ACL_MAX_LIBS]; /* dlopen handles, in load order */
    size_t num_handles;

    aclInit_fn aclInit;
    aclFinalize_fn aclFinalize;
    aclrtSetDevice_fn aclrtSetDevice;
    aclrtResetDevice_fn aclrtResetDevice;
    aclrtCreateStream_fn aclrtCreateStream;
    aclrtDestroyStream_fn aclrtDestroyStream;
    aclrtSynchronizeStream_fn aclrtSynchronizeStream;
    aclrtMalloc_fn aclrtMalloc;
    aclrtFree_fn aclrtFree;
    aclrtMemcpy_fn aclrtMemcpy;
    aclCreateTensor_fn aclCreateTensor;
    aclDestroyTensor_fn aclDestroyTensor;
    aclnnMoeTokenPermuteGradGetWorkspaceSize_fn aclnnMoeTokenPermuteGradGetWorkspaceSize;
    aclnnRun_fn aclnnMoeTokenPermuteGrad;
    aclGetRecentErrMsg_fn aclGetRecentErrMsg; /* optional: NULL when absent */
    aclrtGetSocName_fn aclrtGetSocName;       /* optional: the chip, when it can say */
    /* The other operators of the family and the int arrays of restoreShape:
     * optional, so a runtime without them still serves the others; a case
     * of a missing operator fails naming the symbol. */
    aclCreateIntArray_fn aclCreateIntArray;
    aclDestroyIntArray_fn aclDestroyIntArray;
    aclnnMoeTokenPermuteGetWorkspaceSize_fn aclnnMoeTokenPermuteGetWorkspaceSize;
    aclnnRun_fn aclnnMoeTokenPermute;
    aclnnMoeTokenUnpermuteGetWorkspaceSize_fn aclnnMoeTokenUnpermuteGetWorkspaceSize;
    aclnnRun_fn aclnnMoeTokenUnpermute;
    aclnnMoeTokenUnpermuteGradGetWorkspaceSize_fn aclnnMoeTokenUnpermuteGradGetWorkspaceSize;
    aclnnRun_fn aclnnMoeTokenUnpermuteGrad;
} acl_api;

/*
 * acl_load() loads the runtime into *api.  With MOEPERM_ASCEND_LIBS set (a
 * colon-separated list of library paths; empty counts as unset) it loads
 * exactly those, in order; otherwise libascendcl.so, libnnopbase.so and the
 * operator libraries from $ASCEND_HOME_PATH/lib64, then
 * $ASCEND_TOOLKIT_HOME/lib64, then the loader's own search path.  Returns
 * 0, or -1 with a sentence in err ("no Ascend runtime found; looked in:
 * ...", or the missing symbol's name) and nothing left loaded.
 */
int acl_load(acl_api *api, char *err, size_t err_len);

/* acl_unload() closes every library acl_load() opened and clears *api. */
void acl_unload(acl_api *api);

#endif
