/*
 * Golden case files: a written case of every operator reads back identical
 * (manifest fields, attributes and tensor bytes), a read loads only the
 * roles asked for, an existing case is replaced only when forced and only
 * when it is a case, an old case that cannot be removed is kept and
 * reported, a failed write leaves the earlier case and no temporary behind,
 * a case generated and written in stretches (moeperm_golden_generate_write()) is
 * the case made whole and refusals leave nothing,
 * atomic file writes never leave a partial file, integers at and beyond 64
 * bits read as documented (format 2, and format 1 on a kept case of that
 * format), and case discovery is sorted,
 * follows symbolic links without looping, and skips the dot-directories an
 * interrupted write may leave; discovery fails, naming the path, on what
 * it cannot see into (EACCES as nobody, a link loop, PATH_MAX) and lists a
 * dangling case.json; a case is never written inside another, and one
 * found there fails discovery; an atomic write never replaces what is not
 * a regular file; a case name too long for its temporary is refused before
 * anything is made.
 */
#define _DEFAULT_SOURCE /* setgroups() */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <moeperm/golden.h>

#include "golden/case/casedir.h"
#include "golden/common/fileio.h"
#include "golden/common/path.h"
#include "golden_util.h"

static const char *const root = scratch_root; /* scratch_setup() makes it */

/* A small MoeTokenPermuteGrad case (rows -1: none dropped) whose name,
 * description and command need escaping in the manifest. */
static moeperm_golden_case make_case(uint64_t seed, int64_t rows)
{
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_FLOAT16, 7, 3, 5);
    snprintf(s.name, sizeof s.name, "io \"quoted\"\tname");
    snprintf(s.description, sizeof s.description, "a description with \\ and \"quotes\"");
    s.num_rows = rows;
    s.seed = seed;
    s.values = MOEPERM_GOLDEN_VALUES_ROUNDING;
    return generated_case(&s, "moeperm golden --out .. \"x\"");
}

static void test_written_case_reads_back_identical(void **state)
{
    (void)state;
    char err[512], path[512];
    moeperm_golden_case c = make_case(5, 17), back;
    snprintf(path, sizeof path, "%s/a/b/case", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_same_case(&c, &back);
    /* The values the spec asked for, not only those the writer gave. */
    assert_int_equal(back.format_version, 2);
    assert_int_equal(back.op, MOEPERM_OP_PERMUTE_GRAD);
    assert_string_equal(back.name, "io \"quoted\"\tname");
    assert_int_equal(back.attrs.top_k, 3);
    assert_false(back.attrs.padded_mode);
    assert_int_equal(back.seed, 5);
    const moeperm_golden_tensor *grad = moeperm_golden_case_tensor_const(&back, "permuted_output_grad");
    const moeperm_golden_tensor *out = moeperm_golden_case_tensor_const(&back, "input_grad");
    assert_non_null(grad);
    assert_non_null(out);
    assert_int_equal(grad->dtype, MOEPERM_FLOAT16);
    assert_int_equal(grad->shape[0], 17);
    assert_int_equal(grad->shape[1], 5);
    assert_int_equal(out->shape[0], 7);
    assert_int_equal(out->shape[1], 5);
    assert_int_equal(moeperm_golden_case_tensor_const(&back, "sorted_indices")->shape[0], 21);
    moeperm_golden_case_free(&back);
    moeperm_golden_case_free(&c);
}

/* Each operator's tensors (MoeTokenUnpermuteGrad's optional probs, its
 * probs_grad and their float64 exact values among them), attributes
 * (MoeTokenPermute's num_out_tokens, the chip of MoeTokenUnpermuteGrad)
 * and dtypes (int64 expert ids) survive a write and a read. */
static void test_every_operator_reads_back_identical(void **state)
{
    (void)state;
    static const moeperm_op ops[] = {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_OP_PERMUTE,
                                     MOEPERM_OP_UNPERMUTE, MOEPERM_OP_UNPERMUTE_GRAD};
    char err[1024], path[512];
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        moeperm_golden_spec s = moeperm_golden_spec_default(ops[i], MOEPERM_BF16, 6, 2, 9);
        snprintf(s.name, sizeof s.name, "op%zu", i);
        s.seed = 11 + i;
        if (ops[i] == MOEPERM_OP_PERMUTE) {
            s.index_dtype = MOEPERM_INT64;
            s.num_out_tokens = 7;
        }
        if (ops[i] == MOEPERM_OP_UNPERMUTE_GRAD) {
            s.probs_dtype = MOEPERM_FLOAT;
            s.ub_bytes = 65536;
            s.vector_cores = 3;
        }
        moeperm_golden_case c = generated_case(&s, NULL), back;
        snprintf(path, sizeof path, "%s/ops/%s", root, s.name);
        assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
        if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
            fail_msg("%s: %s", moeperm_op_name(ops[i]), err);
        assert_same_case(&c, &back);
        assert_int_equal(back.op, ops[i]);
        size_t slots;
        moeperm_golden_op_slots(ops[i], &slots);
        assert_int_equal(back.tensor_count, slots); /* the optional ones too */
        if (ops[i] == MOEPERM_OP_PERMUTE) {
            assert_int_equal(back.attrs.num_out_tokens, 7);
            assert_int_equal(moeperm_golden_case_tensor_const(&back, "indices")->dtype, MOEPERM_INT64);
        }
        if (ops[i] == MOEPERM_OP_UNPERMUTE_GRAD) {
            assert_int_equal(back.attrs.ub_bytes, 65536);
            assert_int_equal(back.attrs.vector_cores, 3);
            assert_int_equal(moeperm_golden_case_tensor_const(&back, "probs")->dtype, MOEPERM_FLOAT);
            assert_int_equal(moeperm_golden_case_tensor_const(&back, "probs_grad_exact")->dtype,
                             MOEPERM_FLOAT64);
        }
        moeperm_golden_case_free(&back);
        moeperm_golden_case_free(&c);
    }
}

