/*
 * aclnn/opdev/op_errno.h - the status codes of aclnn calls (aclnnStatus).
 * The values are the vendor's (CANN opdev/op_errno.h, listed in the
 * vendor's "aclnn return codes" page).  As on the device, the operator
 * headers do not include this file: a program that names the codes
 * includes it.
 *
 * The host runtime returns ACLNN_SUCCESS, ACLNN_ERR_PARAM_NULLPTR (a NULL
 * required tensor or out-pointer), ACLNN_ERR_PARAM_INVALID (a dtype,
 * format or shape the operator does not take, or, from the second phase,
 * an index the device could not use), ACLNN_ERR_RUNTIME_ERROR (an unknown
 * stream), ACLNN_ERR_INNER (host memory ran out),
 * ACLNN_ERR_INNER_TILING_ERROR (what the device's tiling refuses) and
 * ACLNN_ERR_INNER_FIND_KERNEL_ERROR (an optional tensor of a dtype no
 * kernel takes); docs/aclnn-host.md says which check gives which.
 */
#ifndef MOEPERM_ACLNN_ACLNN_OP_ERRNO_H
#define MOEPERM_ACLNN_ACLNN_OP_ERRNO_H

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_INFERSHAPE_ERROR 561001
#define ACLNN_ERR_INNER_TILING_ERROR 561002
#define ACLNN_ERR_INNER_FIND_KERNEL_ERROR 561003
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR 561102
#define ACLNN_ERR_INNER_NULLPTR 561103
#define ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE 561104
/* The vendor's older, misspelt name of the same code, kept there for
 * programs written against it. */
#define ACLNN_ERR_INNER_KEY_CONFILICT 561105
#define ACLNN_ERR_INNER_KEY_CONFLICT 561105
#define ACLNN_ERR_INNER_INVALID_IMPL_MODE 561106
#define ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND 561107
#define ACLNN_ERR_INNER_LOAD_JSON_FAILED 561108
#define ACLNN_ERR_INNER_JSON_VALUE_NOT_FOUND 561109
#define ACLNN_ERR_INNER_JSON_FORMAT_INVALID 561110
#define ACLNN_ERR_INNER_JSON_DTYPE_INVALID 561111
#define ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND 561112
#define ACLNN_ERR_INNER_OP_FILE_INVALID 561113
#define ACLNN_ERR_INNER_ATTR_NUM_OUT_OF_BOUND 561114
#define ACLNN_ERR_INNER_ATTR_LEN_NOT_ENOUGH 561115
#define ACLNN_ERR_INNER_INPUT_NUM_IN_JSON_TOO_LARGE 561116
#define ACLNN_ERR_INNER_INPUT_JSON_IS_NULL 561117
#define ACLNN_ERR_INNER_STATIC_WORKSPACE_INVALID 561118
#define ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID 561119

#endif
