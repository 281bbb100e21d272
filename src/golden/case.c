/*
 * case.c - the "moeperm-golden/1" case format: read (with json-c, checking
 * every claim of the manifest against the files), write (atomically, with a
 * byte-stable manifest so regenerated corpora diff cleanly), and discovery
 * of every case below a directory in a deterministic order.
 */
#include "golden/case.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <json-c/json.h>

#include "golden/fileio.h"
#include "internal.h"

/* A manifest is a few hundred bytes; anything far larger is not one. */
#define MANIFEST_MAX_BYTES ((size_t)1 << 20)

size_t golden_dtype_size(moeperm_dtype dtype)
{
    /* the library's sizes, for the gradient dtypes a case may have */
    return dtype == MOEPERM_INT32 ? 0 : moeperm_dtype_size(dtype);
}

const char *golden_dtype_name(moeperm_dtype dtype)
{
    return moeperm_dtype_name(dtype); /* the library's names are the manifest's */
}

bool golden_dtype_parse(const char *name, moeperm_dtype *dtype)
{
    static const moeperm_dtype known[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(name, golden_dtype_name(known[i])) == 0) {
            *dtype = known[i];
            return true;
        }
    }
    return false;
}

/* Only valid for a case whose byte sizes the reader (or the generator)
 * has already checked against overflow. */
size_t golden_grad_bytes(const golden_case *c)
{
    return (size_t)c->num_rows * (size_t)c->hidden_size * golden_dtype_size(c->dtype);
}

size_t golden_indices_bytes(const golden_case *c)
{
    return (size_t)c->tokens_num * (size_t)c->top_k * sizeof(int32_t);
}

size_t golden_output_bytes(const golden_case *c)
{
    return (size_t)c->tokens_num * (size_t)c->hidden_size * golden_dtype_size(c->dtype);
}

/* dir/file, malloc'd, without doubling a slash dir already ends with
 * ("c1/" gives "c1/case.json", not "c1//case.json"). */
static char *join_dir(const char *dir, const char *file)
{
    size_t n = strlen(dir);
    return golden_strdup_printf("%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/", file);
}

static char *dup_string(const char *s)
{
    return golden_strdup_printf("%s", s);
}

void golden_case_free(golden_case *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c->name);
    free(c->description);
    free(c->generator);
    free(c->command);
    free(c->routing);
    free(c->values);
    free(c->manifest_path);
    free(c->grad_path);
    free(c->indices_path);
    free(c->output_path);
    free(c->permuted_output_grad);
    free(c->sorted_indices);
    free(c->input_grad);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------------- */
/* Reading                                                                */
/* ---------------------------------------------------------------------- */

