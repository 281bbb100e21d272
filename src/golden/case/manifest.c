/*
 * manifest.c - case.json, both ways: parse a manifest (format 2, and the
 * MoeTokenPermuteGrad-only format 1) into a moeperm_golden_case, checking every
 * claim it makes that can be checked without the tensor files; and emit
 * one, byte-stable, so a regenerated corpus diffs cleanly.
 *
 * Parsing is strict: the text must be RFC 8259 JSON
 * (golden_json_check_strict() runs before json-c, which on its own accepts
 * comments, single quotes and more), every key the operator needs must be
 * there with the right type, and no tensor or attribute the operator does
 * not have may be.
 */
#include "golden/case/manifest.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "golden/case/json_strict.h"
#include "golden/case/names.h"
#include "golden/case/ops.h"
#include "golden/common/text.h"

typedef struct reader {
    const char *manifest; /* path of case.json, prefixed to every message */
    char *err;
    size_t err_len;
} reader;

static int fail(reader *r, const char *format, ...) __attribute__((format(printf, 2, 3)));

static int fail(reader *r, const char *format, ...)
{
    char message[768];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    snprintf(r->err, r->err_len, "%s: %s", r->manifest, message);
    return -1;
}

/* The JSON text of a value, for messages that quote what the file said. */
static const char *json_text(json_object *value)
{
    return value ? json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN) : "null";
}

static int get_member(reader *r, json_object *obj, const char *path, const char *key,
                      json_type type, json_object **out)
{
    static const char *type_names[] = {"null",      "a boolean", "a number", "an integer",
                                       "an object", "an array",  "a string"};
    json_object *value = NULL;
    if (!json_object_object_get_ex(obj, key, &value))
        return fail(r, "%s%s is missing", path, key);
    if (!json_object_is_type(value, type))
        return fail(r, "%s%s is %s, expected %s", path, key, json_text(value),
                    type_names[type]);
    *out = value;
    return 0;
}

static int get_string(reader *r, json_object *obj, const char *path, const char *key,
                      const char **out)
{
    json_object *value = NULL;
    if (get_member(r, obj, path, key, json_type_string, &value) != 0)
        return -1;
    *out = json_object_get_string(value);
    return 0;
}

/* An optional string member: a copy, or "" when absent (NULL when memory
 * runs out). */
static char *optional_string(json_object *obj, const char *key, const char *absent)
{
    json_object *value;
    if (json_object_object_get_ex(obj, key, &value) &&
        json_object_is_type(value, json_type_string))
        return golden_strdup_printf("%s", json_object_get_string(value));
    return absent ? golden_strdup_printf("%s", absent) : NULL;
}

static int get_expected_string(reader *r, json_object *obj, const char *key,
                               const char *expected)
{
    const char *value;
    if (get_string(r, obj, "", key, &value) != 0)
        return -1;
    if (strcmp(value, expected) != 0)
        return fail(r, "%s is \"%s\", expected \"%s\"", key, value, expected);
    return 0;
}

/* A JSON integer in [min, max]; 64.0 or "64" are refused by the type
 * check.  json-c (0.16) reads an integer beyond 64 bits as 2^64 - 1 (or
 * -2^63) and keeps no trace of it, so such a number is judged by that
 * value (docs/golden-format.md). */
static int get_int(reader *r, json_object *obj, const char *path, const char *key, int64_t min,
                   uint64_t max, json_object *value, uint64_t *out)
{
    if (!value && get_member(r, obj, path, key, json_type_int, &value) != 0)
        return -1;
    if (!json_object_is_type(value, json_type_int))
        return fail(r, "%s%s is %s, expected an integer", path, key, json_text(value));
    int64_t as_signed = json_object_get_int64(value);
    uint64_t as_unsigned = json_object_get_uint64(value);
    if (as_signed < min) {
        if (min == 0)
            return fail(r, "%s%s is %s, expected a non-negative integer", path, key,
                        json_text(value));
        return fail(r, "%s%s is %s, below the %" PRId64 " this format allows", path, key,
                    json_text(value), min);
    }
    if (as_signed >= 0 && as_unsigned > max)
        return fail(r, "%s%s is %s%s, larger than the %" PRIu64 " this format allows", path,
                    key, json_text(value),
                    as_unsigned == UINT64_MAX ? " or more (json-c reads larger integers as "
                                                "that)"
                                              : "",
                    max);
    *out = as_signed < 0 ? (uint64_t)as_signed : as_unsigned;
    return 0;
}

