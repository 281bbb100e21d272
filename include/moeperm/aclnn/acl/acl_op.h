/*
 * acl/acl_op.h - empty, as the vendor's is: the single-operator API
 * (aclop*) has given way to aclnn, and the host runtime does not offer it.
 */
#ifndef MOEPERM_ACLNN_ACL_ACL_OP_H
#define MOEPERM_ACLNN_ACL_ACL_OP_H
#endif
