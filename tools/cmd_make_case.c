/*
 * cmd_make_case.c - `moeperm make-case`: a golden case from a user's own
 * tensors (captured from a failing training step, say): the inputs as
 * given, raw or .npy, plus the operator's attributes; the outputs computed
 * by the reference; sha256s and a manifest written around them.  Inputs
 * the operator refuses are refused with the library's sentence, and
 * nothing is written.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: moeperm make-case --out DIR --op OP --name NAME\n"
            "                         --input NAME=FILE[:DTYPE:SHAPE] ... [options]\n"
            "  write the case DIR/NAME (never inside another case) from your own input\n"
            "  tensors: the manifest, the inputs, and the outputs the reference\n"
            "  computes from them\n"
            "  --op OP           MoeTokenPermuteGrad, MoeTokenPermute, MoeTokenUnpermute,\n"
            "                    MoeTokenUnpermuteGrad (or permute-grad, permute, ...)\n"
            "  --input NAME=FILE one input tensor of the operator (repeat for each):\n"
            "                    a .npy file (shape and dtype from its header; add\n"
            "                    :DTYPE to read '<u2' as bf16 or to insist on one, and\n"
            "                    :DTYPE:SHAPE to insist on a shape: one the header\n"
            "                    contradicts is refused), or a raw file with :DTYPE:SHAPE,\n"
            "                    e.g. sorted_indices=si.bin:int32:4096 or\n"
            "                    probs=p.bin:bf16:512x8; a FILE holding ':' is read\n"
            "                    whole when a file of that name exists, else\n"
            "                    :DTYPE[:SHAPE] is taken from its end (a:b.bin:int32:8\n"
            "                    is the file a:b.bin)\n"
            "  --top-k K         MoeTokenPermuteGrad's num_topk (-1 is taken as 1)\n"
            "  --num-out-tokens N  MoeTokenPermute's num_out_tokens (default 0: all)\n"
            "  --restore-shape A,B  MoeTokenUnpermute(Grad)'s restore_shape (recorded; the\n"
            "                    operators ignore it)\n"
            "  --padded-mode     record padded_mode true (MoeTokenPermute refuses it, the\n"
            "                    other three ignore it)\n"
            "  --chip NAME       MoeTokenUnpermuteGrad's chip by name, recorded as such:\n"
            "                    %s\n"
            "  --ub-bytes N --vector-cores N  MoeTokenUnpermuteGrad's chip by its numbers,\n"
            "                    for a chip without a name (default the Atlas A2: %lld\n"
            "                    bytes, %lld cores)\n"
            "  --description TEXT  one line: what the case is (default: where it came from)\n"
            "  --force           replace an existing case (only a case)\n"
            "An attribute option of another operator is refused.\n"
            "inputs by operator:\n"
            "  MoeTokenPermuteGrad    permuted_output_grad, sorted_indices\n"
            "  MoeTokenPermute        tokens, indices\n"
            "  MoeTokenUnpermute      permuted_tokens, sorted_indices [, probs]\n"
            "  MoeTokenUnpermuteGrad  permuted_tokens, unpermuted_tokens_grad,\n"
            "                         sorted_indices [, probs]\n",
            moeperm_chip_names(), (long long)MOEPERM_CHIP_A2_UB_BYTES,
            (long long)MOEPERM_CHIP_A2_VECTOR_CORES);
}

/* Parses "64x7168", "64,7168" or "4096" into dims: digits, one separator
 * between two numbers, nothing after the last. */
static bool parse_shape(const char *text, int64_t *dims, uint64_t *ndim)
{
    *ndim = 0;
    const char *p = text;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9' || *ndim == MOEPERM_MAX_DIMS)
            return false;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno == ERANGE || v < 0 || v > MOEPERM_GOLDEN_MAX_DIM)
            return false;
        dims[(*ndim)++] = v;
        if (*end == '\0')
            return true;
        if (*end != 'x' && *end != ',')
            return false;
        p = end + 1;
    }
}

/* The dtype names a message lists. */
#define DTYPES_LISTED "float32 (fp32), float16 (fp16), bf16 (bfloat16), int8, int32, int64"

/*
 * Splits the FILE[:DTYPE[:SHAPE]] of an --input into *path (malloc'd),
 * *dtype (-1 when not given) and dims.  A file name may hold ':': the
 * whole value is FILE when something by that name exists (whatever it is:
 * the reader then says what is wrong with it); otherwise :DTYPE and
 * :DTYPE:SHAPE are taken from the right, so "a:b.bin:int32:8" is the file
 * "a:b.bin".  Returns false after a message naming the input.
 */