typedef struct reader {
    const char *manifest; /* path of case.json, prefixed to every message */
    char *err;
    size_t err_len;
    bool manifest_only; /* check the manifest, note the files' paths, read none */
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
    static const char *type_names[] = {"null",  "a boolean", "a number", "an integer",
                                       "an object", "an array", "a string"};
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

/* A non-negative JSON integer no larger than max; 64.0 or "64" are refused
 * by the type check.  json-c (0.16) reads an integer beyond 64 bits as
 * 2^64 - 1 (or -2^63) and keeps no trace of it, so such a number is judged
 * by that value (docs/golden-format.md, section 1). */
static int get_uint(reader *r, json_object *obj, const char *path, const char *key,
                    uint64_t max, uint64_t *out)
{
    json_object *value = NULL;
    if (get_member(r, obj, path, key, json_type_int, &value) != 0)
        return -1;
    /* A negative value reads back negative as int64; a huge one only as
     * uint64, so look at it both ways. */
    int64_t as_signed = json_object_get_int64(value);
    uint64_t as_unsigned = json_object_get_uint64(value);
    if (as_signed < 0)
        return fail(r, "%s%s is %s, expected a non-negative integer", path, key,
                    json_text(value));
    if (as_unsigned > max)
        return fail(r, "%s%s is %s%s, larger than the %" PRIu64 " this format allows", path,
                    key, json_text(value),
                    as_unsigned == UINT64_MAX ? " or more (json-c reads larger integers as "
                                                "that)"
                                              : "",
                    max);
    *out = as_unsigned;
    return 0;
}

/* File names stay inside the case directory: a manifest that says
 * "../../etc/passwd" or "/dev/zero" must not make the reader go there. */
static int check_file_name(reader *r, const char *tensor, const char *file)
{
    if (file[0] == '\0')
        return fail(r, "tensors.%s.file is empty", tensor);
    if (file[0] == '/')
        return fail(r, "tensors.%s.file is \"%s\", an absolute path; it must name a file in "
                       "the case directory", tensor, file);
    if (strstr(file, "..") || strchr(file, '/') || strcmp(file, ".") == 0)
        return fail(r, "tensors.%s.file is \"%s\", which leaves the case directory; it must "
                       "be a plain file name", tensor, file);
    return 0;
}

static void format_dims(char *buf, size_t len, const uint64_t *dims, size_t ndim)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, i ? ", " : "", dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

/* Reads one entry of "tensors": checks file name, dtype and shape, then
 * loads the file and checks its size and sha256.  data may be NULL to only
 * check the manifest. */
/* Checks the manifest entry of tensor `key` and its file; loads the file
 * into *data unless data is NULL; *file_path gets the file's path. */
static int read_tensor(reader *r, json_object *tensors, const char *case_dir, const char *key,
                       const char *dtype_name, size_t element_size, const uint64_t *dims,
                       size_t ndim, void **data, char **file_path_out)
{
    char path[64];
    json_object *entry, *shape;
    const char *file, *dtype, *sha;

    snprintf(path, sizeof path, "tensors.%s.", key);
    if (get_member(r, tensors, "tensors.", key, json_type_object, &entry) != 0 ||
        get_string(r, entry, path, "file", &file) != 0 ||
        get_string(r, entry, path, "dtype", &dtype) != 0 ||
        get_member(r, entry, path, "shape", json_type_array, &shape) != 0 ||
        get_string(r, entry, path, "sha256", &sha) != 0)
        return -1;
    if (check_file_name(r, key, file) != 0)
        return -1;
    if (strcmp(dtype, dtype_name) != 0)
        return fail(r, "tensors.%s.dtype is \"%s\", expected \"%s\"", key, dtype, dtype_name);

    char expected[128];
    format_dims(expected, sizeof expected, dims, ndim);
    bool same = json_object_array_length(shape) == ndim;
    for (size_t i = 0; same && i < ndim; i++) {
        json_object *d = json_object_array_get_idx(shape, i);
        same = json_object_is_type(d, json_type_int) && json_object_get_int64(d) >= 0 &&
               json_object_get_uint64(d) == dims[i];
    }
    if (!same) {
        /* Quote the shape as the expected one is written, "[64, 7168]",
         * unless it is not a list of integers at all. */
        /* Up to 8 integers of up to 20 characters ("-9223372036854775808")
         * with ", " between and brackets: 178 bytes.  The loop also stops
         * once the buffer is full, as snprintf's return can pass its end. */
        char actual[8 * 22 + 4];
        size_t n = json_object_array_length(shape), used = 0;
        bool ints = n <= 8;
        for (size_t i = 0; ints && i < n; i++)
            ints = json_object_is_type(json_object_array_get_idx(shape, i), json_type_int);
        if (!ints)
            return fail(r, "tensors.%s.shape is %s, expected %s", key, json_text(shape),
                        expected);
        used += (size_t)snprintf(actual + used, sizeof actual - used, "[");
        for (size_t i = 0; i < n && used < sizeof actual; i++)
            used += (size_t)snprintf(actual + used, sizeof actual - used, "%s%s", i ? ", " : "",
                                     json_text(json_object_array_get_idx(shape, i)));
        if (used < sizeof actual)
            snprintf(actual + used, sizeof actual - used, "]");
        return fail(r, "tensors.%s.shape is %s, expected %s", key, actual, expected);
    }

    size_t sha_len = strlen(sha);
    if (sha_len != 64 || strspn(sha, "0123456789abcdefABCDEF") != 64)
        return fail(r, "tensors.%s.sha256 is \"%s\", expected 64 hexadecimal digits", key, sha);

    /* R*H can reach 2^71 within the per-field bounds: guard the product. */
    uint64_t bytes = element_size;
    for (size_t i = 0; i < ndim; i++) {
        if (dims[i] != 0 && bytes > UINT64_MAX / dims[i])
            return fail(r, "tensors.%s.shape %s is too large to address", key, expected);
        bytes *= dims[i];
    }

    char *file_path = join_dir(case_dir, file);
    if (file_path && r->manifest_only) {
        *file_path_out = file_path;
        return 0;
    }
    char hex[GOLDEN_SHA256_HEX];
    char what[96];
    char inner[512];
    void *loaded = NULL;
    if (!file_path)
        return fail(r, "out of memory");
    snprintf(what, sizeof what, "tensors.%s", key);
    if (golden_read_file(file_path, what, bytes, &loaded, hex, inner, sizeof inner) != 0) {
        free(file_path);
        return fail(r, "%s", inner);
    }
    *file_path_out = file_path;
    if (strcasecmp(hex, sha) != 0) {
        free(loaded);
        return fail(r, "tensors.%s.sha256 is %s, but %s hashes to %s", key, sha, file, hex);
    }
    if (data)
        *data = loaded;
    else
        free(loaded);
    return 0;
}

static int read_manifest(reader *r, json_object *root, const char *dir, bool load_output,
                         golden_case *c)
{
    const char *s;
    json_object *value, *tensors;
    uint64_t t, k, h, rows, seed;

    if (!json_object_is_type(root, json_type_object))
        return fail(r, "the manifest is %s, expected a JSON object",
                    json_object_is_type(root, json_type_array) ? "an array" : "not an object");
    if (get_expected_string(r, root, "format", GOLDEN_FORMAT) != 0 ||
        get_expected_string(r, root, "op", GOLDEN_OP) != 0)
        return -1;

    if (get_string(r, root, "", "name", &s) != 0 || !(c->name = dup_string(s)))
        return -1;
    c->description = dup_string(json_object_object_get_ex(root, "description", &value) &&
                                        json_object_is_type(value, json_type_string)
                                    ? json_object_get_string(value)
                                    : "");
    c->generator = dup_string(json_object_object_get_ex(root, "generator", &value) &&
                                      json_object_is_type(value, json_type_string)
                                  ? json_object_get_string(value)
                                  : "");
    if (json_object_object_get_ex(root, "command", &value) &&
        json_object_is_type(value, json_type_string))
        c->command = dup_string(json_object_get_string(value));
    if (!c->description || !c->generator)
        return fail(r, "out of memory");
    /* The recipe only informs people and re-implementations; nothing is
     * computed from it, so it is read leniently. */
    json_object *recipe, *field;
    if (json_object_object_get_ex(root, "recipe", &recipe) &&
        json_object_is_type(recipe, json_type_object)) {
        if (json_object_object_get_ex(recipe, "routing", &field) &&
            json_object_is_type(field, json_type_string))
            c->routing = dup_string(json_object_get_string(field));
        if (json_object_object_get_ex(recipe, "values", &field) &&
            json_object_is_type(field, json_type_string))
            c->values = dup_string(json_object_get_string(field));
        if (json_object_object_get_ex(recipe, "num_experts", &field) &&
            json_object_is_type(field, json_type_int))
            c->num_experts = json_object_get_int64(field);
        if (json_object_object_get_ex(recipe, "hot_percent", &field) &&
            json_object_is_type(field, json_type_int))
            c->hot_percent = json_object_get_int64(field);
    }

    if (get_string(r, root, "", "dtype", &s) != 0)
        return -1;
    if (!golden_dtype_parse(s, &c->dtype))
        return fail(r, "dtype is \"%s\", expected \"float32\", \"float16\" or \"bf16\"", s);

    if (get_uint(r, root, "", "tokens_num", (uint64_t)GOLDEN_MAX_DIM, &t) != 0 ||
        get_uint(r, root, "", "top_k", (uint64_t)GOLDEN_MAX_DIM, &k) != 0 ||
        get_uint(r, root, "", "hidden_size", (uint64_t)GOLDEN_MAX_DIM, &h) != 0 ||
        get_uint(r, root, "", "num_rows", (uint64_t)GOLDEN_MAX_DIM, &rows) != 0 ||
        get_uint(r, root, "", "seed", UINT64_MAX, &seed) != 0)
        return -1;
    /* sorted_indices holds int32 rows 0..T*K-1, so T*K is at most 2^31. */
    uint64_t slots;
    if (k != 0 && t > (UINT64_C(1) << 31) / k)
        return fail(r, "tokens_num %" PRIu64 " times top_k %" PRIu64
                       " is more than the 2^31 slots int32 sorted_indices can address",
                    t, k);
    slots = t * k;
    if (rows > slots)
        return fail(r, "num_rows is %" PRIu64 ", more than tokens_num*top_k = %" PRIu64, rows,
                    slots);
    if (get_member(r, root, "", "padded_mode", json_type_boolean, &value) != 0)
        return -1;
    c->padded_mode = json_object_get_boolean(value);
    c->tokens_num = (int64_t)t;
    c->top_k = (int64_t)k;
    c->hidden_size = (int64_t)h;
    c->num_rows = (int64_t)rows;
    c->seed = seed;

    if (get_member(r, root, "", "tensors", json_type_object, &tensors) != 0)
        return -1;
    const char *dtype_name = golden_dtype_name(c->dtype);
    size_t es = golden_dtype_size(c->dtype);
    uint64_t grad_dims[2] = {rows, h};
    uint64_t index_dims[1] = {slots};
    uint64_t out_dims[2] = {t, h};
    /* The output's manifest entry and file are checked even when the file
     * is not kept: run must not accept a case whose golden side is
     * malformed. */
    if (read_tensor(r, tensors, dir, "permuted_output_grad", dtype_name, es, grad_dims, 2,
                    &c->permuted_output_grad, &c->grad_path) != 0 ||
        read_tensor(r, tensors, dir, "sorted_indices", "int32", sizeof(int32_t), index_dims, 1,
                    (void **)&c->sorted_indices, &c->indices_path) != 0 ||
        read_tensor(r, tensors, dir, "input_grad", dtype_name, es, out_dims, 2,
                    load_output ? &c->input_grad : NULL, &c->output_path) != 0)
        return -1;
    return 0;
}

/* Where the text after the JSON value starts, past white space.  json-c is
 * given the terminating NUL too, and a trailing comment ("//") can swallow
 * it, putting the parse end one past the string: clamp it there. */
static size_t trailing_text(const char *text, size_t parse_end)
{
    size_t len = strlen(text);
    size_t end = parse_end < len ? parse_end : len;
    return end + strspn(text + end, " \t\r\n");
}

static int read_case(const char *dir, bool load_output, bool manifest_only, golden_case *c,
                     char *err, size_t err_len)
{
    memset(c, 0, sizeof *c);
    /* "" would become "/case.json": a case at the root that nobody named. */
    if (dir[0] == '\0') {
        snprintf(err, err_len, "the case directory is an empty string; name a directory "
                 "holding case.json");
        return -1;
    }
    char *manifest = join_dir(dir, "case.json");
    char *text = NULL;
    reader r = {manifest, err, err_len, manifest_only};
    int rc = -1;

    if (!manifest) {
        snprintf(err, err_len, "out of memory reading %s", dir);
        return -1;
    }
    if (golden_read_text(manifest, MANIFEST_MAX_BYTES, &text, err, err_len) != 0) {
        free(manifest);
        return -1;
    }
    struct json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, text, (int)strlen(text) + 1) : NULL;
    if (!tok) {
        fail(&r, "out of memory");
    } else if (!root) {
        fail(&r, "not valid JSON near byte %zu: %s", json_tokener_get_parse_end(tok),
             json_tokener_error_desc(json_tokener_get_error(tok)));
    } else if (text[trailing_text(text, json_tokener_get_parse_end(tok))] != '\0') {
        /* json-c stops after the first complete value; a second one, or
         * garbage, means the file is not the manifest it claims to be. */
        fail(&r, "unexpected text after the JSON object at byte %zu",
             json_tokener_get_parse_end(tok));
    } else {
        c->dir = dup_string(dir);
        if (!c->dir)
            fail(&r, "out of memory");
        else
            rc = read_manifest(&r, root, dir, load_output, c);
    }
    json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    free(text);
    if (rc == 0) {
        c->manifest_path = manifest;
    } else {
        free(manifest);
        golden_case_free(c);
    }
    return rc;
}

