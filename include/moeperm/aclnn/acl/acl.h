/*
 * acl/acl.h - the entry header of the Ascend ACL runtime, as moeperm's
 * host runtime (libmoeperm-aclnn) provides it: a program written for an
 * Ascend device includes this file and builds unchanged on any Linux host
 * (docs/aclnn-host.md).
 *
 * The vendor's acl/acl.h includes the runtime, operator and model headers;
 * the same three are here, the last two empty as the vendor's are.  Every
 * name, signature and value in these headers is the vendor's (CANN's
 * acl/acl_rt.h and acl/acl_base_rt.h); the text is the project's own.
 */
#ifndef MOEPERM_ACLNN_ACL_ACL_H
#define MOEPERM_ACLNN_ACL_ACL_H

#include "acl_rt.h"
#include "acl_op.h"
#include "acl_mdl.h"

#endif