/* A read loads what it is asked for and nothing more, yet checks every
 * file's hash unless only the manifest is wanted. */
static void test_read_loads_only_the_roles_asked_for(void **state)
{
    (void)state;
    char err[1024], path[512], file[600];
    moeperm_golden_case c = make_case(12, -1), back;
    snprintf(path, sizeof path, "%s/load", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    static const unsigned loads[] = {MOEPERM_GOLDEN_LOAD_NONE, MOEPERM_GOLDEN_LOAD_INPUTS, MOEPERM_GOLDEN_LOAD_OUTPUTS,
                                     MOEPERM_GOLDEN_LOAD_ALL};
    for (size_t l = 0; l < 4; l++) {
        if (moeperm_golden_case_read(path, loads[l], &back, err, sizeof err) != 0)
            fail_msg("load %u: %s", loads[l], err);
        for (size_t i = 0; i < back.tensor_count; i++) {
            const moeperm_golden_tensor *t = &back.tensors[i];
            bool want = t->role == MOEPERM_GOLDEN_ROLE_INPUT ? (loads[l] & MOEPERM_GOLDEN_LOAD_INPUTS) != 0
                                                     : (loads[l] & MOEPERM_GOLDEN_LOAD_OUTPUTS) != 0;
            if ((t->data != NULL) != want)
                fail_msg("load %u: %s is %sloaded", loads[l], t->name, t->data ? "" : "not ");
            assert_non_null(t->path);
            if (want)
                assert_memory_equal(t->data, tensor_data(&c, t->name), t->bytes);
        }
        moeperm_golden_case_free(&back);
    }
    /* A golden output that lies is refused even when only inputs are kept;
     * the manifest alone does not look at the files. */
    snprintf(file, sizeof file, "%s/input_grad.bin", path);
    uint8_t *bytes = tensor_data(&c, "input_grad");
    bytes[0] ^= 1;
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, moeperm_golden_case_tensor(&c, "input_grad")->bytes, f),
                     moeperm_golden_case_tensor(&c, "input_grad")->bytes);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_INPUTS, &back, err, sizeof err), -1);
    if (!strstr(err, "tensors.input_grad.sha256 is "))
        fail_msg("unexpected message: %s", err);
    assert_int_equal(back.tensor_count, 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_NONE, &back, err, sizeof err), 0);
    moeperm_golden_case_free(&back);
    moeperm_golden_case_free(&c);
}

static void test_existing_case_is_replaced_only_when_forced(void **state)
{
    (void)state;
    char err[512], path[1100], parent[512];
    moeperm_golden_case first = make_case(1, -1), second = make_case(2, -1), back;
    snprintf(parent, sizeof parent, "%s/force", root);
    snprintf(path, sizeof path, "%s/case", parent);
    assert_int_equal(moeperm_golden_case_write(path, &first, false, err, sizeof err), 0);
    assert_int_equal(moeperm_golden_case_write(path, &second, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "already exists"));
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), 0);
    assert_int_equal(back.seed, 1);
    moeperm_golden_case_free(&back);

    assert_int_equal(moeperm_golden_case_write(path, &second, true, err, sizeof err), 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), 0);
    assert_int_equal(back.seed, 2);
    assert_same_case(&second, &back);
    moeperm_golden_case_free(&back);
    /* Nothing but the case is left in the parent: no .tmp or .old. */
    assert_int_equal(dir_entries(parent), 1);
    moeperm_golden_case_free(&first);
    moeperm_golden_case_free(&second);
}

