/*
 * moeperm.h - the public API of libmoeperm.
 *
 * libmoeperm computes the four mixture-of-experts token operators of the
 * Ascend Atlas A2/A3 kernels on the CPU, with exactly their arithmetic
 * (docs/arithmetic.md): MoeTokenPermute (dispatch), MoeTokenUnpermute
 * (combine) and their backwards MoeTokenPermuteGrad and
 * MoeTokenUnpermuteGrad.  Its operator API mirrors the vendor's two-phase
 * aclnn API, so code written against aclnnMoeTokenPermuteGrad and the
 * others can use it as a CPU fallback.
 *
 * This header is the whole public surface: C11, no other header needed.
 * Every function is safe to call from several threads at once on distinct
 * objects; moeperm_last_error() is per thread.
 */
#ifndef MOEPERM_H
#define MOEPERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(MOEPERM_DLL_BUILD)
#define MOEPERM_API __declspec(dllexport)
#elif defined(__GNUC__)
#define MOEPERM_API __attribute__((visibility("default")))
#else
#define MOEPERM_API
#endif

/* ---------------------------------------------------------------------- */
/* Version                                                                */
/* ---------------------------------------------------------------------- */

/* MOEPERM_VERSION_MAJOR, _MINOR, _PATCH and MOEPERM_VERSION_STRING, made
 * by the build from the project's version. */
#include <moeperm/version.h>

/*
 * moeperm_version() returns the version of the library that is linked, as
 * "MAJOR.MINOR.PATCH".  Compare it with MOEPERM_VERSION_STRING to detect a
 * header/library mismatch.  The string is static; thread safe.
 */
MOEPERM_API const char *moeperm_version(void);

/* ---------------------------------------------------------------------- */
/* Data types and status codes                                            */
/* ---------------------------------------------------------------------- */

/* Element types.  The values equal the vendor's aclDataType. */
typedef enum moeperm_dtype {
    MOEPERM_FLOAT = 0,   /* IEEE binary32 */
    MOEPERM_FLOAT32 = 0, /* the same: the name most users type */
    MOEPERM_FLOAT16 = 1, /* IEEE binary16 */
    MOEPERM_INT8 = 2,    /* two's complement 8-bit */
    MOEPERM_INT32 = 3,   /* two's complement 32-bit */
    MOEPERM_INT64 = 9,   /* two's complement 64-bit */
    MOEPERM_FLOAT64 = 11, /* IEEE binary64: exact reference values; no operator takes it */
    MOEPERM_BF16 = 27    /* bfloat16: the upper half of a binary32 */
} moeperm_dtype;

/*
 * moeperm_dtype_size() returns the bytes of one element of dtype (1, 2, 4
 * or 8), or 0 for a value that is not one of the dtypes above.
 * moeperm_dtype_name() returns its name as golden data spells it
 * ("float32", "float16", "bf16", "int8", "int32", "int64", "float64"), or
 * "unknown".  Static strings; thread safe.
 */
MOEPERM_API size_t moeperm_dtype_size(moeperm_dtype dtype);
MOEPERM_API const char *moeperm_dtype_name(moeperm_dtype dtype);

/* The operators of the family.  The values are the project's own. */
typedef enum moeperm_op {
    MOEPERM_OP_PERMUTE_GRAD = 1,  /* MoeTokenPermuteGrad */
    MOEPERM_OP_PERMUTE = 2,       /* MoeTokenPermute */
    MOEPERM_OP_UNPERMUTE = 3,     /* MoeTokenUnpermute */
    MOEPERM_OP_UNPERMUTE_GRAD = 4 /* MoeTokenUnpermuteGrad */
} moeperm_op;

/*
 * moeperm_op_name() returns the vendor's name of an operator, such as
 * "MoeTokenPermuteGrad", or NULL for a value that is not one.
 * moeperm_op_parse() is its inverse: it returns the operator named name, or
 * 0 when name is none of them.  Static strings; thread safe.
 */
MOEPERM_API const char *moeperm_op_name(moeperm_op op);
MOEPERM_API moeperm_op moeperm_op_parse(const char *name);

/*
 * Status codes.  The values equal the vendor's aclnnStatus.  An operator
 * refuses what the Atlas A2/A3 device refuses, with the device's code, and
 * what the device's kernel gives no determined result for, with 161002;
 * moeperm_last_error() then begins "the device refuses" or "the device's
 * result is undetermined" (docs/operators.md, "The input domain").
 */
typedef int32_t moeperm_status;
#define MOEPERM_SUCCESS 0                /* the call did what it says */
#define MOEPERM_ERR_PARAM_NULLPTR 161001 /* a required tensor, pointer or out-pointer is NULL */
#define MOEPERM_ERR_PARAM_INVALID 161002 /* a dtype, shape, attribute or index is not accepted */
#define MOEPERM_ERR_RUNTIME_ERROR 361001 /* a runtime failed (device, memory, stream) */
#define MOEPERM_ERR_INNER 561000         /* internal failure, e.g. memory allocation */
#define MOEPERM_ERR_INNER_TILING_ERROR 561002 /* the device's tiling refuses the shapes or attributes */

/*
 * moeperm_status_name() returns the name of a status code, such as
 * "MOEPERM_ERR_PARAM_INVALID", or "MOEPERM_UNKNOWN_STATUS" for a value that
 * is not one of the codes above.  The string is static; thread safe.
 */