int golden_case_read(const char *dir, bool load_output, golden_case *c, char *err,
                     size_t err_len)
{
    return read_case(dir, load_output, false, c, err, err_len);
}

int golden_case_read_manifest(const char *dir, golden_case *c, char *err, size_t err_len)
{
    return read_case(dir, false, true, c, err, err_len);
}

/* ---------------------------------------------------------------------- */
/* Writing                                                                */
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

static void put_tensor(FILE *f, const char *key, const char *dtype, const int64_t *dims,
                       size_t ndim, const void *data, size_t bytes, bool last)
{
    char hex[GOLDEN_SHA256_HEX];
    golden_sha256_hex(data, bytes, hex);
    fprintf(f, "    \"%s\": {\"file\": \"%s.bin\", \"dtype\": \"%s\", \"shape\": [", key, key,
            dtype);
    for (size_t i = 0; i < ndim; i++)
        fprintf(f, "%s%" PRId64, i ? ", " : "", dims[i]);
    fprintf(f, "], \"sha256\": \"%s\"}%s\n", hex, last ? "" : ",");
}

/* The manifest as a malloc'd string, *size bytes. */
static char *manifest_text(const golden_case *c, size_t *size)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, size);
    if (!f)
        return NULL;
    const char *dtype = golden_dtype_name(c->dtype);
    int64_t grad_dims[2] = {c->num_rows, c->hidden_size};
    int64_t index_dims[1] = {c->tokens_num * c->top_k};
    int64_t out_dims[2] = {c->tokens_num, c->hidden_size};

    fprintf(f, "{\n  \"format\": \"%s\",\n  \"op\": \"%s\",\n  \"name\": ", GOLDEN_FORMAT,
            GOLDEN_OP);
    put_json_string(f, c->name ? c->name : "");
    fputs(",\n  \"description\": ", f);
    put_json_string(f, c->description ? c->description : "");
    fprintf(f, ",\n  \"dtype\": \"%s\",\n", dtype);
    fprintf(f, "  \"tokens_num\": %" PRId64 ",\n  \"top_k\": %" PRId64 ",\n", c->tokens_num,
            c->top_k);
    fprintf(f, "  \"hidden_size\": %" PRId64 ",\n  \"num_rows\": %" PRId64 ",\n",
            c->hidden_size, c->num_rows);
    fprintf(f, "  \"padded_mode\": %s,\n  \"seed\": %" PRIu64 ",\n  \"generator\": ",
            c->padded_mode ? "true" : "false", c->seed);
    put_json_string(f, c->generator ? c->generator : "");
    if (c->command) {
        fputs(",\n  \"command\": ", f);
        put_json_string(f, c->command);
    }
    if (c->routing && c->values) {
        fputs(",\n  \"recipe\": {\"routing\": ", f);
        put_json_string(f, c->routing);
        if (strcmp(c->routing, "routed") == 0)
            fprintf(f, ", \"num_experts\": %" PRId64 ", \"hot_percent\": %" PRId64,
                    c->num_experts, c->hot_percent);
        fputs(", \"values\": ", f);
        put_json_string(f, c->values);
        fputc('}', f);
    }
    fputs(",\n  \"tensors\": {\n", f);
    put_tensor(f, "permuted_output_grad", dtype, grad_dims, 2, c->permuted_output_grad,
               golden_grad_bytes(c), false);
    put_tensor(f, "sorted_indices", "int32", index_dims, 1, c->sorted_indices,
               golden_indices_bytes(c), false);
    put_tensor(f, "input_grad", dtype, out_dims, 2, c->input_grad, golden_output_bytes(c),
               true);
    fputs("  }\n}\n", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int write_in(const char *dir, const char *file, const void *data, size_t size,
                    char *err, size_t err_len)
{
    char *path = golden_strdup_printf("%s/%s", dir, file);
    if (!path) {
        snprintf(err, err_len, "out of memory writing %s", dir);
        return -1;
    }
    /* fsync before the directory is renamed into place, as for single
     * files: after a power loss a case that looks complete is complete. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int rc = 0;
    if (fd < 0) {
        rc = -1;
    } else {
        if (golden_write_all(fd, data, size) != 0 || fsync(fd) != 0)
            rc = -1;
        if (close(fd) != 0)
            rc = -1;
    }
    if (rc != 0)
        snprintf(err, err_len, "writing %s failed: %s", path, strerror(errno));
    free(path);
    return rc;
}

/* --force replaces a case, not whatever happens to hold the name: a
 * mistyped --name or --out must not take a directory of results with it.
 * So the target must be a directory holding case.json and nothing but the
 * files this writer makes (golden_case_files), or nothing at all (an empty
 * directory loses nothing).  The first offending entry in byte order is
 * named, so the message does not depend on the file system's order.
 * Returns 0 when the directory may be replaced. */
static int check_replaceable(const char *path, const struct stat *st, char *err,
                             size_t err_len)
{
    if (S_ISLNK(st->st_mode) || !S_ISDIR(st->st_mode)) {
        snprintf(err, err_len, "%s exists and is %s, not a case directory; --force replaces only "
                 "a case, so nothing was changed", path,
                 S_ISLNK(st->st_mode) ? "a symbolic link" : "not a directory");
        return -1;
    }
    DIR *d = opendir(path);
    if (!d) {
        /* Gone since the lstat (another writer parked it): nothing to lose,
         * and the rename that follows reports what it finds. */
        if (errno == ENOENT)
            return 0;
        snprintf(err, err_len, "cannot read %s to check that it is a case: %s", path,
                 strerror(errno));
        return -1;
    }
    char *first = NULL; /* the offending entry that sorts first */
    bool first_is_known = false, has_manifest = false, has_any = false;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        has_any = true;
        bool known = false;
        for (size_t i = 0; i < GOLDEN_CASE_FILE_COUNT; i++)
            known = known || strcmp(e->d_name, golden_case_files[i]) == 0;
        bool ok = known;
        if (known) {
            /* input_grad.bin as a directory would be removed with its
             * contents; only plain files are part of a case. */
            struct stat est;
            char *entry = join_dir(path, e->d_name);
            if (!entry)
                rc = -1;
            ok = entry && lstat(entry, &est) == 0 && S_ISREG(est.st_mode);
            free(entry);
        }
        if (ok) {
            has_manifest = has_manifest || strcmp(e->d_name, "case.json") == 0;
            continue;
        }
        if (!first || strcmp(e->d_name, first) < 0) {
            free(first);
            first = dup_string(e->d_name);
            first_is_known = known;
            if (!first)
                rc = -1;
        }
    }
    closedir(d);
    if (rc != 0) {
        snprintf(err, err_len, "out of memory checking %s", path);
    } else if (first) {
        snprintf(err, err_len, "%s is not a golden case directory: it holds \"%s\"%s; --force "
                 "replaces only a directory holding case.json and the case's .bin files, so "
                 "nothing was changed", path, first,
                 first_is_known ? ", which is not a regular file" : "");
        rc = -1;
    } else if (has_any && !has_manifest) {
        snprintf(err, err_len, "%s is not a golden case directory: it holds no case.json; "
                 "--force replaces only a case, so nothing was changed", path);
        rc = -1;
    }
    free(first);
    return rc;
}

int golden_case_write(const char *path_arg, const golden_case *c, bool force, char *err,
                      size_t err_len)
{
    if (path_arg[0] == '\0') {
        snprintf(err, err_len, "the case directory to write is an empty string");
        return -1;
    }
    /* "out/c1/" names c1: without the slash its parent is "out", not "out/c1". */
    char *path = dup_string(path_arg);
    if (!path) {
        snprintf(err, err_len, "out of memory writing %s", path_arg);
        return -1;
    }
    for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--)
        path[n - 1] = '\0';
    if (strcmp(path, "/") == 0) {
        snprintf(err, err_len, "cannot write a case as the root directory /");
        free(path);
        return -1;
    }

    struct stat st;
    bool exists = lstat(path, &st) == 0;
    if (exists && !force) {
        snprintf(err, err_len, "%s already exists; pass --force to replace it", path);
        free(path);
        return -1;
    }
    if (exists && check_replaceable(path, &st, err, err_len) != 0) {
        free(path);
        return -1;
    }

    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *parent = golden_dir_of(path);
    if (!parent) {
        snprintf(err, err_len, "out of memory writing %s", path);
        free(path);
        return -1;
    }
    if (golden_mkdirs(parent, err, err_len) != 0) {
        free(parent);
        free(path);
        return -1;
    }
    char *tmp = golden_strdup_printf("%s/.%s.tmp.XXXXXX", parent, base);
    char *old = golden_strdup_printf("%s/.%s.old.XXXXXX", parent, base);
    size_t manifest_size = 0;
    char *manifest = manifest_text(c, &manifest_size);
    int rc = -1, tmp_slot = -1, old_slot = -1;
    /* Each step that creates or parks a directory runs with signals held
     * and registers it before they are let in, so that a signal's cleanup
     * (fileio.h) always knows every temporary and the parked old case. */
    sigset_t all, unblocked;
    sigfillset(&all);

    if (!tmp || !old || !manifest) {
        snprintf(err, err_len, "out of memory writing %s", path);
        goto done;
    }
    sigprocmask(SIG_BLOCK, &all, &unblocked);
    if (mkdtemp(tmp))
        tmp_slot = golden_temp_track(GOLDEN_TEMP_CASE_DIR, tmp, NULL);
    else
        tmp[0] = '\0';
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    if (!tmp[0]) {
        snprintf(err, err_len, "cannot create a temporary directory beside %s: %s", path,
                 strerror(errno));
        goto done;
    }
    /* mkdtemp makes 0700; a case directory is an ordinary directory. */
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(tmp, 0777 & ~mask) != 0 ||
        write_in(tmp, "permuted_output_grad.bin", c->permuted_output_grad,
                 golden_grad_bytes(c), err, err_len) != 0 ||
        write_in(tmp, "sorted_indices.bin", c->sorted_indices, golden_indices_bytes(c), err,
                 err_len) != 0 ||
        write_in(tmp, "input_grad.bin", c->input_grad, golden_output_bytes(c), err,
                 err_len) != 0 ||
        write_in(tmp, "case.json", manifest, manifest_size, err, err_len) != 0) {
        if (err[0] == '\0')
            snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
        golden_remove_tree(tmp);
        goto done;
    }
    if (exists) {
        /* rename() replaces an empty directory, so park the old case under
         * a fresh empty name, put the new one in place, then drop the old;
         * if the second rename fails the old case goes back. */
        sigprocmask(SIG_BLOCK, &all, &unblocked);
        bool parked = mkdtemp(old) && rename(path, old) == 0;
        int saved = errno;
        if (parked)
            old_slot = golden_temp_track(GOLDEN_TEMP_PARKED, old, path);
        else
            rmdir(old);
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
        if (!parked) {
            snprintf(err, err_len, "cannot move the existing %s aside: %s", path,
                     strerror(saved));
            golden_remove_tree(tmp);
            goto done;
        }
        if (rename(tmp, path) != 0) {
            int saved_put = errno;
            golden_remove_tree(tmp);
            /* The old case goes back.  Only when another writer's case
             * holds the name now is the old one (checked above to be a
             * case) dropped instead of left behind under the temporary
             * name, and only if nothing else got into it meanwhile; any
             * other failure (a full disk, an I/O error) keeps it where it
             * is and says so. */
            bool back = rename(old, path) == 0;
            bool taken = !back && (errno == EEXIST || errno == ENOTEMPTY);
            if (back || (taken && golden_remove_case_dir(old) == 0))
                snprintf(err, err_len, "cannot put %s in place: %s", path,
                         strerror(saved_put));
            else
                snprintf(err, err_len, "cannot put %s in place: %s; the case that was there is "
                         "kept at %s", path, strerror(saved_put), old);
            goto done;
        }
        golden_temp_untrack(tmp_slot);
        tmp_slot = -1;
        if (golden_remove_case_dir(old) != 0) {
            /* The new case is in place and what is left of the old one
             * sits under a dot name that readers skip: report it rather
             * than remove more than the case files. */
            snprintf(err, err_len, "%s was written, but the case it replaced could not be "
                     "removed and is kept at %s: %s", path, old, strerror(errno));
            rc = 1;
            goto done;
        }
    } else if (rename(tmp, path) != 0) {
        snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(errno));
        golden_remove_tree(tmp);
        goto done;
    }
    rc = 0;