static void test_failed_write_leaves_earlier_outputs(void **state)
{
    (void)state;
    char err[512], path[1100], blocker[512];
    moeperm_golden_case c = make_case(3, -1);
    /* The parent is a file: the write fails before anything is created. */
    snprintf(blocker, sizeof blocker, "%s/blocker", root);
    FILE *f = fopen(blocker, "w");
    assert_non_null(f);
    fputs("keep me", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/case", blocker);
    assert_int_equal(moeperm_golden_case_write(path, &c, true, err, sizeof err), -1);
    assert_true(strlen(err) > 0);

    /* An atomic file write into a missing directory fails and leaves the
     * earlier file untouched. */
    snprintf(path, sizeof path, "%s/out.bin", root);
    assert_int_equal(moeperm_golden_write_file_atomic(path, "old", 3, err, sizeof err), 0);
    char bad[1100];
    snprintf(bad, sizeof bad, "%s/missing/out.bin", root);
    assert_int_equal(moeperm_golden_write_file_atomic(bad, "new", 3, err, sizeof err), -1);
    assert_int_equal(moeperm_golden_write_file_atomic(path, "newer", 5, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 5);
    moeperm_golden_case_free(&c);
}

/* moeperm_golden_generate_write() hands each tensor to the writer's threads in
 * stretches while the rest is made; its case must be the one made whole
 * and written by moeperm_golden_case_write(): the same manifest text (hashes
 * included) and the same files, which read back (each checked against its
 * sha256 by the reader's own hashing) as moeperm_golden_generate()'s case.  Shapes
 * of many stretches and several write pieces, dropped rows, the vector
 * kinds (normal in bf16 and fp16) and the element-by-element ones, for
 * every operator. */
static void test_streamed_case_is_the_case_made_whole(void **state)
{
    (void)state;
    static const struct {
        moeperm_op op;
        moeperm_dtype dtype;
        moeperm_golden_values values;
    } cases[] = {
        {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, MOEPERM_GOLDEN_VALUES_NORMAL},
        {MOEPERM_OP_PERMUTE, MOEPERM_FLOAT16, MOEPERM_GOLDEN_VALUES_NORMAL},
        {MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT, MOEPERM_GOLDEN_VALUES_NAN_INF},
        {MOEPERM_OP_UNPERMUTE_GRAD, MOEPERM_FLOAT16, MOEPERM_GOLDEN_VALUES_MASKING},
    };
    char err[1024], streamed[512], whole[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* 256 slots of 20001 columns: 5 to 10 MiB in each large tensor. */
        moeperm_golden_spec s = moeperm_golden_spec_default(cases[i].op, cases[i].dtype, 64, 4, 20001);
        s.values = cases[i].values;
        s.probs_values = cases[i].values;
        if (cases[i].op != MOEPERM_OP_PERMUTE)
            s.num_rows = 250;
        s.seed = 31 + i;
        snprintf(s.name, sizeof s.name, "stream%zu", i);
        snprintf(streamed, sizeof streamed, "%s/stream/%s", root, s.name);
        snprintf(whole, sizeof whole, "%s/whole/%s", root, s.name);
        if (moeperm_golden_generate_write(&s, "cmd", streamed, false, err, sizeof err) != 0)
            fail_msg("%s: %s", moeperm_op_name(cases[i].op), err);
        moeperm_golden_case c = generated_case(&s, "cmd"), back;
        assert_int_equal(moeperm_golden_case_write(whole, &c, false, err, sizeof err), 0);

        char manifest[600];
        snprintf(manifest, sizeof manifest, "%s/case.json", streamed);
        char *streamed_text = read_text(manifest);
        snprintf(manifest, sizeof manifest, "%s/case.json", whole);
        char *whole_text = read_text(manifest);
        assert_string_equal(streamed_text, whole_text);
        if (moeperm_golden_case_read(streamed, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
            fail_msg("%s: %s", moeperm_op_name(cases[i].op), err);
        assert_same_case(&c, &back);
        free(streamed_text);
        free(whole_text);
        moeperm_golden_case_free(&back);
        moeperm_golden_case_free(&c);
    }
}

/* moeperm_golden_generate_write() checks the path before it makes anything, and a
 * refusal leaves nothing behind: an existing case without force (-1, the
 * case unchanged), a spec refused (-2, no directory). */
static void test_streamed_write_refusals_leave_nothing(void **state)
{
    (void)state;
    char err[512], parent[512], path[600];
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, 5, 2, 7);
    snprintf(s.name, sizeof s.name, "c");
    snprintf(parent, sizeof parent, "%s/refusals", root);
    snprintf(path, sizeof path, "%s/c", parent);
    assert_int_equal(moeperm_golden_generate_write(&s, NULL, path, false, err, sizeof err), 0);

    s.seed = 2;
    assert_int_equal(moeperm_golden_generate_write(&s, NULL, path, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "already exists"));
    moeperm_golden_case back;
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), 0);
    assert_int_equal(back.seed, MOEPERM_GOLDEN_DEFAULT_SEED);
    moeperm_golden_case_free(&back);

    s.top_k = 0;
    snprintf(path, sizeof path, "%s/d", parent);
    assert_int_equal(moeperm_golden_generate_write(&s, NULL, path, true, err, sizeof err), -2);
    assert_non_null(strstr(err, "top_k"));
    /* The first case alone: no d, no temporaries. */
    assert_int_equal(dir_entries(parent), 1);
}

/* A FIFO (or a device that blocks on open) where a manifest or a tensor
 * file should be is refused as not a regular file, at once: opening it for
 * reading must not wait for a writer that never comes.  SIGALRM ends the
 * test, failing it, should a read hang. */
static void test_fifo_in_place_of_a_file_is_refused_without_hanging(void **state)
{
    (void)state;
    char err[1024], path[512], file[600];
    moeperm_golden_case c = make_case(9, -1), back;
    snprintf(path, sizeof path, "%s/fifo-case", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);

    alarm(20);
    snprintf(file, sizeof file, "%s/sorted_indices.bin", path);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(mkfifo(file, 0600), 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), -1);
    if (!strstr(err, "sorted_indices.bin is not a regular file"))
        fail_msg("unexpected message: %s", err);

    snprintf(file, sizeof file, "%s/case.json", path);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(mkfifo(file, 0600), 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), -1);
    if (!strstr(err, "case.json is not a regular file"))
        fail_msg("unexpected message: %s", err);

    void *data = NULL;
    char hex[GOLDEN_SHA256_HEX];
    assert_int_equal(golden_read_file(file, "the output", 4, &data, hex, err, sizeof err), -1);
    assert_null(data);
    alarm(0);
}

static void test_find_cases_is_sorted_and_skips_dot_directories(void **state)
{
    (void)state;
    char err[512], dir[512];
    moeperm_golden_case c = make_case(4, -1);
    const char *names[] = {"find/z/c2", "find/a/c1", "find/m", "find/a/c0", "find/.tmp/c9"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        assert_int_equal(moeperm_golden_case_write(dir, &c, false, err, sizeof err), 0);
    }
    snprintf(dir, sizeof dir, "%s/find/", root);
    char **found;
    size_t count;
    assert_int_equal(moeperm_golden_find_cases(dir, &found, &count, err, sizeof err), 0);
    assert_int_equal(count, 4);
    const char *want[] = {"find/a/c0", "find/a/c1", "find/m", "find/z/c2"};
    for (size_t i = 0; i < 4; i++) {
        char expected[1100];
        snprintf(expected, sizeof expected, "%s/%s", root, want[i]);
        assert_string_equal(found[i], expected);
    }
    moeperm_golden_free_paths(found, count);
    snprintf(dir, sizeof dir, "%s/nothing-here", root);
    assert_int_equal(moeperm_golden_find_cases(dir, &found, &count, err, sizeof err), -1);
    moeperm_golden_case_free(&c);
}