MOEPERM_API const char *moeperm_status_name(moeperm_status status);

/*
 * moeperm_last_error() returns a sentence describing the most recent failure
 * of a moeperm call made on the calling thread, naming the offending value,
 * for example "the device's result is undetermined: sorted_indices[17] =
 * -1 is negative: the kernel would address row -1 of permuted_output_grad,
 * outside the tensor".  It returns
 * "" when no call on this thread has failed yet.  A successful call does
 * not clear it.  The string belongs to the library and stays valid until
 * the next failing moeperm call on the same thread.  Thread-local.
 */
MOEPERM_API const char *moeperm_last_error(void);

/* ---------------------------------------------------------------------- */
/* Tensors                                                                */
/* ---------------------------------------------------------------------- */

/* An opaque view of memory, like aclTensor. */
typedef struct moeperm_tensor moeperm_tensor;

/* The most dimensions a tensor may have (as for aclTensor). */
#define MOEPERM_MAX_DIMS 8

/*
 * moeperm_tensor_create() describes, without copying or owning it, an
 * ndim-dimensional view of the memory at data: element (i0, ..., in-1) lives
 * at element index offset + sum(i_j * strides[j]) from data.
 *
 * dims: ndim non-negative extents (ndim <= MOEPERM_MAX_DIMS; dims may be NULL
 *       only when ndim is 0).
 * strides: ndim non-negative strides in elements, or NULL for the
 *       contiguous row-major layout.
 * offset: a non-negative offset in elements.
 * data: the memory; it stays the caller's and must outlive every use of the
 *       tensor.  It may be NULL for a tensor with no elements.
 *
 * Any dtype value is accepted here; the operator checks dtypes.  Returns
 * the new tensor, or NULL (with moeperm_last_error() set) for a negative
 * dim, stride or offset, too many dims, NULL dims with ndim > 0, or
 * allocation failure.  The caller owns the tensor and frees it with
 * moeperm_tensor_destroy().  Thread safe.
 */
MOEPERM_API moeperm_tensor *moeperm_tensor_create(const int64_t *dims, uint64_t ndim,
                                                  moeperm_dtype dtype, const int64_t *strides,
                                                  int64_t offset, void *data);

/* moeperm_tensor_destroy() frees a tensor (not its data).  NULL is a no-op. */
MOEPERM_API void moeperm_tensor_destroy(moeperm_tensor *tensor);

/* ---------------------------------------------------------------------- */
/* The operator: MoeTokenPermuteGrad                                      */
/* ---------------------------------------------------------------------- */

/* An opaque, single-use plan, like aclOpExecutor. */
typedef struct moeperm_executor moeperm_executor;

/* The largest top_k the operators accept: MoeTokenPermute's and
 * MoeTokenUnpermuteGrad's tilings refuse more on Atlas A2/A3, and the
 * vendor documents no more for the other two. */
#define MOEPERM_MAX_TOP_K 512

/*
 * The input domain (docs/operators.md, "The input domain", has every rule
 * with the vendor's file and line).  Each operator accepts every input on
 * which the Atlas A2/A3 kernel's result is determined by its source, and
 * gives that result; it refuses what the device refuses, with the device's
 * status (MOEPERM_ERR_PARAM_NULLPTR for a NULL required tensor,
 * MOEPERM_ERR_PARAM_INVALID for a dtype, MOEPERM_ERR_INNER_TILING_ERROR for
 * what the device's tiling refuses), and what the device gives no
 * determined result for (MOEPERM_ERR_PARAM_INVALID): a negative index, two
 * writes of one row, a tensor read past its end.  moeperm_last_error()
 * then begins "the device refuses" or "the device's result is
 * undetermined:".  Common to all four: when every output has no elements
 * (or, for an optional output, is NULL), the call succeeds and does
 * nothing, after the NULL and dtype checks and before any other, as the
 * device skips its tiling then.  In sorted_indices, an entry at or above
 * the rows R of the permuted tensor is a dropped slot, and rows may be
 * named by several slots (MoeTokenUnpermuteGrad excepted, which writes
 * them).
 */