done:
    golden_temp_untrack(tmp_slot);
    golden_temp_untrack(old_slot);
    free(manifest);
    free(old);
    free(tmp);
    free(parent);
    free(path);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Discovery                                                              */
/* ---------------------------------------------------------------------- */

typedef struct path_list {
    char **items;
    size_t count, capacity;
} path_list;

static int list_add(path_list *l, char *s)
{
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? 2 * l->capacity : 64;
        char **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown)
            return -1;
        l->items = grown;
        l->capacity = cap;
    }
    l->items[l->count++] = s;
    return 0;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directories the walk has entered, by (st_dev, st_ino): symbolic links
 * are followed, so a link back up the tree would loop forever and two links
 * to one directory would list its cases twice.  An open-addressing hash set,
 * as a corpus can hold many thousands of directories. */
typedef struct dir_id {
    dev_t dev;
    ino_t ino;
    bool used;
} dir_id;

typedef struct dir_set {
    dir_id *slots;
    size_t count, capacity; /* capacity a power of two, at most half full */
} dir_set;

static size_t dir_slot(const dir_set *set, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 32 | (uint64_t)dev >> 32)) *
                 UINT64_C(0x9E3779B97F4A7C15);
    size_t i = (size_t)(h >> 32) & (set->capacity - 1);
    while (set->slots[i].used && !(set->slots[i].dev == dev && set->slots[i].ino == ino))
        i = (i + 1) & (set->capacity - 1);
    return i;
}