/* The name of the first entry of dir that starts with prefix, or "". */
static void find_entry(const char *dir, const char *prefix, char *name, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    name[0] = '\0';
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(name, len, "%s", e->d_name);
            break;
        }
    if (d)
        closedir(d);
}

/* The repro of the bug: --force over a directory of other files removed
 * them all.  Each kind of non-case must be refused with the directory and
 * the first unexpected entry named, and leave every byte where it was. */
static void test_force_refuses_a_directory_that_is_not_a_case(void **state)
{
    (void)state;
    char err[1024], parent[512], path[600], file[700];
    moeperm_golden_case c = make_case(6, -1);
    struct stat st;
    snprintf(parent, sizeof parent, "%s/notcase", root);
    snprintf(path, sizeof path, "%s/results", parent);
    snprintf(file, sizeof file, "%s/deep", path);
    assert_int_equal(golden_mkdirs(file, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/notes.txt", path);
    write_text(file, "keep me");
    assert_int_equal(moeperm_golden_case_write(path, &c, true, err, sizeof err), -1);
    /* "deep" sorts before "notes.txt": the first in byte order is named,
     * whatever order readdir gives. */
    if (!strstr(err, path) || !strstr(err, "\"deep\""))
        fail_msg("unexpected message: %s", err);
    char *text = read_text(file);
    assert_string_equal(text, "keep me");
    free(text);
    snprintf(file, sizeof file, "%s/deep", path);
    assert_int_equal(stat(file, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(dir_entries(path), 2);
    assert_int_equal(dir_entries(parent), 1); /* no temporary left beside it */

    /* A case plus one extra file is not a case either. */
    snprintf(path, sizeof path, "%s/extra", parent);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/zz-notes.txt", path);
    write_text(file, "mine");
    assert_int_equal(moeperm_golden_case_write(path, &c, true, err, sizeof err), -1);
    if (!strstr(err, "\"zz-notes.txt\""))
        fail_msg("unexpected message: %s", err);
    assert_int_equal(dir_entries(path), 5);

    /* A case file's name on a directory: removing it would take its
     * contents along. */
    snprintf(path, sizeof path, "%s/dirname", parent);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/input_grad.bin", path);
    assert_int_equal(unlink(file), 0);
    snprintf(file, sizeof file, "%s/input_grad.bin/inner", path);
    assert_int_equal(golden_mkdirs(file, err, sizeof err), 0);
    assert_int_equal(moeperm_golden_case_write(path, &c, true, err, sizeof err), -1);
    if (!strstr(err, "\"input_grad.bin\", which is not a regular file"))
        fail_msg("unexpected message: %s", err);
    assert_int_equal(stat(file, &st), 0);

    /* Case files without a case.json. */
    snprintf(path, sizeof path, "%s/nomanifest", parent);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/case.json", path);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(moeperm_golden_case_write(path, &c, true, err, sizeof err), -1);
    if (!strstr(err, "no case.json"))
        fail_msg("unexpected message: %s", err);
    assert_int_equal(dir_entries(path), 3);

    /* A link is not a case directory, even one to a case. */
    char link_path[600];
    snprintf(path, sizeof path, "%s/extra", parent);
    snprintf(link_path, sizeof link_path, "%s/link", parent);
    assert_int_equal(symlink(path, link_path), 0);
    assert_int_equal(moeperm_golden_case_write(link_path, &c, true, err, sizeof err), -1);
    if (!strstr(err, "symbolic link"))
        fail_msg("unexpected message: %s", err);
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    /* An empty directory holds nothing to lose: it is replaced. */
    snprintf(path, sizeof path, "%s/empty", parent);
    assert_int_equal(mkdir(path, 0777), 0);
    assert_int_equal(moeperm_golden_case_write(path, &c, true, err, sizeof err), 0);
    assert_int_equal(dir_entries(path), 4);
    moeperm_golden_case_free(&c);
}

/* What the child of the test below found. */
typedef struct keep_result {
    int dropped; /* 0, or why the child could not run the check: 1 no setuid */
    int rc;
    char err[1024];
    int new_seed_ok;  /* the new case reads back at the path */
    int old_seed_ok;  /* the old case reads back whole where err says */
} keep_result;

/* An old case that cannot be removed after the new one took its name is
 * kept, not half-removed silently, and the caller is told where.  The
 * removal fails because the old directory is not writable; root ignores
 * that, so under root a child process becomes nobody first. */
static void test_old_case_that_cannot_be_removed_is_kept_and_reported(void **state)
{
    (void)state;
    moeperm_golden_case first = make_case(1, -1), second = make_case(2, -1);
    keep_result res;
    int fds[2];
    memset(&res, 0, sizeof res);
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* No cmocka calls here: a failed assertion would unwind the
         * child into the parent's test runner. */
        char dir[] = "/tmp/moeperm-test-keep-XXXXXX";
        char path[600], parked[600], name[256], err[512];
        moeperm_golden_case back;
        close(fds[0]);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            res.dropped = 1;
        if (!res.dropped && mkdtemp(dir)) {
            snprintf(path, sizeof path, "%s/c", dir);
            if (moeperm_golden_case_write(path, &first, false, err, sizeof err) == 0 &&
                chmod(path, 0555) == 0) {
                res.rc = moeperm_golden_case_write(path, &second, true, res.err, sizeof res.err);
                if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) == 0) {
                    res.new_seed_ok = back.seed == 2;
                    moeperm_golden_case_free(&back);
                }
                find_entry(dir, ".c.", name, sizeof name);
                snprintf(parked, sizeof parked, "%s/%s", dir, name);
                if (name[0] && strstr(res.err, parked) &&
                    moeperm_golden_case_read(parked, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) == 0) {
                    res.old_seed_ok = back.seed == 1;
                    moeperm_golden_case_free(&back);
                }
                chmod(parked, 0755);
                chmod(path, 0755);
            } else {
                snprintf(res.err, sizeof res.err, "setup failed: %s", err);
            }
            golden_remove_tree(dir);
        }
        ssize_t put = write(fds[1], &res, sizeof res);
        _exit(put == (ssize_t)sizeof res ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], &res, sizeof res);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(got, (ssize_t)sizeof res);
    if (res.dropped)
        skip(); /* root without CAP_SETUID: no way to make the removal fail */
    if (res.rc != 1 || !res.new_seed_ok || !res.old_seed_ok)
        fail_msg("rc %d, new case %s, old case %s: %s", res.rc,
                 res.new_seed_ok ? "in place" : "missing",
                 res.old_seed_ok ? "kept" : "lost or not named", res.err);
    assert_non_null(strstr(res.err, "could not be removed"));
    moeperm_golden_case_free(&first);
    moeperm_golden_case_free(&second);
}

/* "" once read "/case.json"; "dir/" printed "dir//case.json". */
/* The removal of a replaced case: a directory holding anything besides the
 * case's files (a file that appeared in the parked case) is left whole,
 * case files included, so what moeperm_golden_case_write() reports as kept is
 * kept; a plain case directory goes entirely. */
static void test_case_removal_leaves_a_directory_with_other_files_whole(void **state)
{
    (void)state;
    char err[1024], path[512], file[600];
    moeperm_golden_case c = make_case(3, -1);
    snprintf(path, sizeof path, "%s/removal", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/notes.txt", path);
    write_text(file, "keep me");
    errno = 0;
    assert_int_equal(golden_remove_case_dir(path), -1);
    assert_int_equal(errno, ENOTEMPTY);
    moeperm_golden_case back;
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("the case was touched: %s", err);
    assert_same_case(&c, &back);
    moeperm_golden_case_free(&back);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(golden_remove_case_dir(path), 0);
    struct stat st;
    assert_int_equal(lstat(path, &st), -1);
    moeperm_golden_case_free(&c);
}

static void test_empty_case_directory_is_refused_and_slashes_are_not_doubled(void **state)
{
    (void)state;
    char err[1024], path[512], file[600];
    moeperm_golden_case c = make_case(7, -1), back;
    strcpy(err, "");
    assert_int_equal(moeperm_golden_case_read("", MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), -1);
    if (!strstr(err, "empty string"))
        fail_msg("unexpected message: %s", err);
    assert_int_equal(moeperm_golden_case_write("", &c, true, err, sizeof err), -1);
    if (!strstr(err, "empty string"))
        fail_msg("unexpected message: %s", err);

    snprintf(path, sizeof path, "%s/slash/c1/", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), 0);
    moeperm_golden_case_free(&back);
    snprintf(file, sizeof file, "%ssorted_indices.bin", path);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err), -1);
    if (!strstr(err, "c1/case.json: ") || !strstr(err, "c1/sorted_indices.bin") ||
        strstr(err, "//"))
        fail_msg("unexpected message: %s", err);
    /* The slash named the case, not a directory inside it. */
    snprintf(file, sizeof file, "%s/slash", root);
    assert_int_equal(dir_entries(file), 1);
    moeperm_golden_case_free(&c);
}