/*
 * moeperm_token_permute_grad_get_workspace_size() validates the arguments of
 * MoeTokenPermuteGrad and plans it, like
 * aclnnMoeTokenPermuteGradGetWorkspaceSize():
 *
 *   out[t, h] = sum over k = 0..K-1 of
 *               permuted_output_grad[sorted_indices[t*K + k], h]
 *
 * with the arithmetic of docs/arithmetic.md (fp32 accumulator started from
 * the first slot, slots added in k order, one round-to-nearest-even
 * narrowing; slots whose index is >= R, the rows of permuted_output_grad,
 * are dropped, and a sum with slot 0 dropped starts from +0.0).
 *
 * permuted_output_grad: [R, H], FLOAT, FLOAT16 or BF16; any R.
 * sorted_indices: [L], INT32, every entry read non-negative; rows may
 *       repeat, entries >= R are dropped slots.  T = floor(L / K) tokens
 *       are summed; the last L mod K entries are never read.
 * num_topk: K, in [1, MOEPERM_MAX_TOP_K], or -1, which means 1 (as the
 *       device's tiling takes it); 0 and below -1 have no determined
 *       result on the device and are refused.
 * padded_mode: ignored, as the Atlas A2/A3 tiling ignores it.
 * out: [T, H], the dtype of permuted_output_grad; its elements must not
 *       overlap each other nor the inputs.
 * workspace_size: receives the workspace the run needs (0 on the CPU).
 * executor: receives the plan.  The plan copies the tensor descriptors, so
 *       the tensor objects may be destroyed before the run; the memory they
 *       view must stay valid until the run.
 *
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL tensor,
 * out-pointer or data pointer, MOEPERM_ERR_PARAM_INVALID for anything
 * outside the input domain above (every index read is checked), or
 * MOEPERM_ERR_INNER when memory runs out.  On failure *executor is set to
 * NULL (when executor is not NULL), the memory of out is untouched and
 * moeperm_last_error() names the offending value.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_token_permute_grad_get_workspace_size(
    const moeperm_tensor *permuted_output_grad, const moeperm_tensor *sorted_indices,
    int64_t num_topk, bool padded_mode, moeperm_tensor *out, uint64_t *workspace_size,
    moeperm_executor **executor);

/*
 * moeperm_token_permute_grad() runs a plan, like aclnnMoeTokenPermuteGrad(),
 * and frees the executor whether it succeeds or not: a plan runs once.
 *
 * workspace, workspace_size: the workspace asked for by the first phase
 *       (0 bytes on the CPU, so workspace may be NULL).
 * stream: must be NULL on the CPU (MOEPERM_ERR_PARAM_INVALID otherwise).
 *
 * The result is written to out's memory.  It does not depend on the number
 * of threads.  Work is split over OpenMP threads when the library is built
 * with OpenMP.  Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a
 * NULL executor, or MOEPERM_ERR_PARAM_INVALID for a stream or an executor
 * planned by another operator (the workspace is never read: any size is
 * enough); on failure out is untouched.
 * Thread safe for distinct executors.
 */
MOEPERM_API moeperm_status moeperm_token_permute_grad(void *workspace, uint64_t workspace_size,
                                                      moeperm_executor *executor, void *stream);

/*
 * moeperm_executor_destroy() frees a plan, of any operator, that will not
 * be run.  NULL is a no-op.  Never call it on a plan that a second phase
 * (moeperm_token_permute_grad() or another operator's) has taken: that call
 * already freed it.
 */
MOEPERM_API void moeperm_executor_destroy(moeperm_executor *executor);

/*
 * moeperm_executor_run() runs a plan of any operator: it is the second
 * phase of the operator whose first phase made the plan
 * (moeperm_token_permute_grad(), moeperm_token_permute(),
 * moeperm_token_unpermute() or moeperm_token_unpermute_grad()), with its
 * arguments, results and failures, for callers that handle the operators
 * alike.  It frees the executor whether it succeeds or not.  Thread safe
 * for distinct executors.
 */
MOEPERM_API moeperm_status moeperm_executor_run(void *workspace, uint64_t workspace_size,
                                                moeperm_executor *executor, void *stream);

/* ---------------------------------------------------------------------- */
/* The operator: MoeTokenPermute                                          */
/* ---------------------------------------------------------------------- */

/* Expert ids MoeTokenPermute sorts correctly: [0, MOEPERM_MAX_EXPERT_ID],
 * plus the minimum and the maximum of the index dtype as sentinels.  N*top_k
 * must stay below MOEPERM_MAX_EXPERT_ID + 1 too (both as on Atlas A2/A3,
 * whose sort uses binary32 keys). */
#define MOEPERM_MAX_EXPERT_ID 16777214

/*
 * moeperm_token_permute_get_workspace_size() validates the arguments of
 * MoeTokenPermute (the forward dispatch) and plans it, like
 * aclnnMoeTokenPermuteGetWorkspaceSize().  With N tokens, K = top_k and the
 * flattened expert ids e[i] = indices[i / K, i % K]:
 *
 *   sorted_indices_out[i] = the position of entry i in a stable ascending
 *                           sort of e (equal ids keep their order)
 *   permute_tokens_out[sorted_indices_out[i]] = tokens[i / K]
 *                           for every i with sorted_indices_out[i] < num_out
 *
 * where num_out is num_out_tokens + N*K when num_out_tokens <= 0 (0 keeps
 * every copy, -d drops the last d), else num_out_tokens, then clamped to
 * [0, N*K].  sorted_indices_out equals moeperm_route_sorted_indices() of the
 * same ids.  The copy moves bits unchanged, NaN payloads included; no
 * arithmetic is done (docs/operators.md).
 *
 * tokens: [N, ...] of rank 2 or more, FLOAT, FLOAT16, BF16 or INT8; a
 *       token is the H elements of the dims after the first, in row-major
 *       order (H = their product).
 * indices: [N, K] or [N] (then K = 1), INT32 or INT64; K <=
 *       MOEPERM_MAX_TOP_K and N*K <= MOEPERM_MAX_EXPERT_ID.  Every id
 *       lies in [0, MOEPERM_MAX_EXPERT_ID] or is exactly the minimum (sorts
 *       first) or the maximum (sorts last) of the index dtype (the device's
 *       binary32 sort keys order nothing else exactly).
 * num_out_tokens: any value, by the rule above.
 * padded_mode: must be false (the device's tiling refuses true).
 * permute_tokens_out: [num_out, ...] of rank 2 or more whose dims after
 *       the first multiply to H, the dtype of tokens.
 * sorted_indices_out: [N*K], INT32.  No two output elements may share
 *       memory, and neither output may overlap an input or the other output.
 *
 * The device's tiling refuses, with MOEPERM_ERR_INNER_TILING_ERROR, in its
 * order: padded_mode = true, tokens of rank < 2, indices of a rank other
 * than 1 or 2, indices whose rows are not N, K > MOEPERM_MAX_TOP_K, N*K >
 * MOEPERM_MAX_EXPERT_ID, and outputs of another rank or shape.
 * workspace_size: receives the workspace the run needs (0 on the CPU).
 * executor: receives the plan, as for moeperm_token_permute_grad_get_
 *       workspace_size(): it copies the descriptors, not the memory.
 *
 * Views may be strided (any non-negative strides).  Returns
 * MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL tensor or
 * out-pointer or a NULL data pointer with elements, MOEPERM_ERR_PARAM_INVALID
 * for a dtype or an id outside the set above (every id is checked),
 * MOEPERM_ERR_INNER_TILING_ERROR for what the device's tiling refuses, or
 * MOEPERM_ERR_INNER when memory runs out.  On failure *executor is set to
 * NULL (when executor is not NULL), the outputs' memory is untouched and
 * moeperm_last_error() names the offending value.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_token_permute_get_workspace_size(
    const moeperm_tensor *tokens, const moeperm_tensor *indices, int64_t num_out_tokens,
    bool padded_mode, moeperm_tensor *permute_tokens_out, moeperm_tensor *sorted_indices_out,
    uint64_t *workspace_size, moeperm_executor **executor);

/*
 * moeperm_token_permute() runs a plan of
 * moeperm_token_permute_get_workspace_size(), like aclnnMoeTokenPermute(),
 * and frees the executor whether it succeeds or not.
 *
 * workspace, workspace_size: as planned (0 bytes on the CPU).
 * stream: must be NULL on the CPU.
 *
 * Writes both outputs; rows of permute_tokens_out are each written once.
 * The result does not depend on the number of threads.  Returns
 * MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL executor,
 * MOEPERM_ERR_PARAM_INVALID for a stream or an executor planned by another
 * operator, or MOEPERM_ERR_INNER when memory for the sort runs out; on
 * failure the outputs are untouched.  Thread safe for distinct executors.
 */
