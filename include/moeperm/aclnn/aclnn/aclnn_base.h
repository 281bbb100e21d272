/*
 * aclnn/aclnn_base.h - the base header every aclnn operator header
 * includes; it brings in the tensors and status type of acl_meta.h, as the
 * vendor's (CANN aclnn/aclnn_base.h) does.  The vendor's also declares
 * aclnnInit() and aclnnFinalize(), which the host runtime does not offer
 * (a program that calls them does not link; docs/aclnn-host.md).
 */
#ifndef MOEPERM_ACLNN_ACLNN_ACLNN_BASE_H
#define MOEPERM_ACLNN_ACLNN_ACLNN_BASE_H

#include <stdint.h>
#include <stdlib.h>

#include "acl_meta.h"

#endif