/* Reads the case at path, which must be refused with a message holding
 * want (and, when not NULL, not holding unwanted). */
static void expect_refused(const char *path, const char *want, const char *unwanted)
{
    moeperm_golden_case back;
    char err[1024];
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) == 0) {
        moeperm_golden_case_free(&back);
        fail_msg("%s was read; expected a refusal with \"%s\"", path, want);
    }
    if (!strstr(err, want) || (unwanted && strstr(err, unwanted)))
        fail_msg("unexpected message: %s (expected \"%s\")", err, want);
    assert_int_equal(back.tensor_count, 0);
}

/* json-c reads any integer beyond 64 bits as UINT64_MAX (or INT64_MIN) and
 * keeps no trace of it (docs/golden-format.md): the largest seed is a
 * valid seed, and an extent, an attribute or (format 1) a dimension that
 * large is refused with a message that says the file may hold more. */
static void test_integers_at_and_beyond_64_bits(void **state)
{
    (void)state;
    char err[1024], path[512], manifest[600], field[96];
    moeperm_golden_case c = make_case(5, -1), back;
    snprintf(path, sizeof path, "%s/big", root);
    snprintf(manifest, sizeof manifest, "%s/case.json", path);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);
    char *orig = read_text(manifest);

    edit_text(manifest, "\"seed\": 5,", "\"seed\": 18446744073709551615,");
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("the largest seed was refused: %s", err);
    assert_true(back.seed == UINT64_MAX);
    moeperm_golden_case_free(&back);

    static const char *const too_big[] = {"18446744073709551615",
                                          "100000000000000000000000000000"};
    for (size_t i = 0; i < 2; i++) {
        write_text(manifest, orig);
        snprintf(field, sizeof field, "\"shape\": [%s, 5]", too_big[i]);
        edit_text(manifest, "\"shape\": [7, 5]", field);
        expect_refused(path,
                       "tensors.input_grad.shape[0] is 18446744073709551615 or more (json-c "
                       "reads larger integers as that), larger than the 1099511627776",
                       NULL);
        write_text(manifest, orig);
        snprintf(field, sizeof field, "\"top_k\": %s,", too_big[i]);
        edit_text(manifest, "\"top_k\": 3,", field);
        expect_refused(path,
                       "attrs.top_k is 18446744073709551615 or more (json-c reads larger "
                       "integers as that), larger than the 1099511627776",
                       NULL);
    }
    write_text(manifest, orig);
    edit_text(manifest, "\"shape\": [7, 5]", "\"shape\": [1099511627777, 5]");
    expect_refused(path, "tensors.input_grad.shape[0] is 1099511627777, larger than the "
                         "1099511627776", "or more");
    free(orig);

    /* The signed attribute, on its negative side: json-c's INT64_MIN. */
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE, MOEPERM_BF16, 4, 2, 3);
    snprintf(s.name, sizeof s.name, "permute");
    c = generated_case(&s, NULL);
    snprintf(path, sizeof path, "%s/big-permute", root);
    snprintf(manifest, sizeof manifest, "%s/case.json", path);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);
    edit_text(manifest, "\"num_out_tokens\": 0,",
              "\"num_out_tokens\": -100000000000000000000000000000,");
    expect_refused(path, "attrs.num_out_tokens is -9223372036854775808, below the "
                         "-1099511627776 this format allows", NULL);

    /* Format 1 names its sizes at the top level. */
    char cmd[2048];
    snprintf(path, sizeof path, "%s/big-v1", root);
    snprintf(manifest, sizeof manifest, "%s/case.json", path);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && chmod -R u+w '%s'", GOLDEN_V1_CASE, path,
             path);
    assert_int_equal(system(cmd), 0);
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("the format-1 case was refused: %s", err);
    assert_int_equal(back.format_version, 1);
    moeperm_golden_case_free(&back);
    orig = read_text(manifest);
    for (size_t i = 0; i < 2; i++) {
        write_text(manifest, orig);
        snprintf(field, sizeof field, "\"tokens_num\": %s,", too_big[i]);
        edit_text(manifest, "\"tokens_num\": 5,", field);
        expect_refused(path,
                       "tokens_num is 18446744073709551615 or more (json-c reads larger "
                       "integers as that), larger than the 1099511627776",
                       NULL);
    }
    write_text(manifest, orig);
    edit_text(manifest, "\"tokens_num\": 5,", "\"tokens_num\": 1099511627777,");
    expect_refused(path, "tokens_num is 1099511627777, larger than the 1099511627776",
                   "or more");
    free(orig);
}