MOEPERM_API moeperm_status moeperm_token_permute(void *workspace, uint64_t workspace_size,
                                                 moeperm_executor *executor, void *stream);

/* ---------------------------------------------------------------------- */
/* The operator: MoeTokenUnpermute                                        */
/* ---------------------------------------------------------------------- */

/*
 * moeperm_token_unpermute_get_workspace_size() validates the arguments of
 * MoeTokenUnpermute (the forward combine) and plans it, like
 * aclnnMoeTokenUnpermuteGetWorkspaceSize().  For every token n and column
 * h, with s_k = sorted_indices[n*K + k], x_k = (float)permuted_tokens[s_k, h]
 * and p_k = (float)probs[n, k]:
 *
 *   slot k is included  iff  s_k < R  and (with probs) p_k != 0
 *   acc = included(0) ? x_0 * p_0 : +0.0f
 *   acc = acc + x_k * p_k     for k = 1..K-1 in order, when included(k)
 *   out[n, h] = narrow(acc)
 *
 * every product and every sum one IEEE binary32 operation rounded to
 * nearest even (never fused), the narrowing one round-to-nearest-even step
 * (docs/operators.md).  A +0 or -0 prob skips its row entirely, so an inf
 * or NaN there never reaches the sum.  Without probs K = 1 and nothing is
 * multiplied: the result has the bits of moeperm_token_permute_grad() with
 * num_topk = 1.
 *
 * permuted_tokens: [R, H], FLOAT, FLOAT16 or BF16; any R.
 * sorted_indices: [L], INT32, L >= N*K (the first N*K entries are read, the
 *       rest never), every entry read non-negative; rows may repeat,
 *       entries >= R are dropped slots.
 * probs: [N, K], FLOAT, FLOAT16 or BF16 (independent of the tokens' dtype),
 *       K in [1, MOEPERM_MAX_TOP_K] (with K = 0 the device's kernel reads a
 *       slot no token has); or NULL for none (then K = 1 and N = L).
 * padded_mode: ignored, as the Atlas A2/A3 host code ignores it.
 * restore_shape, restore_shape_len: the vendor's optional restoreShape,
 *       never read (nor dereferenced), as on Atlas A2/A3: any pointer and
 *       length, NULL with a length too.
 * out: [N, H], the dtype of permuted_tokens; no two of its elements may
 *       share memory, and it may not overlap an input.
 * workspace_size, executor: as for moeperm_token_permute_get_workspace_size().
 *
 * Views may be strided.  Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR
 * for a NULL required tensor or out-pointer or a NULL data pointer with
 * elements, MOEPERM_ERR_PARAM_INVALID for anything outside the input domain
 * (every index read is checked), or MOEPERM_ERR_INNER when memory runs
 * out.  On failure *executor is set to NULL (when executor is
 * not NULL), the memory of out is untouched and moeperm_last_error() names
 * the offending value.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_token_unpermute_get_workspace_size(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *sorted_indices,
    const moeperm_tensor *probs, bool padded_mode, const int64_t *restore_shape,
    uint64_t restore_shape_len, moeperm_tensor *out, uint64_t *workspace_size,
    moeperm_executor **executor);

/*
 * moeperm_token_unpermute() runs a plan of
 * moeperm_token_unpermute_get_workspace_size(), like
 * aclnnMoeTokenUnpermute(), and frees the executor whether it succeeds or
 * not.
 *
 * workspace, workspace_size: as planned (0 bytes on the CPU).
 * stream: must be NULL on the CPU.
 *
 * The result does not depend on the number of threads nor on the caller's
 * floating-point environment (as for moeperm_token_permute_grad()).
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL executor,
 * or MOEPERM_ERR_PARAM_INVALID for a stream or an executor planned by
 * another operator; on failure out is untouched.  Thread safe for distinct
 * executors.
 */
