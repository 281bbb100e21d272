/*
 * aclnnop/aclnn_util.h - the export mark of the operator entry points,
 * which the operator headers include (as the vendor's do, by this name).
 */
#ifndef MOEPERM_ACLNN_ACLNNOP_ACLNN_UTIL_H
#define MOEPERM_ACLNN_ACLNNOP_ACLNN_UTIL_H

#if defined(__GNUC__)
#define ACLNN_API __attribute__((visibility("default")))
#else
#define ACLNN_API
#endif

#endif