/* docs/golden-format.md: tools find every case.json below a directory, links
 * included.  The tree (under links/):
 *   a/c0        a case
 *   b -> a      a second name for a: listed once, as a/c0
 *   loop -> .   a loop back to links/: must end
 *   m/case.json -> ../a/c0/case.json
 *   z -> ../outside, holding the case c9
 *   dangling -> nowhere */
static void test_find_cases_follows_links_once_and_ends_loops(void **state)
{
    (void)state;
    char err[512], dir[600], target[600];
    moeperm_golden_case c = make_case(8, -1);
    snprintf(dir, sizeof dir, "%s/links/a/c0", root);
    assert_int_equal(moeperm_golden_case_write(dir, &c, false, err, sizeof err), 0);
    snprintf(dir, sizeof dir, "%s/outside/c9", root);
    assert_int_equal(moeperm_golden_case_write(dir, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);
    static const char *const links[][2] = {
        {"links/b", "a"},       {"links/loop", "."},
        {"links/z", "../outside"}, {"links/dangling", "nowhere"},
        {"links/m/case.json", "../a/c0/case.json"},
    };
    snprintf(dir, sizeof dir, "%s/links/m", root);
    assert_int_equal(mkdir(dir, 0777), 0);
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(dir, sizeof dir, "%s/%s", root, links[i][0]);
        snprintf(target, sizeof target, "%s", links[i][1]);
        assert_int_equal(symlink(target, dir), 0);
    }
    snprintf(dir, sizeof dir, "%s/links", root);
    char **found;
    size_t count;
    assert_int_equal(moeperm_golden_find_cases(dir, &found, &count, err, sizeof err), 0);
    const char *want[] = {"links/a/c0", "links/m", "links/z/c9"};
    if (count != 3)
        fail_msg("%zu cases found, expected 3 (first: %s)", count, count ? found[0] : "none");
    for (size_t i = 0; i < 3; i++) {
        char expected[1100];
        snprintf(expected, sizeof expected, "%s/%s", root, want[i]);
        assert_string_equal(found[i], expected);
    }
    moeperm_golden_free_paths(found, count);
}

/* What the child of a test run as nobody found. */
typedef struct child_result {
    int dropped; /* 1: root could not become nobody */
    int rc[3];
    char err[3][1024];
    char path[3][600];
} child_result;

/* Runs fn in a child that is nobody (when the test runs as root), so
 * that permissions bind; the child reports through a pipe.  Skips the
 * test only where root cannot drop its privileges. */
static void as_nobody(void (*fn)(child_result *), child_result *res)
{
    int fds[2];
    memset(res, 0, sizeof *res);
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                               setuid(65534) != 0))
            res->dropped = 1;
        else
            fn(res);
        ssize_t put = write(fds[1], res, sizeof *res);
        _exit(put == (ssize_t)sizeof *res ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], res, sizeof *res);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(got, (ssize_t)sizeof *res);
    if (res->dropped) {
        printf("skipped: running as root without the right to become nobody\n");
        skip();
    }
}