MOEPERM_API moeperm_status moeperm_token_unpermute(void *workspace, uint64_t workspace_size,
                                                   moeperm_executor *executor, void *stream);

/* ---------------------------------------------------------------------- */
/* The operator: MoeTokenUnpermuteGrad                                    */
/* ---------------------------------------------------------------------- */

/*
 * MoeTokenUnpermuteGrad is the backward of the combine (MoeTokenUnpermute).
 * With N = tokens_num, K = top_k, H = hidden_size, R = num_out_tokens (the
 * rows of permuted_tokens) and g = unpermuted_tokens_grad, for every slot
 * i = n*K + k whose row s = sorted_indices[i] is below R:
 *
 *   permuted_tokens_grad[s, h] = narrow(g[n, h] * probs[n, k])   (with probs)
 *   permuted_tokens_grad[s, h] = g[n, h], bits unchanged           (without)
 *
 * and, with probs, probs_grad[n, k] = narrow(S) where S is the dot product
 * of row s of permuted_tokens (zeros when s >= R) with g[n], summed in the
 * order the Ascend kernel sums it: the hidden dimension cut into chunks by
 * the kernel's tiling, each chunk reduced by halving adds and pairwise
 * block sums, the chunk sums added in order to +0.0, one round-to-nearest-
 * even narrowing (docs/unpermute-grad.md has the whole model and a worked
 * example).  The chunking depends on two parameters of the chip, the
 * unified-buffer bytes and the number of vector cores: a plan uses the
 * Atlas A2 values unless moeperm_executor_set_chip() says otherwise.  The
 * order inside the AscendC reduction instructions is the documented one
 * (pairwise over adjacent elements) and is a model until a device run
 * confirms it; moeperm_token_unpermute_grad_exact_probs_grad() gives the
 * exact value, to tell a device that sums in another order from a wrong
 * one.
 */

/* The parameters of an Ascend chip that the kernel's tiling reads. */
typedef struct moeperm_chip {
    int64_t ub_bytes;     /* unified-buffer bytes of one vector core */
    int64_t vector_cores; /* vector (AIV) cores the tokens are spread over */
} moeperm_chip;

/* Atlas A2 (and A3): the values the vendor's kernel tests use and the
 * default of every plan; they are those of the named chips of 48 vector
 * cores below (Ascend910B1, B2, B2C, Ascend910_9381, 9382, 9391, 9392). */
#define MOEPERM_CHIP_A2_UB_BYTES 196352
#define MOEPERM_CHIP_A2_VECTOR_CORES 48

/*
 * The named Atlas A2 (SoC family Ascend910B) and A3 (Ascend910_93) chips,
 * as initialisers: `moeperm_chip chip = MOEPERM_CHIP_ASCEND910B3;`.  The
 * numbers come from the vendor's platform configuration of each chip
 * (hicann/runtime, src/platform/platform_config/cann/<name>.ini): every one
 * has ub_size = 196608, of which the tiling sees 196352, since
 * PlatformAscendC::GetCoreMemSize() keeps 256 bytes back on the Ascend910B
 * and Ascend910_93 families (cannmirror/asc-devkit,
 * impl/utils/tiling/platform/platform_ascendc.cpp, LOCAL_RESERV_SIZE); the
 * vector cores are the file's vector_core_cnt, which GetCoreNumAiv()
 * returns for their core_type_list CubeCore,VectorCore.  No source fixes
 * the numbers of any other chip, so none is named here.
 */
#define MOEPERM_CHIP_ASCEND910B1 {196352, 48}
#define MOEPERM_CHIP_ASCEND910B2 {196352, 48}
#define MOEPERM_CHIP_ASCEND910B2C {196352, 48}
#define MOEPERM_CHIP_ASCEND910B3 {196352, 40}
#define MOEPERM_CHIP_ASCEND910B4 {196352, 40}
#define MOEPERM_CHIP_ASCEND910B4_1 {196352, 40}
#define MOEPERM_CHIP_ASCEND910_9362 {196352, 40}
#define MOEPERM_CHIP_ASCEND910_9363 {196352, 40}
#define MOEPERM_CHIP_ASCEND910_9372 {196352, 40}
#define MOEPERM_CHIP_ASCEND910_9381 {196352, 48}
#define MOEPERM_CHIP_ASCEND910_9382 {196352, 48}
#define MOEPERM_CHIP_ASCEND910_9391 {196352, 48}
#define MOEPERM_CHIP_ASCEND910_9392 {196352, 48}

/*
 * moeperm_chip_by_name() sets *chip to the named chip above; name is the
 * vendor's SoC_version, spelled as in moeperm_chip_names() (for example
 * "Ascend910B4-1", "Ascend910_9382").  Returns MOEPERM_SUCCESS,
 * MOEPERM_ERR_PARAM_NULLPTR for a NULL name or chip, or
 * MOEPERM_ERR_PARAM_INVALID for a name that is none of them (*chip
 * untouched, moeperm_last_error() naming it).  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_chip_by_name(const char *name, moeperm_chip *chip);

/*
 * moeperm_chip_names() returns the names moeperm_chip_by_name() knows, in
 * the order above, separated by single spaces.  The string is static;
 * thread safe.
 */