static int get_uint(reader *r, json_object *obj, const char *path, const char *key,
                    uint64_t max, uint64_t *out)
{
    return get_int(r, obj, path, key, 0, max, NULL, out);
}

/* File names stay inside the case directory: a manifest that says
 * "../../etc/passwd" or "/dev/zero" must not make the reader go there. */
static int check_file_name(reader *r, const char *tensor, const char *file)
{
    if (file[0] == '\0')
        return fail(r, "tensors.%s.file is empty", tensor);
    if (file[0] == '/')
        return fail(r,
                    "tensors.%s.file is \"%s\", an absolute path; it must name a file in "
                    "the case directory",
                    tensor, file);
    if (strstr(file, "..") || strchr(file, '/') || strcmp(file, ".") == 0)
        return fail(r,
                    "tensors.%s.file is \"%s\", which leaves the case directory; it must "
                    "be a plain file name",
                    tensor, file);
    return 0;
}

/* A shape as the manifest writes it, "[64, 7168]". */
static void format_shape(char *buf, size_t len, const int64_t *dims, size_t ndim)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, i ? ", " : "", dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/* A manifest's shape as it was written, "[64, 7168]", for messages. */
static void quote_shape(char *buf, size_t len, json_object *shape)
{
    size_t n = json_object_array_length(shape), used = 0;
    bool ints = n <= MOEPERM_MAX_DIMS;
    for (size_t i = 0; ints && i < n; i++)
        ints = json_object_is_type(json_object_array_get_idx(shape, i), json_type_int);
    if (!ints) {
        snprintf(buf, len, "%s", json_text(shape));
        return;
    }
    used += (size_t)snprintf(buf + used, len - used, "[");
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                                 json_text(json_object_array_get_idx(shape, i)));
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/*
 * One entry of "tensors" into t: file name, dtype, shape, sha256.  With
 * expected_dtype / expected_shape (format 1, where the top-level keys fix
 * them) those must match; with a role (format 2) the entry's "role" must
 * say it.  sha receives the manifest's hash.
 */