/* Adds the directory st describes: 1 if it is new, 0 if the walk has been
 * there already, -1 when memory runs out. */
static int dir_set_add(dir_set *set, const struct stat *st)
{
    if (2 * (set->count + 1) > set->capacity) {
        dir_set grown = {NULL, 0, set->capacity ? 2 * set->capacity : 64};
        grown.slots = calloc(grown.capacity, sizeof *grown.slots);
        if (!grown.slots)
            return -1;
        for (size_t i = 0; i < set->capacity; i++)
            if (set->slots[i].used)
                grown.slots[dir_slot(&grown, set->slots[i].dev, set->slots[i].ino)] =
                    set->slots[i];
        grown.count = set->count;
        free(set->slots);
        *set = grown;
    }
    size_t i = dir_slot(set, st->st_dev, st->st_ino);
    if (set->slots[i].used)
        return 0;
    set->slots[i] = (dir_id){st->st_dev, st->st_ino, true};
    set->count++;
    return 1;
}

/* dir_st is stat() of dir (links followed). */
static int walk(const char *dir, const struct stat *dir_st, dir_set *seen, path_list *out,
                char *err, size_t err_len)
{
    struct stat st;
    int added = dir_set_add(seen, dir_st);
    if (added < 0)
        goto oom;
    if (added == 0)
        return 0; /* a loop, or a second name for a directory already listed */

    char *manifest = join_dir(dir, "case.json");
    if (!manifest)
        goto oom;
    if (stat(manifest, &st) == 0 && S_ISREG(st.st_mode)) {
        free(manifest);
        char *copy = dup_string(dir);
        if (!copy || list_add(out, copy) != 0) {
            free(copy);
            goto oom;
        }
        return 0; /* a case directory holds no further cases */
    }
    free(manifest);

    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, err_len, "cannot read directory %s: %s", dir, strerror(errno));
        return -1;
    }
    /* Children in byte order: which of two names for one directory is
     * listed must not depend on the file system's order. */
    path_list children = {0};
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        /* Dot-entries include the temporaries of an interrupted write. */
        if (e->d_name[0] == '.')
            continue;
        char *child = join_dir(dir, e->d_name);
        if (!child || list_add(&children, child) != 0) {
            free(child);
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc != 0) {
        golden_free_paths(children.items, children.count);
        goto oom;
    }
    if (children.count > 1)
        qsort(children.items, children.count, sizeof *children.items, compare_paths);
    for (size_t i = 0; rc == 0 && i < children.count; i++) {
        /* stat, not lstat: a link to a directory of cases is followed; a
         * dangling link is skipped like any other non-directory. */
        if (stat(children.items[i], &st) == 0 && S_ISDIR(st.st_mode))
            rc = walk(children.items[i], &st, seen, out, err, err_len);
    }
    golden_free_paths(children.items, children.count);
    return rc;