MOEPERM_API const char *moeperm_chip_names(void);
/* The accepted ranges.  Below the smallest buffer the tiling's arithmetic
 * leaves no room for one chunk at top_k = 512; the largest values are far
 * beyond any chip and only keep the arithmetic in range. */
#define MOEPERM_CHIP_MIN_UB_BYTES 32768
#define MOEPERM_CHIP_MAX_UB_BYTES 16777216
#define MOEPERM_CHIP_MAX_VECTOR_CORES 4096

/*
 * moeperm_token_unpermute_grad_get_workspace_size() validates the arguments
 * of MoeTokenUnpermuteGrad and plans it, like
 * aclnnMoeTokenUnpermuteGradGetWorkspaceSize() on Atlas A2/A3.
 *
 * permuted_tokens: [R, H], FLOAT, FLOAT16 or BF16 (the forward's permuted
 *       tokens; read only with probs, but always checked); any R >= 1.
 * unpermuted_tokens_grad: [N, H], the dtype of permuted_tokens.
 * sorted_indices: [L], INT32, L >= N*K (the first N*K entries are read, the
 *       rest never), every entry read non-negative.  An entry below R names
 *       the row its slot writes, and no two slots may name the same row
 *       (the device's cores would race to write it); entries >= R are
 *       dropped slots, any number of them equal: they write no row, and
 *       their probs_grad is the dot product with a row of zeros (+0, or NaN
 *       when g[n] holds an inf or a NaN).
 * probs: [N, K], FLOAT, FLOAT16 or BF16 (independent of the tokens' dtype),
 *       K in [1, MOEPERM_MAX_TOP_K]; or NULL, and then K = 1.
 * padded_mode: ignored: the Atlas A2/A3 tiling runs the non-padded kernel
 *       whatever it says.
 * restore_shape, restore_shape_len: never read (nor dereferenced), as on
 *       Atlas A2/A3: any pointer and length, NULL with a length too.
 * permuted_tokens_grad_out: [R, H], the tokens' dtype.  The rows the slots
 *       name are written; every other row, and the gaps of a strided view,
 *       keep the caller's bytes (as the device leaves them).
 * probs_grad_out: with probs, [N, K], the dtype of probs, required.  A NaN
 *       result is the quiet NaN 0x7fc00000 narrowed (bf16 0x7fc0, fp16
 *       0x7e00): which NaN a device gives is not modelled.  Without probs it
 *       is never written: NULL, or any tensor of FLOAT, FLOAT16 or BF16
 *       (torch_npu passes a 0-d one), left as it is.
 * The two outputs must not overlap each other, themselves or any input.
 *
 * The device's tiling refuses, with MOEPERM_ERR_INNER_TILING_ERROR, a 0
 * among N, K, H and R, and K > MOEPERM_MAX_TOP_K, unless every output is
 * empty (then the call does nothing).  A tensor of more bytes than the
 * largest Atlas A2/A3 chip holds (64 GiB) reaches no device and is refused.
 * workspace_size: receives the workspace the run needs (0 on the CPU).
 * executor: receives the plan, which copies the tensor descriptors (the
 *       tensor objects may be destroyed before the run; the memory they
 *       view must stay valid until the run).
 *
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL required
 * tensor, out-pointer or data pointer (and for probs_grad_out NULL when
 * probs is given), MOEPERM_ERR_PARAM_INVALID for anything outside the input
 * domain (every index read is checked), MOEPERM_ERR_INNER_TILING_ERROR for
 * what the device's tiling refuses, or MOEPERM_ERR_INNER when memory runs
 * out.  On failure *executor is set to
 * NULL (when executor is not NULL), the outputs are untouched and
 * moeperm_last_error() names the offending value.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_token_unpermute_grad_get_workspace_size(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *unpermuted_tokens_grad,
    const moeperm_tensor *sorted_indices, const moeperm_tensor *probs, bool padded_mode,
    const int64_t *restore_shape, uint64_t restore_shape_len,
    moeperm_tensor *permuted_tokens_grad_out, moeperm_tensor *probs_grad_out,
    uint64_t *workspace_size, moeperm_executor **executor);

/*
 * moeperm_executor_set_chip() makes a plan of MoeTokenUnpermuteGrad use the
 * tiling of another chip; call it between the two phases.  ub_bytes must be
 * in [MOEPERM_CHIP_MIN_UB_BYTES, MOEPERM_CHIP_MAX_UB_BYTES] and
 * vector_cores in [1, MOEPERM_CHIP_MAX_VECTOR_CORES].  Only probs_grad
 * depends on the chip; a plan without probs accepts a chip and computes the
 * same bits.
 *
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL executor or
 * chip, or MOEPERM_ERR_PARAM_INVALID for a value out of range or an
 * executor of another operator (whose arithmetic has no chip parameter);
 * on failure the plan keeps its chip, stays valid and stays the caller's.
 * Not thread safe for one executor; thread safe for distinct ones.
 */
MOEPERM_API moeperm_status moeperm_executor_set_chip(moeperm_executor *executor,
                                                     const moeperm_chip *chip);

