/*
 * acl/acl_base_mdl.h - empty, as the vendor's is: no model types here.
 */
#ifndef MOEPERM_ACLNN_ACL_ACL_BASE_MDL_H
#define MOEPERM_ACLNN_ACL_ACL_BASE_MDL_H
#endif
