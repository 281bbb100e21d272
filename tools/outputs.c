/*
 * outputs.c - a case's outputs in and out of the tool: buffers for a
 * backend to fill, the problem that fills them, the paths of output files.
 */
#include "outputs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int case_outputs_alloc(const moeperm_golden_case *c, case_outputs *o, char *err, size_t err_len)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        size_t bytes = (size_t)moeperm_golden_tensor_elements(t) * moeperm_dtype_size(t->dtype);
        o->like[o->count] = t;
        o->data[o->count] = calloc(1, bytes ? bytes : 1);
        if (!o->data[o->count]) {
            snprintf(err, err_len, "out of memory for %zu bytes of %s", bytes, t->name);
            case_outputs_free(o);
            return -1;
        }
        o->count++;
    }
    return 0;
}

size_t case_output_count(const moeperm_golden_case *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->tensor_count; i++)
        n += c->tensors[i].role == MOEPERM_GOLDEN_ROLE_OUTPUT;
    return n;
}

void case_outputs_free(case_outputs *o)
{
    for (size_t i = 0; i < o->count; i++)
        free(o->data[i]);
    memset(o, 0, sizeof *o);
}

static backend_tensor problem_tensor(const moeperm_golden_tensor *t, void *data)
{
    backend_tensor b;
    memset(&b, 0, sizeof b);
    if (!t)
        return b;
    b.name = t->name;
    b.dtype = t->dtype;
    b.ndim = t->ndim;
    memcpy(b.shape, t->shape, sizeof b.shape);
    b.data = data;
    b.bytes = (size_t)moeperm_golden_tensor_elements(t) * moeperm_dtype_size(t->dtype);
    b.present = true;
    return b;
}

void case_problem(const moeperm_golden_case *c, const case_outputs *o, backend_problem *p)
{
    memset(p, 0, sizeof *p);
    p->op = c->op;
    p->top_k = c->attrs.top_k;
    p->num_out_tokens = c->attrs.num_out_tokens;
    p->padded_mode = c->attrs.padded_mode;
    p->restore_shape = c->attrs.restore_shape_len ? c->attrs.restore_shape : NULL;
    p->restore_shape_len = c->attrs.restore_shape_len;
    p->chip = (moeperm_chip){MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
    if (c->attrs.ub_bytes)
        p->chip.ub_bytes = c->attrs.ub_bytes;
    if (c->attrs.vector_cores)
        p->chip.vector_cores = c->attrs.vector_cores;
    /* Every slot of the operator, in its argument order, absent optional
     * ones included, so a backend finds probs where the operator has it. */
    size_t count, out = 0;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(c->op, &count);
    for (size_t i = 0; i < count; i++) {
        const moeperm_golden_tensor *t = moeperm_golden_case_tensor_const(c, slots[i].name);
        if (slots[i].role == MOEPERM_GOLDEN_ROLE_INPUT) {
            p->inputs[p->input_count++] = problem_tensor(t, t ? t->data : NULL);
        } else if (slots[i].role == MOEPERM_GOLDEN_ROLE_OUTPUT) {
            void *data = NULL;
            for (size_t j = 0; t && j < o->count; j++)
                if (o->like[j] == t)
                    data = o->data[j];
            p->outputs[out++] = problem_tensor(t, data);
        }
    }
    p->output_count = out;
}

int case_output_path(const case_outputs *o, size_t i, const char *path, bool dir, char **out,
                     char *err, size_t err_len)
{
    *out = NULL;
    if (!dir) {
        *out = strdup(path);
        goto done;
    }
    size_t n = strlen(path);
    const char *sep = n > 0 && path[n - 1] == '/' ? "" : "/";
    size_t len = n + strlen(o->like[i]->name) + 8;
    char *bin = malloc(len), *npy = malloc(len);
    if (!bin || !npy) {
        free(bin);
        free(npy);
        goto done;
    }
    snprintf(bin, len, "%s%s%s.bin", path, sep, o->like[i]->name);
    snprintf(npy, len, "%s%s%s.npy", path, sep, o->like[i]->name);
    /* Anything by either name counts (a link to nothing too): which of
     * two files is the output is not a choice to make silently. */
    struct stat st;
    bool has_bin = lstat(bin, &st) == 0, has_npy = lstat(npy, &st) == 0;
    if (has_bin && has_npy) {
        snprintf(err, err_len, "both %s and %s exist: which one is the output %s is "
                 "ambiguous; remove one", bin, npy, o->like[i]->name);
        free(bin);
        free(npy);
        return -1;
    }
    free(has_npy ? bin : npy);
    *out = has_npy ? npy : bin;
done:
    if (!*out) {
        snprintf(err, err_len, "out of memory");
        return -2;
    }
    return 0;
}

int case_output_absent(const char *path, char *err, size_t err_len)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return 0;
    int error = errno;
    if (error == ENOENT) {
        /* A link to nothing is something the harness put there: not an
         * absent output. */
        char target[256];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n < 0)
            return 1;
        target[n] = '\0';
        snprintf(err, err_len, "%s is a symbolic link to %s, which does not exist", path,
                 target);
        return -1;
    }
    /* EACCES, ELOOP, ENOTDIR, ENAMETOOLONG, EIO: the file may well be
     * there; the reason is the answer, not "missing". */
    snprintf(err, err_len, "cannot look for the output %s: %s", path, strerror(error));
    return -1;
}

int case_output_is_golden(const moeperm_golden_case *c, const char *file, char *err,
                          size_t err_len)
{
    struct stat at, golden;
    if (stat(file, &at) != 0)
        return 0;
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        if (t->role == MOEPERM_GOLDEN_ROLE_INPUT || !t->path || stat(t->path, &golden) != 0 ||
            !cli_same_file(&golden, &at))
            continue;
        snprintf(err, err_len, "%s is the case's own golden file %s (%s): judging the golden "
                 "output against itself proves nothing", file, t->path, t->name);
        return 1;
    }
    return 0;
}

int case_output_files(const char *case_dir, const char *at, bool always_dir, char ***files,
                      size_t *count)
{
    moeperm_golden_case c;
    char err[1024];
    /* A manifest that cannot be read is refused before any output is;
     * until then, at itself is what the command would read. */
    bool known = moeperm_golden_case_read(case_dir, MOEPERM_GOLDEN_LOAD_NONE, &c, err,
                                          sizeof err) == 0;
    size_t outputs = known ? case_output_count(&c) : 0;
    bool dir = known && (always_dir || outputs > 1);
    size_t add = dir ? 2 * outputs : 1;
    char **grown = realloc(*files, (*count + add) * sizeof *grown);
    int rc = grown ? 0 : -1;
    if (grown)
        *files = grown;
    if (rc == 0 && !dir) {
        (*files)[*count] = strdup(at);
        rc = (*files)[*count] ? 0 : -1;
        *count += rc == 0;
    }
    for (size_t i = 0; rc == 0 && dir && i < c.tensor_count; i++) {
        const moeperm_golden_tensor *t = &c.tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        const char *sep = at[0] && at[strlen(at) - 1] == '/' ? "" : "/";
        for (int npy = 0; rc == 0 && npy < 2; npy++) {
            (*files)[*count] = cli_format("%s%s%s.%s", at, sep, t->name, npy ? "npy" : "bin");
            rc = (*files)[*count] ? 0 : -1;
            *count += rc == 0;
        }
    }
    if (known)
        moeperm_golden_case_free(&c);
    return rc;
}