static int read_tensor(reader *r, json_object *entry, const char *key, moeperm_golden_role role,
                       const moeperm_dtype *expected_dtype, const int64_t *expected_shape,
                       size_t expected_ndim, moeperm_golden_tensor *t, char sha[GOLDEN_SHA256_HEX])
{
    char path[96];
    json_object *shape;
    const char *file, *dtype, *hash;

    snprintf(path, sizeof path, "tensors.%s.", key);
    if (!json_object_is_type(entry, json_type_object))
        return fail(r, "tensors.%s is %s, expected an object", key, json_text(entry));
    if (!expected_dtype) {
        const char *role_text;
        if (get_string(r, entry, path, "role", &role_text) != 0)
            return -1;
        if (strcmp(role_text, moeperm_golden_role_name(role)) != 0)
            return fail(r, "tensors.%s.role is \"%s\", expected \"%s\"", key, role_text,
                        moeperm_golden_role_name(role));
    }
    if (get_string(r, entry, path, "file", &file) != 0 ||
        get_string(r, entry, path, "dtype", &dtype) != 0 ||
        get_member(r, entry, path, "shape", json_type_array, &shape) != 0 ||
        get_string(r, entry, path, "sha256", &hash) != 0)
        return -1;
    if (check_file_name(r, key, file) != 0)
        return -1;
    if (expected_dtype) {
        if (strcmp(dtype, moeperm_dtype_name(*expected_dtype)) != 0)
            return fail(r, "tensors.%s.dtype is \"%s\", expected \"%s\"", key, dtype,
                        moeperm_dtype_name(*expected_dtype));
        t->dtype = *expected_dtype;
    } else if (!golden_dtype_parse_canonical(dtype, &t->dtype)) {
        return fail(r,
                    "tensors.%s.dtype is \"%s\", expected one of \"float32\", \"float16\", "
                    "\"bf16\", \"int8\", \"int32\", \"int64\", \"float64\"",
                    key, dtype);
    }

    char quoted[8 * 24 + 4];
    size_t ndim = json_object_array_length(shape);
    if (expected_shape) {
        char expected[8 * 24 + 4];
        format_shape(expected, sizeof expected, expected_shape, expected_ndim);
        bool same = ndim == expected_ndim;
        for (size_t i = 0; same && i < ndim; i++) {
            json_object *d = json_object_array_get_idx(shape, i);
            same = json_object_is_type(d, json_type_int) && json_object_get_int64(d) >= 0 &&
                   json_object_get_uint64(d) == (uint64_t)expected_shape[i];
        }
        if (!same) {
            quote_shape(quoted, sizeof quoted, shape);
            return fail(r, "tensors.%s.shape is %s, expected %s", key, quoted, expected);
        }
    } else if (ndim > MOEPERM_MAX_DIMS) {
        quote_shape(quoted, sizeof quoted, shape);
        return fail(r, "tensors.%s.shape is %s, more than %d dimensions", key, quoted,
                    MOEPERM_MAX_DIMS);
    }
    t->ndim = ndim;
    for (size_t i = 0; i < ndim; i++) {
        uint64_t d;
        char what[32];
        snprintf(what, sizeof what, "shape[%zu]", i);
        if (get_int(r, entry, path, what, 0, (uint64_t)MOEPERM_GOLDEN_MAX_DIM,
                    json_object_array_get_idx(shape, i), &d) != 0)
            return -1;
        t->shape[i] = (int64_t)d;
    }

    if (strlen(hash) != 64 || strspn(hash, "0123456789abcdefABCDEF") != 64)
        return fail(r, "tensors.%s.sha256 is \"%s\", expected 64 hexadecimal digits", key,
                    hash);
    memcpy(sha, hash, GOLDEN_SHA256_HEX);

    /* Extents up to 2^40 each can still overflow together. */
    uint64_t bytes = moeperm_dtype_size(t->dtype);
    for (size_t i = 0; i < ndim; i++) {
        if (t->shape[i] != 0 && bytes > UINT64_MAX / (uint64_t)t->shape[i]) {
            char shown[8 * 24 + 4];
            format_shape(shown, sizeof shown, t->shape, ndim);
            return fail(r, "tensors.%s.shape %s is too large to address", key, shown);
        }
        bytes *= (uint64_t)t->shape[i];
    }
    if (bytes > SIZE_MAX) {
        return fail(r, "tensors.%s needs %" PRIu64 " bytes, more than this machine can address",
                    key, bytes);
    }
    t->bytes = (size_t)bytes;
    t->file = golden_strdup_printf("%s", file);
    if (!t->file)
        return fail(r, "out of memory");
    return 0;
}

/* The recipe only informs people and re-implementations; nothing is
 * computed from it, so it is read leniently. */
static int read_recipe(json_object *root, moeperm_golden_recipe *recipe)
{
    json_object *obj, *field;
    if (!json_object_object_get_ex(root, "recipe", &obj) ||
        !json_object_is_type(obj, json_type_object))
        return 0;
    recipe->routing = optional_string(obj, "routing", NULL);
    recipe->values = optional_string(obj, "values", NULL);
    recipe->probs_values = optional_string(obj, "probs_values", NULL);
    if (json_object_object_get_ex(obj, "num_experts", &field) &&
        json_object_is_type(field, json_type_int))
        recipe->num_experts = json_object_get_int64(field);
    if (json_object_object_get_ex(obj, "hot_percent", &field) &&
        json_object_is_type(field, json_type_int))
        recipe->hot_percent = json_object_get_int64(field);
    if (json_object_object_get_ex(obj, "sentinels", &field) &&
        json_object_is_type(field, json_type_boolean))
        recipe->sentinels = json_object_get_boolean(field);
    if (json_object_object_get_ex(obj, "huge_indices", &field) &&
        json_object_is_type(field, json_type_boolean))
        recipe->huge_indices = json_object_get_boolean(field);
    return 0;
}

/* name, description, generator, command, seed and the recipe: the keys
 * both formats share. */
static int read_common(reader *r, json_object *root, moeperm_golden_case *c)
{
    const char *s;
    uint64_t seed;
    if (get_string(r, root, "", "name", &s) != 0)
        return -1;
    c->name = golden_strdup_printf("%s", s);
    c->description = optional_string(root, "description", "");
    c->generator = optional_string(root, "generator", "");
    c->command = optional_string(root, "command", NULL);
    if (!c->name || !c->description || !c->generator)
        return fail(r, "out of memory");
    if (get_uint(r, root, "", "seed", UINT64_MAX, &seed) != 0)
        return -1;
    c->seed = seed;
    return read_recipe(root, &c->recipe);
}