oom:
    snprintf(err, err_len, "out of memory listing %s", dir);
    return -1;
}

int golden_find_cases(const char *root, char ***dirs, size_t *count, char *err, size_t err_len)
{
    path_list list = {0};
    dir_set seen = {0};
    struct stat st;
    *dirs = NULL;
    *count = 0;
    if (root[0] == '\0') {
        snprintf(err, err_len, "the directory to search is an empty string");
        return -1;
    }
    if (stat(root, &st) != 0) {
        snprintf(err, err_len, "%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s is not a directory", root);
        return -1;
    }
    /* Strip trailing slashes so paths print as "golden/x", not "golden//x". */
    char *clean = dup_string(root);
    if (!clean) {
        snprintf(err, err_len, "out of memory listing %s", root);
        return -1;
    }
    for (size_t n = strlen(clean); n > 1 && clean[n - 1] == '/'; n--)
        clean[n - 1] = '\0';
    int rc = walk(clean, &st, &seen, &list, err, err_len);
    free(clean);
    free(seen.slots);
    if (rc != 0) {
        golden_free_paths(list.items, list.count);
        return -1;
    }
    /* No case found leaves items NULL, and qsort(NULL, 0, ...) is undefined. */
    if (list.count > 1)
        qsort(list.items, list.count, sizeof *list.items, compare_paths);
    *dirs = list.items;
    *count = list.count;
    return 0;
}

void golden_free_paths(char **paths, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}