static bool split_input(const char *input, const char *value, char **path, int *dtype,
                        int64_t *dims, uint64_t *ndim)
{
    struct stat st;
    *dtype = -1;
    *ndim = 0;
    *path = NULL;
    const char *last = strrchr(value, ':');
    if (!last || lstat(value, &st) == 0) {
        *path = strdup(value);
        return *path != NULL;
    }
    moeperm_dtype d;
    const char *file_end = last, *shape_text = NULL;
    char *dtype_text = strdup(last + 1);
    if (!dtype_text)
        return false;
    if (!moeperm_golden_dtype_parse(dtype_text, &d)) {
        /* FILE:DTYPE:SHAPE, when what is after the last ':' is no dtype:
         * what is between the last two is the dtype, if anything is. */
        const char *prev = last;
        while (prev > value && prev[-1] != ':')
            prev--;
        free(dtype_text);
        dtype_text = prev > value ? strndup(prev, (size_t)(last - prev)) : NULL;
        if (prev > value && !dtype_text)
            return false;
        bool typed = dtype_text && moeperm_golden_dtype_parse(dtype_text, &d);
        if (!typed && dtype_text && last[1] >= '0' && last[1] <= '9')
            fprintf(stderr, "moeperm make-case: --input %s: dtype \"%s\" is not one of "
                            DTYPES_LISTED "\n", input, dtype_text);
        else if (!typed)
            fprintf(stderr, "moeperm make-case: --input %s: no file is named \"%s\", and "
                            "\"%s\" after its last ':' is not a dtype (" DTYPES_LISTED ")\n",
                    input, value, last + 1);
        if (!typed) {
            free(dtype_text);
            return false;
        }
        file_end = prev - 1;
        shape_text = last + 1;
    }
    free(dtype_text);
    *dtype = (int)d;
    if (shape_text && !parse_shape(shape_text, dims, ndim)) {
        fprintf(stderr, "moeperm make-case: --input %s: shape \"%s\" is not like 64x7168 (at most "
                        "%d dims of at most %" PRId64 ")\n",
                input, shape_text, MOEPERM_MAX_DIMS, MOEPERM_GOLDEN_MAX_DIM);
        return false;
    }
    *path = strndup(value, (size_t)(file_end - value));
    return *path != NULL;
}

/* One --input: "NAME=FILE[:DTYPE[:SHAPE]]" read into the next tensor of
 * c. */
static bool add_input(moeperm_golden_case *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "moeperm make-case: --input is \"%s\", expected NAME=FILE\n", arg);
        return false;
    }
    size_t count;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(c->op, &count);
    const moeperm_golden_slot *slot = NULL;
    for (size_t i = 0; i < count; i++)
        if (slots[i].role == MOEPERM_GOLDEN_ROLE_INPUT && strlen(slots[i].name) == (size_t)(eq - arg) &&
            strncmp(slots[i].name, arg, (size_t)(eq - arg)) == 0)
            slot = &slots[i];
    if (!slot) {
        fprintf(stderr, "moeperm make-case: --input %.*s: %s has no input of that name (see "
                        "--help)\n", (int)(eq - arg), arg, moeperm_op_name(c->op));
        return false;
    }
    if (moeperm_golden_case_tensor(c, slot->name)) {
        fprintf(stderr, "moeperm make-case: --input %s is given twice\n", slot->name);
        return false;
    }
    if (c->tensor_count == MOEPERM_GOLDEN_MAX_TENSORS)
        return false;
    char *path;
    int dtype;
    int64_t dims[MOEPERM_MAX_DIMS];
    uint64_t ndim;
    if (!split_input(slot->name, eq + 1, &path, &dtype, dims, &ndim))
        return false;
    moeperm_golden_tensor *t = &c->tensors[c->tensor_count];
    memset(t, 0, sizeof *t);
    char err[1024];
    if (moeperm_golden_tensor_from_file(path, dtype, dims, ndim, t, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm make-case: --input %s: %s\n", slot->name, err);
        free(path);
        return false;
    }
    free(path);
    t->name = slot->name;
    t->role = MOEPERM_GOLDEN_ROLE_INPUT;
    t->file = cli_format("%s.bin", slot->name);
    c->tensor_count++;
    return t->file != NULL;
}

