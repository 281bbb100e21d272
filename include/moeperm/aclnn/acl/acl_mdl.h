/*
 * acl/acl_mdl.h - empty, as the vendor's is: the host runtime runs no
 * offline models.
 */
#ifndef MOEPERM_ACLNN_ACL_ACL_MDL_H
#define MOEPERM_ACLNN_ACL_ACL_MDL_H
#endif
