/*
 * acl/error_codes/ge_error_codes.h - the graph engine's error codes.  The
 * host runtime has no graph engine and returns none of them, so none are
 * defined; the file exists because acl/acl_base.h includes it, as the
 * vendor's does.
 */
#ifndef MOEPERM_ACLNN_ACL_GE_ERROR_CODES_H
#define MOEPERM_ACLNN_ACL_GE_ERROR_CODES_H
#endif