static void write_empty(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

/* Three trees, each with a good case a/c0 beside something the walk
 * cannot see into: a directory that can be listed but not searched (its
 * cases' stat() fails with EACCES), one that cannot even be read, and two
 * links that point at each other (ELOOP).  Each must fail the walk with
 * the path and the reason, not drop the case behind it. */
static void find_in_unreadable_trees(child_result *res)
{
    char dir[] = "/tmp/moeperm-test-walk-XXXXXX", path[700];
    if (!mkdtemp(dir))
        return;
    static const char *const blocked[] = {"listable", "closed", "loop"};
    for (int i = 0; i < 3; i++) {
        char tree[100], **found = NULL;
        size_t count = 0;
        snprintf(tree, sizeof tree, "%s/%s", dir, blocked[i]);
        snprintf(path, sizeof path, "%s/a/c0", tree);
        golden_mkdirs(path, res->err[i], sizeof res->err[i]);
        snprintf(path, sizeof path, "%s/a/c0/case.json", tree);
        write_empty(path);
        snprintf(res->path[i], sizeof res->path[i], "%s/sub", tree);
        if (i < 2) {
            snprintf(path, sizeof path, "%s/sub/c1", tree);
            golden_mkdirs(path, res->err[i], sizeof res->err[i]);
            snprintf(path, sizeof path, "%s/sub/c1/case.json", tree);
            write_empty(path);
            chmod(res->path[i], i == 0 ? 0644 : 0);
        } else {
            snprintf(path, sizeof path, "%s/sub2", tree);
            if (symlink("sub2", res->path[i]) != 0 || symlink("sub", path) != 0)
                snprintf(res->err[i], sizeof res->err[i], "cannot make the loop");
        }
        res->rc[i] = moeperm_golden_find_cases(tree, &found, &count, res->err[i], sizeof res->err[i]);
        if (res->rc[i] == 0)
            snprintf(res->err[i], sizeof res->err[i], "%zu cases found", count);
        moeperm_golden_free_paths(found, count);
        snprintf(path, sizeof path, "%s/sub", tree);
        chmod(path, 0755);
    }
    golden_remove_tree(dir);
}

static void test_find_cases_fails_on_what_it_cannot_see_into(void **state)
{
    (void)state;
    child_result res;
    as_nobody(find_in_unreadable_trees, &res);
    static const char *const reasons[] = {"Permission denied", "Permission denied",
                                          "Too many levels of symbolic links"};
    for (int i = 0; i < 3; i++)
        if (res.rc[i] != -1 || !strstr(res.err[i], res.path[i]) ||
            !strstr(res.err[i], reasons[i]))
            fail_msg("tree %d: rc %d, expected -1 with \"%s\" and \"%s\": %s", i, res.rc[i],
                     res.path[i], reasons[i], res.err[i]);
}

/* Removes the directory `name` in the directory fd and everything below,
 * through descriptors: the paths are beyond PATH_MAX. */
static void remove_at(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (unlinkat(fd, e->d_name, 0) != 0)
                remove_at(fd, e->d_name);
        }
        if (d)
            closedir(d);
    }
    unlinkat(parent, name, AT_REMOVEDIR);
}

/* A case deeper than PATH_MAX cannot be opened by its path: the walk must
 * fail naming where (shortened, so the reason still fits) instead of
 * skipping it as "not a directory" and passing the corpus without it. */
static void test_find_cases_fails_beyond_path_max(void **state)
{
    (void)state;
    char err[2048], dir[600], name[201];
    moeperm_golden_case c = make_case(4, -1);
    snprintf(dir, sizeof dir, "%s/deep/a/c0", root);
    assert_int_equal(moeperm_golden_case_write(dir, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);
    memset(name, 'd', 200);
    name[200] = '\0';
    snprintf(dir, sizeof dir, "%s/deep", root);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    int top = dup(fd);
    size_t levels = PATH_MAX / 201 + 2;
    for (size_t i = 0; i < levels; i++) {
        assert_int_equal(mkdirat(fd, name, 0755), 0);
        int next = openat(fd, name, O_RDONLY | O_DIRECTORY);
        assert_true(next >= 0);
        close(fd);
        fd = next;
    }
    int m = openat(fd, "case.json", O_WRONLY | O_CREAT, 0644);
    assert_true(m >= 0);
    close(m);
    close(fd);

    char **found = NULL;
    size_t count = 0;
    int rc = moeperm_golden_find_cases(dir, &found, &count, err, sizeof err);
    moeperm_golden_free_paths(found, count);
    remove_at(top, name);
    close(top);
    if (rc != -1 || !strstr(err, "File name too long") || !strstr(err, "/deep/dddd") ||
        !strstr(err, "bytes)"))
        fail_msg("rc %d, %zu cases: %s", rc, count, err);
}

/* A dangling case.json is a case whose manifest is missing, listed so the
 * reader can say so; a dangling link to a directory is skipped. */
static void test_find_cases_lists_a_dangling_manifest(void **state)
{
    (void)state;
    char err[1024], dir[600], link_path[700];
    snprintf(dir, sizeof dir, "%s/dangling/c1", root);
    assert_int_equal(golden_mkdirs(dir, err, sizeof err), 0);
    snprintf(link_path, sizeof link_path, "%s/case.json", dir);
    assert_int_equal(symlink("nowhere.json", link_path), 0);
    snprintf(link_path, sizeof link_path, "%s/dangling/gone", root);
    assert_int_equal(symlink("nowhere", link_path), 0);
    snprintf(dir, sizeof dir, "%s/dangling", root);
    char **found = NULL;
    size_t count = 0;
    assert_int_equal(moeperm_golden_find_cases(dir, &found, &count, err, sizeof err), 0);
    assert_int_equal(count, 1);
    assert_non_null(strstr(found[0], "dangling/c1"));
    moeperm_golden_free_paths(found, count);
}

/* A case directory holds only its own files.  The writers refuse a path
 * below a case (`golden --out CASE` made one), however it is spelled, and
 * leave nothing there; a case put inside another by hand makes discovery
 * fail, naming both, where it used to list the outer case alone and judge
 * the inner one never.  A directory of other files inside a case is no
 * case and is left alone. */
static void test_case_inside_a_case_is_refused_and_never_skipped(void **state)
{
    (void)state;
    char err[1024], outer[600], inner[700], other[600];
    moeperm_golden_case c = make_case(4, -1);
    snprintf(outer, sizeof outer, "%s/nest/outer", root);
    assert_int_equal(moeperm_golden_case_write(outer, &c, false, err, sizeof err), 0);
    const char *below[] = {"inner", "sub/inner", "../outer/x/inner", "./inner/"};
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, 5, 2, 7);
    snprintf(s.name, sizeof s.name, "inner");
    for (size_t i = 0; i < sizeof below / sizeof below[0]; i++) {
        snprintf(inner, sizeof inner, "%s/%s", outer, below[i]);
        if (moeperm_golden_case_write(inner, &c, true, err, sizeof err) != -1 ||
            !strstr(err, "inside the case") || !strstr(err, "nest/outer"))
            fail_msg("case_write %s: %s", below[i], err);
        if (moeperm_golden_generate_write(&s, NULL, inner, true, err, sizeof err) != -1 ||
            !strstr(err, "inside the case"))
            fail_msg("generate_write %s: %s", below[i], err);
    }
    /* The case's own files, and nothing else: no directory was made. */
    assert_int_equal(dir_entries(outer), 4);

    snprintf(other, sizeof other, "%s/nest/other", root);
    assert_int_equal(moeperm_golden_case_write(other, &c, false, err, sizeof err), 0);
    snprintf(inner, sizeof inner, "%s/deeper", outer);
    assert_int_equal(mkdir(inner, 0755), 0);
    snprintf(inner, sizeof inner, "%s/deeper/sub", outer);
    assert_int_equal(rename(other, inner), 0);
    snprintf(other, sizeof other, "%s/nest", root);
    char **found = NULL;
    size_t count = 0;
    if (moeperm_golden_find_cases(other, &found, &count, err, sizeof err) != -1 ||
        !strstr(err, "nest/outer/deeper/sub holds a case inside the case") ||
        !strstr(err, "nest/outer;"))
        fail_msg("%zu cases found: %s", count, err);
    moeperm_golden_free_paths(found, count);

    assert_int_equal(golden_remove_case_dir(inner), 0);
    snprintf(inner, sizeof inner, "%s/deeper/notes.txt", outer);
    write_text(inner, "outputs of a run, kept beside the case\n");
    assert_int_equal(moeperm_golden_find_cases(other, &found, &count, err, sizeof err), 0);
    assert_int_equal(count, 1);
    assert_non_null(strstr(found[0], "nest/outer"));
    moeperm_golden_free_paths(found, count);
    moeperm_golden_case_free(&c);
}

