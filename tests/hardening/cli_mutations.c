/*
 * cli_mutations.c - seeded mutations of golden cases through the CLI.
 *
 *   cli_mutations MOEPERM [COUNT [FIRST_SEED]]
 *
 * Makes COUNT (default 400) broken copies of small generated cases, one
 * of each operator taking turns -
 * truncated or NUL-laced manifests, huge, negative, fractional and
 * wrongly typed numbers, deleted or renamed keys, truncated, extended,
 * missing or replaced tensor files, and bad indices or output bits with a
 * matching sha256 so that the reader lets them through to the operator and
 * the comparator - and runs `moeperm run`, `check` and `compare` on each.
 * Every run must end by exit() with status 0, 1, 2 or 3 - never a signal,
 * never a hang (a 60 s alarm) - and a failing status must come with a
 * message (stderr, or the report on stdout).  Mutation i depends only on its seed, so a failure
 * names the seed that reproduces it alone: `cli_mutations MOEPERM 1 SEED`.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden/common/prng.h"
#include <moeperm/golden.h>

#include "golden/common/sha256.h"

/* A good case the mutations start from, and what they need to know of it
 * (from its manifest, read by the library). */
typedef struct base_case {
    char dir[600];
    char good_out[600]; /* its outputs, as `moeperm run` wrote them */
    char files[MOEPERM_GOLDEN_MAX_TENSORS][64];
    char keys[MOEPERM_GOLDEN_MAX_TENSORS][64];
    size_t count;
    size_t indices; /* the int32 input of row or expert indices */
} base_case;

typedef struct blob {
    unsigned char *data;
    size_t size;
} blob;

/* SplitMix64 as a sequence, from the golden library's generator. */
static uint64_t next(uint64_t *s)
{
    return prng_mix64(*s += PRNG_GAMMA);
}

