/*
 * acl/acl_base.h - the base types of the ACL runtime: it gathers the
 * runtime's base header and the error-code headers, as the vendor's does.
 */
#ifndef MOEPERM_ACLNN_ACL_ACL_BASE_H
#define MOEPERM_ACLNN_ACL_ACL_BASE_H

#include "acl_base_rt.h"
#include "acl_base_mdl.h"
#include "error_codes/rt_error_codes.h"
#include "error_codes/ge_error_codes.h"

#endif