/* The last guard of every output: what is at the path when the rename
 * comes is replaced only if it is a regular file.  A link (to a file that
 * must not change), a FIFO and a directory are left as they were. */
static void test_atomic_write_never_replaces_what_is_not_a_regular_file(void **state)
{
    (void)state;
    char err[1024], dir[600], target[700], link_path[700], fifo[700];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/kinds", root);
    assert_int_equal(golden_mkdirs(dir, err, sizeof err), 0);
    snprintf(target, sizeof target, "%s/target.txt", dir);
    write_text(target, "keep me");
    snprintf(link_path, sizeof link_path, "%s/link", dir);
    assert_int_equal(symlink("target.txt", link_path), 0);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *paths[] = {link_path, fifo, dir};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(moeperm_golden_write_file_atomic(paths[i], "new", 3, err, sizeof err), -1);
        if (!strstr(err, "is not a regular file (it is "))
            fail_msg("%s: unexpected message: %s", paths[i], err);
    }
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    char *text = read_text(target);
    assert_string_equal(text, "keep me");
    free(text);
    assert_int_equal(dir_entries(dir), 3); /* no temporary left */
}

/* A case name whose temporary (".NAME.tmp.XXXXXX") would not fit is
 * refused before anything is created, with a sentence that says so. */
static void test_case_name_too_long_for_its_temporary_is_refused_first(void **state)
{
    (void)state;
    char err[1024], path[800], name[250];
    moeperm_golden_case c = make_case(2, -1);
    memset(name, 'n', 244);
    name[244] = '\0';
    snprintf(path, sizeof path, "%s/longname/%s", root, name);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), -1);
    if (!strstr(err, "is 244 bytes") || !strstr(err, "temporary name adds"))
        fail_msg("unexpected message: %s", err);
    snprintf(path, sizeof path, "%s/longname", root);
    struct stat st;
    assert_int_equal(lstat(path, &st), -1); /* not even the parent was made */
    name[243] = '\0';
    snprintf(path, sizeof path, "%s/longname/%s", root, name);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_written_case_reads_back_identical),
        cmocka_unit_test(test_every_operator_reads_back_identical),
        cmocka_unit_test(test_read_loads_only_the_roles_asked_for),
        cmocka_unit_test(test_existing_case_is_replaced_only_when_forced),
        cmocka_unit_test(test_failed_write_leaves_earlier_outputs),
        cmocka_unit_test(test_streamed_case_is_the_case_made_whole),
        cmocka_unit_test(test_streamed_write_refusals_leave_nothing),
        cmocka_unit_test(test_fifo_in_place_of_a_file_is_refused_without_hanging),
        cmocka_unit_test(test_find_cases_is_sorted_and_skips_dot_directories),
        cmocka_unit_test(test_force_refuses_a_directory_that_is_not_a_case),
        cmocka_unit_test(test_old_case_that_cannot_be_removed_is_kept_and_reported),
        cmocka_unit_test(test_case_removal_leaves_a_directory_with_other_files_whole),
        cmocka_unit_test(test_empty_case_directory_is_refused_and_slashes_are_not_doubled),
        cmocka_unit_test(test_integers_at_and_beyond_64_bits),
        cmocka_unit_test(test_find_cases_follows_links_once_and_ends_loops),
        cmocka_unit_test(test_find_cases_fails_on_what_it_cannot_see_into),
        cmocka_unit_test(test_find_cases_fails_beyond_path_max),
        cmocka_unit_test(test_find_cases_lists_a_dangling_manifest),
        cmocka_unit_test(test_case_inside_a_case_is_refused_and_never_skipped),
        cmocka_unit_test(test_atomic_write_never_replaces_what_is_not_a_regular_file),
        cmocka_unit_test(test_case_name_too_long_for_its_temporary_is_refused_first),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