static blob slurp(const char *path)
{
    blob b = {NULL, 0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.size = (size_t)size;
    b.data = malloc(b.size + 1);
    if (!b.data || fread(b.data, 1, b.size, f) != b.size) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    return b;
}

static void spit(const char *path, const blob *b)
{
    FILE *f = fopen(path, "wb");
    if (!f || (b->size && fwrite(b->data, 1, b->size, f) != b->size) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

/* Replaces [at, at+len) of b by the n bytes of with. */
static void replace_bytes(blob *b, size_t at, size_t len, const void *with, size_t n)
{
    unsigned char *grown = malloc(b->size - len + n + 1);
    if (!grown)
        exit(2);
    memcpy(grown, b->data, at);
    memcpy(grown + at, with, n);
    memcpy(grown + at + n, b->data + at + len, b->size - at - len);
    b->size = b->size - len + n;
    free(b->data);
    b->data = grown;
}

/* The JSON scalars of a manifest (numbers, strings, literals), found by
 * a scanner that is just good enough for the generator's output. */
typedef struct token {
    size_t at, len;
    bool is_key;
} token;

static size_t scan(const blob *m, token *tokens, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < m->size && n < max;) {
        unsigned char ch = m->data[i];
        if (ch == '"') {
            size_t j = i + 1;
            while (j < m->size && m->data[j] != '"')
                j += m->data[j] == '\\' ? 2 : 1;
            size_t k = j + 1;
            while (k < m->size && (m->data[k] == ' ' || m->data[k] == '\n'))
                k++;
            tokens[n++] = (token){i, j + 1 - i, k < m->size && m->data[k] == ':'};
            i = j + 1;
        } else if (ch == '-' || (ch >= '0' && ch <= '9') || ch == 't' || ch == 'f' ||
                   ch == 'n') {
            size_t j = i;
            while (j < m->size && strchr("-+.eE0123456789truefalsn", m->data[j]))
                j++;
            tokens[n++] = (token){i, j - i, false};
            i = j;
        } else {
            i++;
        }
    }
    return n;
}

/* Rewrites the manifest's sha256 of tensor t to match its (mutated) file,
 * so the change reaches the operator or the comparator. */
static void fix_sha(blob *m, const char *dir, const base_case *b, size_t t)
{
    char path[1024], hex[GOLDEN_SHA256_HEX], quoted[80];
    snprintf(path, sizeof path, "%s/%s", dir, b->files[t]);
    blob f = slurp(path);
    golden_sha256_hex(f.data, f.size, hex);
    free(f.data);
    /* The key as a tensors entry: "probs" alone also starts
     * "probs_values" in the recipe. */
    snprintf(quoted, sizeof quoted, "\"%s\": {", b->keys[t]);
    unsigned char *key = memmem(m->data, m->size, quoted, strlen(quoted));
    unsigned char *sha = key ? memmem(key, m->size - (size_t)(key - m->data), "\"sha256\": \"", 11)
                             : NULL;
    if (sha && (size_t)(sha - m->data) + 11 + 64 <= m->size)
        memcpy(sha + 11, hex, 64);
}

static const char *const odd_values[] = {
    "-1", "0", "1", "-0", "1.5", "1e400", "-1e400", "18446744073709551615",
    "18446744073709551616", "9223372036854775807", "9223372036854775808", "4294967296",
    "2147483648", "2147483647", "1099511627776", "1099511627777", "\"64\"", "null", "true",
    "[]", "{}", "[1, 2]", "\"\"", "\"bf16\"", "\"float32\"", "\"int32\"", "\"../x.bin\"",
    "\"/dev/zero\"", "\"case.json\"", "\"\\u0000\"", "NaN", "Infinity", "0x10", "01"};

/* One mutation of the case in dir, a copy of base; returns a short
 * description. */
static const char *mutate(const base_case *base, const char *dir, uint64_t seed)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/case.json", dir);
    blob m = slurp(path);
    token tokens[512];
    size_t count = scan(&m, tokens, 512);
    uint64_t s = seed;
    int kind = (int)(next(&s) % 14);
    const char *what = "?";
    size_t t = (size_t)(next(&s) % base->count);
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/%s", dir, base->files[t]);

    switch (kind) {
    case 0: /* truncated manifest */
        m.size = next(&s) % (m.size + 1);
        what = "truncated manifest";
        break;
    case 1: { /* a value replaced by an odd one */
        size_t i;
        do
            i = next(&s) % count;
        while (tokens[i].is_key && count > 1 && next(&s) % 4);
        const char *v = odd_values[next(&s) % (sizeof odd_values / sizeof odd_values[0])];
        replace_bytes(&m, tokens[i].at, tokens[i].len, v, strlen(v));
        what = "odd value";
        break;
    }
    case 2: { /* NUL bytes */
        int n = 1 + (int)(next(&s) % 3);
        for (int i = 0; i < n; i++)
            replace_bytes(&m, next(&s) % (m.size + 1), 0, "", 1);
        what = "NUL in manifest";
        break;
    }
    case 3: { /* a key renamed: deleted, as far as the reader knows */
        size_t keys[512], nk = 0;
        for (size_t i = 0; i < count; i++)
            if (tokens[i].is_key)
                keys[nk++] = i;
        if (nk) {
            token k = tokens[keys[next(&s) % nk]];
            replace_bytes(&m, k.at, k.len, "\"deleted\"", 9);
        }
        what = "deleted key";
        break;
    }
    case 4: /* flipped bytes */
        for (int i = 0, n = 1 + (int)(next(&s) % 4); i < n && m.size; i++)
            m.data[next(&s) % m.size] ^= (unsigned char)(1u << (next(&s) % 8));
        what = "flipped manifest bytes";
        break;
    case 5: { /* a second object or garbage after the first */
        const char *tail = next(&s) % 2 ? "{}" : "\xff\xfe garbage";
        replace_bytes(&m, m.size, 0, tail, strlen(tail));
        what = "trailing data";
        break;
    }
    case 6: { /* truncated tensor file */
        blob b = slurp(tpath);
        b.size = next(&s) % (b.size + 1);
        spit(tpath, &b);
        free(b.data);
        if (next(&s) % 2)
            fix_sha(&m, dir, base, t);
        what = "truncated tensor";
        break;
    }
    case 7: { /* extended tensor file */
        blob b = slurp(tpath);
        size_t extra = 1 + next(&s) % 64;
        unsigned char pad[64] = {0};
        replace_bytes(&b, b.size, 0, pad, extra);
        spit(tpath, &b);
        free(b.data);
        if (next(&s) % 2)
            fix_sha(&m, dir, base, t);
        what = "extended tensor";
        break;
    }
    case 8: { /* bit flips in a tensor, sha256 kept or made to match */
        blob b = slurp(tpath);
        for (int i = 0, n = 1 + (int)(next(&s) % 4); i < n && b.size; i++)
            b.data[next(&s) % b.size] ^= (unsigned char)(1u << (next(&s) % 8));
        spit(tpath, &b);
        free(b.data);
        if (next(&s) % 4)
            fix_sha(&m, dir, base, t);
        what = "flipped tensor bits";
        break;
    }
    case 9: { /* an index out of range, negative or repeated, sha256 matching */
        snprintf(tpath, sizeof tpath, "%s/%s", dir, base->files[base->indices]);
        blob b = slurp(tpath);
        size_t n = b.size / 4;
        if (n) {
            static const int32_t bad[] = {-1, INT32_MIN, INT32_MAX, 1 << 20};
            int32_t v;
            size_t i = next(&s) % n;
            if (next(&s) % 2 && n > 1)
                memcpy(&v, b.data + 4 * ((i + 1) % n), 4);
            else
                v = bad[next(&s) % 4];
            memcpy(b.data + 4 * i, &v, 4);
        }
        spit(tpath, &b);
        free(b.data);
        fix_sha(&m, dir, base, base->indices);
        what = "bad index";
        break;
    }
    case 10: /* a tensor file missing */
        unlink(tpath);
        what = "missing tensor";
        break;
    case 11: /* a tensor that is a directory, or a link to an endless file */
        unlink(tpath);
        if (next(&s) % 2) {
            mkdir(tpath, 0700);
            what = "tensor is a directory";
        } else {
            if (symlink("/dev/zero", tpath) != 0)
                perror("symlink");
            what = "tensor links to /dev/zero";
        }
        break;
    case 12: /* an empty or missing manifest */
        m.size = 0;
        if (next(&s) % 2) {
            free(m.data);
            unlink(path);
            return "missing manifest";
        }
        what = "empty manifest";
        break;
    default: { /* a dtype swapped for another known one */
        static const char *const names[] = {"\"bf16\"",  "\"float16\"", "\"float32\"",
                                            "\"int32\"", "\"int64\"",   "\"int8\"",
                                            "\"float64\""};
        enum { NAMES = sizeof names / sizeof names[0] };
        for (size_t i = 0; i < count; i++) {
            for (int d = 0; d < NAMES; d++) {
                if (tokens[i].len == strlen(names[d]) &&
                    memcmp(m.data + tokens[i].at, names[d], tokens[i].len) == 0 &&
                    next(&s) % 3 == 0) {
                    const char *v = names[next(&s) % NAMES];
                    replace_bytes(&m, tokens[i].at, tokens[i].len, v, strlen(v));
                    count = scan(&m, tokens, 512);
                    break;
                }
            }
        }
        what = "swapped dtype";
        break;
    }
    }
    spit(path, &m);
    free(m.data);
    return what;
}

/* Runs argv with stdout and stderr to log_path and a 60 s alarm; returns
 * the wait status. */
static int run(char *const argv[], const char *log_path)
{
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (log < 0)
            _exit(126);
        dup2(log, STDOUT_FILENO);
        dup2(log, STDERR_FILENO);
        /* A hang is a failure too: SIGALRM ends it as a signal. */
        alarm(60);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            perror("waitpid");
            exit(2);
        }
    return status;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cli_mutations MOEPERM [COUNT [FIRST_SEED]]\n");
        return 2;
    }
    char *moeperm = argv[1];
    long count = argc > 2 ? atol(argv[2]) : 400;
    uint64_t first = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;

    char work[] = "/tmp/moeperm-mutations-XXXXXX";
    if (!mkdtemp(work)) {
        perror("mkdtemp");
        return 2;
    }
    char cmd[4096], err_path[600];
    snprintf(err_path, sizeof err_path, "%s/stderr", work);
    char case_dir[600], out_path[600];
    snprintf(case_dir, sizeof case_dir, "%s/m", work);
    snprintf(out_path, sizeof out_path, "%s/out", work);
    int failures = 0;
    /* Small and with dropped rows, so mutations reach every branch; probs
     * of another dtype than the tokens, so a swapped dtype can hit either. */
    static const char *const ops[] = {"permute-grad", "permute", "unpermute", "unpermute-grad"};
    enum { OPS = sizeof ops / sizeof ops[0] };
    static base_case bases[OPS];
    for (size_t o = 0; o < OPS; o++) {
        base_case *b = &bases[o];
        char name[32], err[1024];
        snprintf(name, sizeof name, "base-%s", ops[o]);
        snprintf(b->dir, sizeof b->dir, "%s/%s", work, name);
        snprintf(b->good_out, sizeof b->good_out, "%s/good-%s", work, ops[o]);
        char *gen[24] = {moeperm, "golden", "--out", work, "--op", (char *)ops[o], "--tokens",
                         "6", "--topk", "3", "--hidden", "5", "--dtype", "bf16", "--name", name,
                         o == 1 ? "--num-out-tokens" : "--rows", o == 1 ? "-2" : "16"};
        if (o >= 2) {
            gen[18] = "--probs-dtype";
            gen[19] = "float32";
        }
        if (run(gen, err_path) != 0) {
            fprintf(stderr, "cannot generate the %s case\n", ops[o]);
            return 2;
        }
        char *good[] = {moeperm, "run", b->dir, "--out", b->good_out, NULL};
        if (run(good, err_path) != 0) {
            fprintf(stderr, "the %s case does not run\n", ops[o]);
            return 2;
        }
        moeperm_golden_case c;
        if (moeperm_golden_case_read(b->dir, MOEPERM_GOLDEN_LOAD_NONE, &c, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        b->count = c.tensor_count;
        for (size_t i = 0; i < c.tensor_count; i++) {
            snprintf(b->files[i], sizeof b->files[i], "%s", c.tensors[i].file);
            snprintf(b->keys[i], sizeof b->keys[i], "%s", c.tensors[i].name);
            if (c.tensors[i].role == MOEPERM_GOLDEN_ROLE_INPUT && c.tensors[i].dtype == MOEPERM_INT32)
                b->indices = i;
        }
        moeperm_golden_case_free(&c);
    }

    int by_status[5] = {0};
    /* How many mutations of each kind ran (docs/reliability.md). */
    const char *kinds[24];
    long kind_counts[24] = {0};
    size_t nkinds = 0;
    for (long i = 0; i < count; i++) {
        uint64_t seed = first + (uint64_t)i;
        const base_case *b = &bases[seed % OPS];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' && cp -r '%s' '%s'", case_dir, out_path,
                 b->dir, case_dir);
        if (system(cmd) != 0)
            return 2;
        const char *what = mutate(b, case_dir, seed);
        size_t k = 0;
        while (k < nkinds && strcmp(kinds[k], what) != 0)
            k++;
        if (k == nkinds && nkinds < sizeof kinds / sizeof kinds[0])
            kinds[nkinds++] = what;
        if (k < nkinds)
            kind_counts[k]++;
        char *runs[3][8] = {
            {moeperm, "run", case_dir, "--out", out_path, NULL},
            {moeperm, "check", case_dir, NULL},
            {moeperm, "compare", case_dir, (char *)b->good_out, NULL},
        };
        for (int r = 0; r < 3; r++) {
            int status = run(runs[r], err_path);
            if (WIFSIGNALED(status)) {
                printf("FAIL seed %llu (%s): moeperm %s died of signal %d\n",
                       (unsigned long long)seed, what, runs[r][1], WTERMSIG(status));
                failures++;
                continue;
            }
            int code = WEXITSTATUS(status);
            if (code > 3) {
                printf("FAIL seed %llu (%s): moeperm %s exited %d\n", (unsigned long long)seed,
                       what, runs[r][1], code);
                failures++;
                continue;
            }
            by_status[code]++;
            /* A failure says why: on stderr, or for check and a compare
             * mismatch, in the report on stdout. */
            if (code != 0 && file_size(err_path) <= 0) {
                printf("FAIL seed %llu (%s): moeperm %s exited %d without a message\n",
                       (unsigned long long)seed, what, runs[r][1], code);
                failures++;
            }
            if (r == 0 && code != 0 && file_size(out_path) >= 0) {
                printf("FAIL seed %llu (%s): a failed run left %s\n", (unsigned long long)seed,
                       what, out_path);
                failures++;
            }
        }
    }
    /* One fixed mutation with a fixed answer: a valid manifest followed by
     * a NUL and more text is not a manifest (the text after a NUL was
     * once ignored, so the case was accepted). */
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r '%s' '%s' && printf '\\0{x' >> '%s/case.json'", case_dir,
             bases[0].dir, case_dir, case_dir);
    if (system(cmd) != 0)
        return 2;
    char *nul_run[] = {moeperm, "run", case_dir, "--out", out_path, NULL};
    int nul_status = run(nul_run, err_path);
    if (!WIFEXITED(nul_status) || WEXITSTATUS(nul_status) != 2) {
        printf("FAIL: a manifest with a NUL and trailing text was not refused with exit 2\n");
        failures++;
    }

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", work);
    for (size_t k = 0; k < nkinds; k++)
        printf("%s%s: %ld", k ? ", " : "mutations by kind: ", kinds[k], kind_counts[k]);
    printf("\n");
    printf("%ld mutations x 3 commands: %d exit 0, %d exit 1, %d exit 2, %d exit 3, "
           "%d failures\n",
           count, by_status[0], by_status[1], by_status[2], by_status[3], failures);
    /* All three statuses must occur, or the mutations stopped reaching
     * the reader's checks, the operator's checks and the comparator. */
    if (!failures && (by_status[0] == 0 || by_status[1] == 0 || by_status[2] == 0)) {
        printf("FAIL: the mutations no longer produce every outcome\n");
        failures++;
    }
    return failures ? 1 : 0;
}