/*
 * moeperm_token_unpermute_grad() runs a plan, like
 * aclnnMoeTokenUnpermuteGrad(), and frees the executor whether it succeeds
 * or not: a plan runs once.
 *
 * workspace, workspace_size: the workspace asked for by the first phase
 *       (0 bytes on the CPU, so workspace may be NULL).
 * stream: must be NULL on the CPU.
 *
 * The results are written to the outputs' memory; they do not depend on the
 * number of threads (work is split over tokens).  Returns MOEPERM_SUCCESS,
 * MOEPERM_ERR_PARAM_NULLPTR for a NULL executor, MOEPERM_ERR_PARAM_INVALID
 * for a stream or an executor planned by another operator, or
 * MOEPERM_ERR_INNER when scratch memory runs out; on failure the outputs are
 * untouched.  Thread safe for distinct executors.
 */
MOEPERM_API moeperm_status moeperm_token_unpermute_grad(void *workspace, uint64_t workspace_size,
                                                        moeperm_executor *executor,
                                                        void *stream);

/*
 * The tiling of the Ascend kernel, field by field in the vendor's order
 * (MoeTokenUnpermuteGradTilingData: tokensNum, topK, ... totalUbSize, here
 * in snake case).  Only three fields decide the arithmetic: probs_grad sums
 * hidden_size_loop_times chunks, each hidden_size_align columns long but
 * the last, which is hidden_size_tail long.  The others say how the kernel
 * spreads tokens over cores and how many rows and indices it loads at a
 * time.
 */
typedef struct moeperm_unpermute_grad_tiling {
    int64_t tokens_num;
    int64_t top_k;
    int64_t hidden_size;
    int64_t num_out_tokens;
    int64_t former_core_num;   /* cores that take token_num_each_core tokens */
    int64_t tail_core_num;     /* cores that take token_num_tail_core tokens */
    int64_t token_num_each_core;
    int64_t token_num_tail_core;
    int64_t row_id_map_each_core; /* sorted_indices entries of a former core */
    int64_t row_id_map_tail_core;
    int64_t hidden_size_align;      /* columns of every chunk but the last */
    int64_t hidden_size_loop_times; /* chunks */
    int64_t hidden_size_tail;       /* columns of the last chunk */
    int64_t input_reserve_num;      /* permuted_tokens rows loaded at a time */
    int64_t indices_reserve_num;    /* sorted_indices entries loaded at a time */
    int64_t indices_reserve_num_align;
    int64_t total_ub_size;
} moeperm_unpermute_grad_tiling;

/*
 * moeperm_token_unpermute_grad_tiling() computes the tiling the Ascend
 * kernel's host code gives a problem, the one whose chunks a plan's
 * probs_grad follows.
 *
 * tokens_num, top_k, hidden_size, num_out_tokens: positive (the device's
 *       tiling refuses a 0, MOEPERM_ERR_INNER_TILING_ERROR), top_k <=
 *       MOEPERM_MAX_TOP_K (the same), and top_k = 1 when has_probs is false
 *       (the kernel then takes K = 1).  Sizes for which the tiling's int64
 *       arithmetic overflows (tokens per core times top_k, or the aligned
 *       hidden size times the bytes a column takes in the buffers) have no
 *       determined tiling and are refused.  num_out_tokens is copied into
 *       the result; nothing else here depends on it.
 * tokens_dtype, probs_dtype: FLOAT, FLOAT16 or BF16; probs_dtype is read
 *       only when has_probs is true.
 * chip: NULL for Atlas A2, else values in the ranges of
 *       moeperm_executor_set_chip().
 *
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR for a NULL tiling,
 * MOEPERM_ERR_INNER_TILING_ERROR as above, or MOEPERM_ERR_PARAM_INVALID
 * (with moeperm_last_error() naming the value); on failure *tiling is
 * untouched.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_token_unpermute_grad_tiling(
    int64_t tokens_num, int64_t top_k, int64_t hidden_size, int64_t num_out_tokens,
    moeperm_dtype tokens_dtype, bool has_probs, moeperm_dtype probs_dtype,
    const moeperm_chip *chip, moeperm_unpermute_grad_tiling *tiling);

/*
 * moeperm_token_unpermute_grad_exact_probs_grad() computes, for every slot
 * i = n*K + k, the exact dot product of the widened row s = sorted_indices[i]
 * of permuted_tokens (zeros when s >= R) with the widened g[n], rounded once
 * to the nearest double (ties to even): exact[i] is what probs_grad[n, k]
 * would be with no rounding but the last.  Every product of two widened
 * values is exact in a double and the sum is kept exactly, so the order of
 * summation does not matter.  A NaN operand, 0 * inf, or infinities of
 * both signs give NaN; otherwise an infinite product gives that infinity.
 *
 * Its purpose is to classify a device's probs_grad that differs from the
 * model: within a few units in the last place of this value, the device
 * sums in another order; far from it, the kernel is wrong.
 *
 * The inputs are those of moeperm_token_unpermute_grad_get_workspace_size()
 * (probs is required: it gives K, its values are not read), checked the
 * same way but for what concerns only the outputs: rows named twice and
 * sizes of 0 are accepted (nothing here writes rows).  exact: exact_len =
 * N*K doubles, not overlapping any input.
 *
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR, MOEPERM_ERR_PARAM_INVALID
 * or MOEPERM_ERR_INNER as the first phase does; on failure exact is
 * untouched.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_token_unpermute_grad_exact_probs_grad(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *unpermuted_tokens_grad,
    const moeperm_tensor *sorted_indices, const moeperm_tensor *probs, double *exact,
    uint64_t exact_len);

/* ---------------------------------------------------------------------- */
/* Routing: the forward's index math                                      */
/* ---------------------------------------------------------------------- */