int cmd_make_case(int argc, char **argv)
{
    /* O_TOPK to O_CORES in the order of attrs below. */
    enum { O_OUT = 256, O_OP, O_INPUT, O_TOPK, O_NUM_OUT, O_RESTORE, O_UB, O_CORES, O_NAME,
           O_DESCRIPTION, O_FORCE, O_HELP, O_CHIP, O_PADDED };
    static const struct option options[] = {
        {"out", required_argument, NULL, O_OUT},
        {"op", required_argument, NULL, O_OP},
        {"input", required_argument, NULL, O_INPUT},
        {"top-k", required_argument, NULL, O_TOPK},
        {"topk", required_argument, NULL, O_TOPK},
        {"num-out-tokens", required_argument, NULL, O_NUM_OUT},
        {"restore-shape", required_argument, NULL, O_RESTORE},
        {"ub-bytes", required_argument, NULL, O_UB},
        {"vector-cores", required_argument, NULL, O_CORES},
        {"chip", required_argument, NULL, O_CHIP},
        {"padded-mode", no_argument, NULL, O_PADDED},
        {"name", required_argument, NULL, O_NAME},
        {"description", required_argument, NULL, O_DESCRIPTION},
        {"force", no_argument, NULL, O_FORCE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *name = NULL, *description = NULL;
    const char *inputs[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t input_count = 0;
    bool force = false;
    const char *chip_name = NULL;
    moeperm_chip chip = {0, 0};
    moeperm_golden_case c;
    memset(&c, 0, sizeof c);
    c.format_version = 2;
    int opt, rc = EXIT_BAD_INPUT;
    /* The attribute options given, each by the operators that take it:
     * one the operator does not have is refused, not silently dropped. */
    struct {
        const char *flag;
        unsigned ops; /* bit op: the operators that take it */
        bool given;
    } attrs[] = {
        {"--top-k", 1u << MOEPERM_OP_PERMUTE_GRAD, false},
        {"--num-out-tokens", 1u << MOEPERM_OP_PERMUTE, false},
        {"--restore-shape", 1u << MOEPERM_OP_UNPERMUTE | 1u << MOEPERM_OP_UNPERMUTE_GRAD, false},
        {"--ub-bytes", 1u << MOEPERM_OP_UNPERMUTE_GRAD, false},
        {"--vector-cores", 1u << MOEPERM_OP_UNPERMUTE_GRAD, false},
    };
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        bool ok = true;
        if (opt >= O_TOPK && opt <= O_CORES)
            attrs[opt - O_TOPK].given = true;
        switch (opt) {
        case O_OUT:
            out = optarg;
            break;
        case O_OP:
            if (!(c.op = moeperm_golden_op_parse(optarg))) {
                fprintf(stderr, "moeperm make-case: --op is \"%s\", expected MoeTokenPermuteGrad, "
                                "MoeTokenPermute, MoeTokenUnpermute or MoeTokenUnpermuteGrad\n",
                        optarg);
                ok = false;
            }
            break;
        case O_INPUT:
            if (input_count == MOEPERM_GOLDEN_MAX_TENSORS) {
                fprintf(stderr, "moeperm make-case: too many --input\n");
                ok = false;
            } else {
                inputs[input_count++] = optarg;
            }
            break;
        case O_TOPK:
            ok = cli_int64("make-case", "--top-k", optarg, -1, MOEPERM_MAX_TOP_K, &c.attrs.top_k);
            if (ok && c.attrs.top_k == 0) {
                fprintf(stderr, "moeperm make-case: --top-k is \"0\", expected an integer from "
                                "1 to %d, or -1 (taken as 1)\n", MOEPERM_MAX_TOP_K);
                ok = false;
            }
            break;
        case O_CHIP:
            ok = cli_chip("make-case", optarg, &chip);
            chip_name = optarg;
            break;
        case O_PADDED:
            c.attrs.padded_mode = true;
            break;
        case O_NUM_OUT:
            ok = cli_int64("make-case", "--num-out-tokens", optarg, -MOEPERM_GOLDEN_MAX_DIM,
                           MOEPERM_GOLDEN_MAX_DIM, &c.attrs.num_out_tokens);
            break;
        case O_RESTORE:
            if (!parse_shape(optarg, c.attrs.restore_shape, &c.attrs.restore_shape_len)) {
                fprintf(stderr, "moeperm make-case: --restore-shape is \"%s\", expected "
                                "integers like 64,7168\n", optarg);
                ok = false;
            }
            break;
        case O_UB:
            ok = cli_int64("make-case", "--ub-bytes", optarg, MOEPERM_CHIP_MIN_UB_BYTES,
                           MOEPERM_CHIP_MAX_UB_BYTES, &c.attrs.ub_bytes);
            break;
        case O_CORES:
            ok = cli_int64("make-case", "--vector-cores", optarg, 1,
                           MOEPERM_CHIP_MAX_VECTOR_CORES, &c.attrs.vector_cores);
            break;
        case O_NAME:
            name = optarg;
            break;
        case O_DESCRIPTION:
            description = optarg;
            break;
        case O_FORCE:
            force = true;
            break;
        case O_HELP:
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
        if (!ok)
            return EXIT_BAD_INPUT;
    }
    const char *missing = optind < argc ? NULL
                          : !out       ? "--out DIR"
                          : !c.op      ? "--op OP"
                          : !name      ? "--name NAME"
                          : !input_count ? "--input NAME=FILE"
                                         : NULL;
    if (optind < argc || missing) {
        if (optind < argc)
            fprintf(stderr, "moeperm make-case: unexpected argument \"%s\"\n", argv[optind]);
        else
            fprintf(stderr, "moeperm make-case: missing %s\n", missing);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (name[0] == '\0' || name[0] == '.' || strchr(name, '/')) {
        fprintf(stderr, "moeperm make-case: --name \"%s\" is not a plain directory name\n", name);
        return EXIT_BAD_INPUT;
    }
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        if (attrs[i].given && !(attrs[i].ops & 1u << c.op)) {
            fprintf(stderr, "moeperm make-case: %s is not an option of %s, which has no such "
                            "attribute (see --help)\n", attrs[i].flag, moeperm_op_name(c.op));
            return EXIT_BAD_INPUT;
        }
    }
    if (c.op == MOEPERM_OP_PERMUTE_GRAD && c.attrs.top_k == 0) {
        fprintf(stderr, "moeperm make-case: MoeTokenPermuteGrad needs --top-k K\n");
        return EXIT_BAD_INPUT;
    }
    if (chip_name && c.op != MOEPERM_OP_UNPERMUTE_GRAD) {
        fprintf(stderr, "moeperm make-case: --chip is MoeTokenUnpermuteGrad's; %s has no chip\n",
                moeperm_op_name(c.op));
        return EXIT_BAD_INPUT;
    }
    if (chip_name) {
        /* The name and its numbers go into the manifest together. */
        bool ub_off = c.attrs.ub_bytes && c.attrs.ub_bytes != chip.ub_bytes;
        if (ub_off || (c.attrs.vector_cores && c.attrs.vector_cores != chip.vector_cores)) {
            fprintf(stderr, "moeperm make-case: --chip %s has %lld unified-buffer bytes and %lld "
                            "vector cores, but %s %lld is given beside it\n", chip_name,
                    (long long)chip.ub_bytes, (long long)chip.vector_cores,
                    ub_off ? "--ub-bytes" : "--vector-cores",
                    (long long)(ub_off ? c.attrs.ub_bytes : c.attrs.vector_cores));
            return EXIT_BAD_INPUT;
        }
        snprintf(c.attrs.chip, sizeof c.attrs.chip, "%s", chip_name);
        c.attrs.ub_bytes = chip.ub_bytes;
        c.attrs.vector_cores = chip.vector_cores;
    }
    char err[1024];
    /* The inputs in the operator's argument order, whatever the order of
     * the options. */
    size_t count;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(c.op, &count);
    for (size_t s = 0; s < count; s++)
        for (size_t i = 0; i < input_count; i++) {
            size_t len = strlen(slots[s].name);
            if (strncmp(inputs[i], slots[s].name, len) == 0 && inputs[i][len] == '=' &&
                !add_input(&c, inputs[i]))
                goto done;
        }
    for (size_t i = 0; i < input_count; i++) {
        const char *eq = strchr(inputs[i], '=');
        bool placed = false;
        for (size_t t = 0; eq && t < c.tensor_count; t++)
            placed = placed || (strlen(c.tensors[t].name) == (size_t)(eq - inputs[i]) &&
                                strncmp(c.tensors[t].name, inputs[i], (size_t)(eq - inputs[i])) ==
                                    0);
        if (!placed && !add_input(&c, inputs[i]))
            goto done; /* names the unknown input */
    }
    c.name = cli_format("%s", name);
    c.description = cli_format("%s", description ? description : "made from the user's tensors");
    c.generator = cli_format("moeperm %s make-case", moeperm_version());
    if (!c.name || !c.description || !c.generator) {
        fprintf(stderr, "moeperm make-case: out of memory\n");
        rc = EXIT_BACKEND;
        goto done;
    }
    if (moeperm_golden_case_finish(&c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm make-case: %s\n", err);
        goto done;
    }
    char *path = cli_format("%s/%s", out, name);
    int written = path ? moeperm_golden_case_write(path, &c, force, err, sizeof err) : -1;
    if (written < 0)
        fprintf(stderr, "moeperm make-case: %s\n", path ? err : "out of memory");
    else if (written > 0)
        fprintf(stderr, "moeperm make-case: %s\n", err);
    else
        printf("moeperm make-case: wrote %s\n", path);
    rc = written == 0 ? EXIT_OK : EXIT_BAD_INPUT;
    free(path);
done:
    moeperm_golden_case_free(&c);
    return rc;
}