/* ---------------------------------------------------------------------- */
/* Format 1: MoeTokenPermuteGrad, shapes fixed by top-level keys          */
/* ---------------------------------------------------------------------- */

static int read_v1(reader *r, json_object *root, moeperm_golden_case *c, char sha[][GOLDEN_SHA256_HEX])
{
    const char *s;
    json_object *value, *tensors;
    uint64_t t, k, h, rows;
    moeperm_dtype dtype;

    if (get_expected_string(r, root, "op", "MoeTokenPermuteGrad") != 0 ||
        read_common(r, root, c) != 0)
        return -1;
    c->op = MOEPERM_OP_PERMUTE_GRAD;
    if (get_string(r, root, "", "dtype", &s) != 0)
        return -1;
    if (!golden_dtype_parse_canonical(s, &dtype) || moeperm_dtype_size(dtype) == 0 ||
        (dtype != MOEPERM_FLOAT && dtype != MOEPERM_FLOAT16 && dtype != MOEPERM_BF16))
        return fail(r, "dtype is \"%s\", expected \"float32\", \"float16\" or \"bf16\"", s);
    if (get_uint(r, root, "", "tokens_num", (uint64_t)MOEPERM_GOLDEN_MAX_DIM, &t) != 0 ||
        get_uint(r, root, "", "top_k", (uint64_t)MOEPERM_GOLDEN_MAX_DIM, &k) != 0 ||
        get_uint(r, root, "", "hidden_size", (uint64_t)MOEPERM_GOLDEN_MAX_DIM, &h) != 0 ||
        get_uint(r, root, "", "num_rows", (uint64_t)MOEPERM_GOLDEN_MAX_DIM, &rows) != 0)
        return -1;
    /* sorted_indices holds int32 rows 0..T*K-1, so T*K is at most 2^31. */
    if (k != 0 && t > (UINT64_C(1) << 31) / k)
        return fail(r,
                    "tokens_num %" PRIu64 " times top_k %" PRIu64
                    " is more than the 2^31 slots int32 sorted_indices can address",
                    t, k);
    uint64_t slots = t * k;
    if (rows > slots)
        return fail(r, "num_rows is %" PRIu64 ", more than tokens_num*top_k = %" PRIu64, rows,
                    slots);
    if (get_member(r, root, "", "padded_mode", json_type_boolean, &value) != 0)
        return -1;
    c->attrs.padded_mode = json_object_get_boolean(value);
    c->attrs.top_k = (int64_t)k;

    if (get_member(r, root, "", "tensors", json_type_object, &tensors) != 0)
        return -1;
    const int64_t shapes[3][2] = {{(int64_t)rows, (int64_t)h}, {(int64_t)slots, 0},
                                  {(int64_t)t, (int64_t)h}};
    const size_t ndims[3] = {2, 1, 2};
    const moeperm_dtype dtypes[3] = {dtype, MOEPERM_INT32, dtype};
    size_t count;
    const moeperm_golden_slot *slot = moeperm_golden_op_slots(MOEPERM_OP_PERMUTE_GRAD, &count);
    for (size_t i = 0; i < count; i++) {
        json_object *entry;
        moeperm_golden_tensor *tensor = &c->tensors[i];
        if (get_member(r, tensors, "tensors.", slot[i].name, json_type_object, &entry) != 0)
            return -1;
        tensor->name = slot[i].name;
        tensor->role = slot[i].role;
        c->tensor_count = i + 1;
        if (read_tensor(r, entry, slot[i].name, slot[i].role, &dtypes[i], shapes[i], ndims[i],
                        tensor, sha[i]) != 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Format 2: any operator, roles and attributes spelled out               */
/* ---------------------------------------------------------------------- */

/* The attributes each operator has: everything else in "attrs" is refused,
 * so a misspelt key cannot pass unnoticed. */
static bool attr_known(moeperm_op op, const char *key)
{
    if (strcmp(key, "padded_mode") == 0)
        return true;
    switch (op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        return strcmp(key, "top_k") == 0;
    case MOEPERM_OP_PERMUTE:
        return strcmp(key, "num_out_tokens") == 0;
    case MOEPERM_OP_UNPERMUTE:
        return strcmp(key, "restore_shape") == 0;
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return strcmp(key, "restore_shape") == 0 || strcmp(key, "ub_bytes") == 0 ||
               strcmp(key, "vector_cores") == 0 || strcmp(key, "chip") == 0;
    }
    return false;
}

int golden_attrs_check_chip(const moeperm_golden_attrs *a, char *err, size_t err_len)
{
    if (a->chip[0] == '\0')
        return 0;
    moeperm_chip chip;
    if (memchr(a->chip, '\0', sizeof a->chip) == NULL ||
        moeperm_chip_by_name(a->chip, &chip) != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "attrs.chip is \"%.*s\", which is not a chip moeperm knows (%s)",
                 (int)sizeof a->chip, a->chip, moeperm_chip_names());
        return -1;
    }
    if (a->ub_bytes != chip.ub_bytes || a->vector_cores != chip.vector_cores) {
        snprintf(err, err_len,
                 "attrs.chip is \"%s\", a chip of %" PRId64 " unified-buffer bytes and %" PRId64
                 " vector cores, but attrs.ub_bytes is %" PRId64 " and attrs.vector_cores %" PRId64
                 "%s",
                 a->chip, chip.ub_bytes, chip.vector_cores, a->ub_bytes, a->vector_cores,
                 a->ub_bytes && a->vector_cores ? "" : " (0: absent; a named chip gives both)");
        return -1;
    }
    return 0;
}

static int read_attrs(reader *r, json_object *root, moeperm_golden_case *c)
{
    json_object *attrs, *value;
    uint64_t v;
    moeperm_golden_attrs *a = &c->attrs;
    if (get_member(r, root, "", "attrs", json_type_object, &attrs) != 0)
        return -1;
    json_object_object_foreach(attrs, key, unused)
    {
        (void)unused;
        if (!attr_known(c->op, key))
            return fail(r, "attrs.%s is not an attribute of %s", key, moeperm_op_name(c->op));
    }
    if (get_member(r, attrs, "attrs.", "padded_mode", json_type_boolean, &value) != 0)
        return -1;
    a->padded_mode = json_object_get_boolean(value);
    switch (c->op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        /* As given: -1 means 1 to the device; the operator refuses the
         * values it has no result for. */
        if (get_int(r, attrs, "attrs.", "top_k", -MOEPERM_GOLDEN_MAX_DIM,
                    (uint64_t)MOEPERM_GOLDEN_MAX_DIM, NULL, &v) != 0)
            return -1;
        a->top_k = (int64_t)v;
        break;
    case MOEPERM_OP_PERMUTE:
        if (get_int(r, attrs, "attrs.", "num_out_tokens", -MOEPERM_GOLDEN_MAX_DIM,
                    (uint64_t)MOEPERM_GOLDEN_MAX_DIM, NULL, &v) != 0)
            return -1;
        a->num_out_tokens = (int64_t)v;
        break;
    case MOEPERM_OP_UNPERMUTE:
    case MOEPERM_OP_UNPERMUTE_GRAD:
        if (json_object_object_get_ex(attrs, "restore_shape", &value)) {
            if (!json_object_is_type(value, json_type_array) ||
                json_object_array_length(value) > MOEPERM_MAX_DIMS)
                return fail(r, "attrs.restore_shape is %s, expected a list of at most %d "
                               "integers",
                            json_text(value), MOEPERM_MAX_DIMS);
            a->restore_shape_len = json_object_array_length(value);
            for (size_t i = 0; i < a->restore_shape_len; i++) {
                char what[40];
                snprintf(what, sizeof what, "restore_shape[%zu]", i);
                if (get_int(r, attrs, "attrs.", what, 0, (uint64_t)MOEPERM_GOLDEN_MAX_DIM,
                            json_object_array_get_idx(value, i), &v) != 0)
                    return -1;
                a->restore_shape[i] = (int64_t)v;
            }
        }
        if (c->op == MOEPERM_OP_UNPERMUTE_GRAD) {
            static const char *const chip_keys[] = {"ub_bytes", "vector_cores"};
            int64_t *fields[] = {&a->ub_bytes, &a->vector_cores};
            for (size_t i = 0; i < 2; i++) {
                if (!json_object_object_get_ex(attrs, chip_keys[i], &value))
                    continue;
                if (get_int(r, attrs, "attrs.", chip_keys[i], 1, (uint64_t)MOEPERM_GOLDEN_MAX_DIM,
                            value, &v) != 0)
                    return -1;
                *fields[i] = (int64_t)v;
            }
            if (json_object_object_get_ex(attrs, "chip", &value)) {
                const char *name;
                if (get_string(r, attrs, "attrs.", "chip", &name) != 0)
                    return -1;
                if (strlen(name) >= sizeof a->chip)
                    return fail(r, "attrs.chip is \"%s\", which is not a chip moeperm knows "
                                   "(%s)", name, moeperm_chip_names());
                snprintf(a->chip, sizeof a->chip, "%s", name);
                char why[512];
                if (golden_attrs_check_chip(a, why, sizeof why) != 0)
                    return fail(r, "%s", why);
            }
        }
        break;
    }
    return 0;
}

static int read_v2(reader *r, json_object *root, moeperm_golden_case *c, char sha[][GOLDEN_SHA256_HEX])
{
    const char *op_name;
    json_object *tensors;
    if (get_string(r, root, "", "op", &op_name) != 0)
        return -1;
    c->op = moeperm_op_parse(op_name);
    if (!c->op)
        return fail(r,
                    "op is \"%s\", expected \"MoeTokenPermuteGrad\", \"MoeTokenPermute\", "
                    "\"MoeTokenUnpermute\" or \"MoeTokenUnpermuteGrad\"",
                    op_name);
    if (read_common(r, root, c) != 0 || read_attrs(r, root, c) != 0 ||
        get_member(r, root, "", "tensors", json_type_object, &tensors) != 0)
        return -1;

    size_t count;
    const moeperm_golden_slot *slot = moeperm_golden_op_slots(c->op, &count);
    json_object_object_foreach(tensors, key, unused)
    {
        (void)unused;
        bool known = false;
        for (size_t i = 0; i < count && !known; i++)
            known = strcmp(slot[i].name, key) == 0;
        if (!known)
            return fail(r, "tensors.%s is not a tensor of %s", key, op_name);
    }
    for (size_t i = 0; i < count; i++) {
        json_object *entry;
        if (!json_object_object_get_ex(tensors, slot[i].name, &entry)) {
            if (!slot[i].optional)
                return fail(r, "tensors.%s is missing", slot[i].name);
            continue;
        }
        moeperm_golden_tensor *t = &c->tensors[c->tensor_count];
        t->name = slot[i].name;
        t->role = slot[i].role;
        c->tensor_count++;
        if (read_tensor(r, entry, slot[i].name, slot[i].role, NULL, NULL, 0, t,
                        sha[c->tensor_count - 1]) != 0)
            return -1;
    }
    return golden_check_optional_tensors(c, r->err, r->err_len, r->manifest);
}

int golden_manifest_parse(const char *manifest_path, const char *text, moeperm_golden_case *c,
                          char sha[][GOLDEN_SHA256_HEX], char *err, size_t err_len)
{
    reader r = {manifest_path, err, err_len};
    /* json-c, even strict, lets through text that is not JSON and cuts
     * strings at \u0000 (json_strict.h); the checker refuses all of it
     * first, so json-c only ever parses RFC 8259 text, one value and
     * nothing after it. */
    char why[512];
    size_t len = strlen(text);
    if (golden_json_check_strict(text, len, why, sizeof why) != 0)
        return fail(&r, "%s", why);
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return fail(&r, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* The terminating NUL is passed too, so that a number at the very end
     * is complete. */
    json_object *root = json_tokener_parse_ex(tok, text, (int)len + 1);
    int rc = -1;
    if (!root) {
        /* The checker passed it: only a limit of json-c's is left. */
        fail(&r, "not valid JSON for json-c near byte %zu: %s", json_tokener_get_parse_end(tok),
             json_tokener_error_desc(json_tokener_get_error(tok)));
    } else if (!json_object_is_type(root, json_type_object)) {
        fail(&r, "the manifest is %s, expected a JSON object",
             json_object_is_type(root, json_type_array) ? "an array" : "not an object");
    } else {
        const char *format;
        if (get_string(&r, root, "", "format", &format) == 0) {
            if (strcmp(format, MOEPERM_GOLDEN_FORMAT) == 0) {
                c->format_version = 2;
                rc = read_v2(&r, root, c, sha);
            } else if (strcmp(format, MOEPERM_GOLDEN_FORMAT_V1) == 0) {
                c->format_version = 1;
                rc = read_v1(&r, root, c, sha);
            } else {
                fail(&r, "format is \"%s\", expected \"%s\" or \"%s\"", format, MOEPERM_GOLDEN_FORMAT,
                     MOEPERM_GOLDEN_FORMAT_V1);
            }
        }
    }
    json_object_put(root);
    json_tokener_free(tok);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Emitting                                                               */
/* ---------------------------------------------------------------------- */

/* The manifest is written by hand rather than by json-c's serializer so its
 * bytes do not change with the json-c version: regenerating the corpus on
 * another machine must give identical files.  It is read back with json-c. */
static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void put_attrs(FILE *f, const moeperm_golden_case *c)
{
    const moeperm_golden_attrs *a = &c->attrs;
    fputs("  \"attrs\": {", f);
    switch (c->op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        fprintf(f, "\"top_k\": %" PRId64 ", ", a->top_k);
        break;
    case MOEPERM_OP_PERMUTE:
        fprintf(f, "\"num_out_tokens\": %" PRId64 ", ", a->num_out_tokens);
        break;
    case MOEPERM_OP_UNPERMUTE:
    case MOEPERM_OP_UNPERMUTE_GRAD:
        if (a->restore_shape_len) {
            fputs("\"restore_shape\": [", f);
            for (uint64_t i = 0; i < a->restore_shape_len; i++)
                fprintf(f, "%s%" PRId64, i ? ", " : "", a->restore_shape[i]);
            fputs("], ", f);
        }
        if (a->chip[0]) {
            fputs("\"chip\": ", f);
            put_json_string(f, a->chip);
            fputs(", ", f);
        }
        if (a->ub_bytes)
            fprintf(f, "\"ub_bytes\": %" PRId64 ", ", a->ub_bytes);
        if (a->vector_cores)
            fprintf(f, "\"vector_cores\": %" PRId64 ", ", a->vector_cores);
        break;
    }
    fprintf(f, "\"padded_mode\": %s},\n", a->padded_mode ? "true" : "false");
}

static void put_recipe(FILE *f, const moeperm_golden_recipe *recipe)
{
    if (!recipe->routing || !recipe->values)
        return;
    fputs(",\n  \"recipe\": {\"routing\": ", f);
    put_json_string(f, recipe->routing);
    if (strcmp(recipe->routing, "routed") == 0)
        fprintf(f, ", \"num_experts\": %" PRId64 ", \"hot_percent\": %" PRId64,
                recipe->num_experts, recipe->hot_percent);
    fputs(", \"values\": ", f);
    put_json_string(f, recipe->values);
    if (recipe->probs_values) {
        fputs(", \"probs_values\": ", f);
        put_json_string(f, recipe->probs_values);
    }
    if (recipe->sentinels)
        fputs(", \"sentinels\": true", f);
    if (recipe->huge_indices)
        fputs(", \"huge_indices\": true", f);
    fputc('}', f);
}

char *golden_manifest_text(const moeperm_golden_case *c, const char sha[][GOLDEN_SHA256_HEX],
                           size_t *size)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, size);
    if (!f)
        return NULL;
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"op\": \"%s\",\n  \"name\": ", MOEPERM_GOLDEN_FORMAT,
            moeperm_op_name(c->op));
    put_json_string(f, c->name ? c->name : "");
    fputs(",\n  \"description\": ", f);
    put_json_string(f, c->description ? c->description : "");
    fputs(",\n", f);
    put_attrs(f, c);
    fprintf(f, "  \"seed\": %" PRIu64 ",\n  \"generator\": ", c->seed);
    put_json_string(f, c->generator ? c->generator : "");
    if (c->command) {
        fputs(",\n  \"command\": ", f);
        put_json_string(f, c->command);
    }
    put_recipe(f, &c->recipe);
    fputs(",\n  \"tensors\": {\n", f);
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        fprintf(f, "    \"%s\": {\"role\": \"%s\", \"file\": \"%s.bin\", \"dtype\": \"%s\", "
                   "\"shape\": [",
                t->name, moeperm_golden_role_name(t->role), t->name, moeperm_dtype_name(t->dtype));
        for (uint64_t d = 0; d < t->ndim; d++)
            fprintf(f, "%s%" PRId64, d ? ", " : "", t->shape[d]);
        fprintf(f, "], \"sha256\": \"%s\"}%s\n", sha[i], i + 1 < c->tensor_count ? "," : "");
    }
    fputs("  }\n}\n", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