/*
 * moeperm_route_sorted_indices() computes the sorted_indices that
 * MoeTokenPermute produces for a routing: expert_ids[t*top_k + k] is the
 * expert chosen by token t in its k-th slot, an integer in
 * [0, num_experts).  The result is the inverse of the stable argsort of the
 * flattened expert ids: sorted_indices[i] is the row of the permuted tensor
 * that holds the copy made for entry i.  n = tokens*top_k entries are read
 * and written.
 *
 * Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR, MOEPERM_ERR_PARAM_INVALID
 * (n > INT32_MAX, num_experts < 1, an expert id out of range), or
 * MOEPERM_ERR_INNER; on failure sorted_indices is untouched.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_route_sorted_indices(const int32_t *expert_ids, size_t n,
                                                        int32_t num_experts,
                                                        int32_t *sorted_indices);

/* ---------------------------------------------------------------------- */
/* Instruction sets                                                       */
/* ---------------------------------------------------------------------- */

/*
 * The instruction set the operators' second phases run on.  Every one
 * gives the same bits (the vector code is tested bit for bit against the
 * portable C loops); they differ only in speed.  By default a run uses the
 * best set this CPU has, or the portable loops when the environment
 * variable MOEPERM_FORCE_PORTABLE is set to anything but "" or "0" (read
 * once per process, at the first run or the first call below).  The
 * values are the project's own.
 */
typedef enum moeperm_isa {
    MOEPERM_ISA_AUTO = 0,      /* the chosen set, else the best this CPU has */
    MOEPERM_ISA_PORTABLE = 1,  /* the portable C11 loops, on any CPU */
    MOEPERM_ISA_X86_AVX2 = 2,  /* x86 with AVX2 and F16C */
    MOEPERM_ISA_X86_AVX512 = 3 /* x86 with AVX-512 F, BW, DQ and VL */
} moeperm_isa;

/*
 * moeperm_isa_in_use() returns the set a run started now uses: the one
 * moeperm_isa_choose() chose, else the best this CPU has (PORTABLE under
 * MOEPERM_FORCE_PORTABLE); never MOEPERM_ISA_AUTO.  Thread safe.
 */
MOEPERM_API moeperm_isa moeperm_isa_in_use(void);

/*
 * moeperm_isa_name() returns "auto", "portable", "x86-avx2" or
 * "x86-avx512", or "unknown" for a value that is none of them.  Static
 * strings; thread safe.
 */
MOEPERM_API const char *moeperm_isa_name(moeperm_isa isa);

/*
 * moeperm_isa_choose() makes every later run of this process use isa, so
 * that a benchmark or a test can time or check the portable loops beside
 * the vector code in one process; MOEPERM_ISA_AUTO goes back to the
 * default above.  It overrides MOEPERM_FORCE_PORTABLE.  Returns
 * MOEPERM_SUCCESS, or MOEPERM_ERR_PARAM_INVALID (with moeperm_last_error()
 * saying why, and the choice unchanged) for a set this CPU or this build
 * lacks or a value that is not a moeperm_isa.  Thread safe, but a run
 * already in flight may finish on the set it started with.
 */
MOEPERM_API moeperm_status moeperm_isa_choose(moeperm_isa isa);

/* ---------------------------------------------------------------------- */
/* Conversions                                                            */
/* ---------------------------------------------------------------------- */

/*
 * Widening (bf16 or fp16 bits to float) is exact.  Narrowing (float to bf16
 * or fp16 bits) rounds to nearest, ties to even, with subnormal results and
 * overflow to +-inf as IEEE 754 says.  A NaN stays a NaN of the same sign
 * and is made quiet; its payload keeps as many leading bits as fit:
 *
 *   float -> bf16:  (bits >> 16) | 0x0040
 *   float -> fp16:  sign | 0x7e00 | (mantissa >> 13)   (as x86 F16C does)
 *   bf16 -> float:  (bits << 16) | 0x00400000
 *   fp16 -> float:  sign | 0x7fc00000 | (mantissa << 13)
 *
 * Pure functions; thread safe.
 */
MOEPERM_API float moeperm_bf16_to_float(uint16_t bits);
MOEPERM_API uint16_t moeperm_float_to_bf16(float value);
MOEPERM_API float moeperm_fp16_to_float(uint16_t bits);
MOEPERM_API uint16_t moeperm_float_to_fp16(float value);

/*
 * moeperm_convert() converts n contiguous elements from src (of src_dtype)
 * to dst (of dst_dtype), each one of MOEPERM_FLOAT, MOEPERM_FLOAT16 and
 * MOEPERM_BF16, with exactly the scalar functions' results.  Between two
 * 16-bit types it goes through float.  Same dtype copies.  src and dst must
 * not overlap.  Returns MOEPERM_SUCCESS, MOEPERM_ERR_PARAM_NULLPTR (NULL
 * src or dst with n > 0) or MOEPERM_ERR_PARAM_INVALID (another dtype), with
 * dst untouched on failure.  Thread safe.
 */
MOEPERM_API moeperm_status moeperm_convert(const void *src, moeperm_dtype src_dtype, void *dst,
                                           moeperm_dtype dst_dtype, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* MOEPERM_H */
