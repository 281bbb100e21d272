/*
 * bench_diagnose - how long the judge takes to diagnose an output that
 * differs, as a harness meets it: a case, and the outputs a kernel wrote
 * (OUTDIR/<output>.bin or .npy).  Per output that differs, each repetition
 * times the diagnosis alone (golden_judge_diagnose(), what
 * moeperm_golden_judge() runs after its comparison) and, for scale, the
 * whole judgement without a diagnosis (the comparison, the statistics);
 * beside the wall-clock time, the CPU time of the process (all threads),
 * which a machine shared with other work disturbs less.
 * Prints the findings, then the median and range of each time.  Not a
 * test: meson builds it but never runs it; tests/bench/diagnose_bench.py
 * plants the bugs and runs it.
 *
 * usage: bench_diagnose CASE_DIR OUTDIR [reps]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <moeperm/golden.h>

#include "golden/judge/judge.h"

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_seconds(CLOCK_MONOTONIC);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const char *err)
{
    fprintf(stderr, "bench_diagnose: %s: %s\n", what, err);
    exit(1);
}

/* One judgement; returns its seconds. */
static double judge_once(const moeperm_golden_case *c, void **actual, bool diagnose,
                         moeperm_golden_judgement **out)
{
    char err[1024];
    moeperm_golden_judge_options options = {false, 0, diagnose};
    double start = now();
    if (moeperm_golden_judge(c, actual, &options, out, err, sizeof err) != 0)
        die("judge", err);
    return now() - start;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: bench_diagnose CASE_DIR OUTDIR [reps]\n");
        return 2;
    }
    int reps = argc == 4 ? atoi(argv[3]) : 3;
    if (reps < 1)
        reps = 1;
    char err[1024];
    moeperm_golden_case c;
    if (moeperm_golden_case_read(argv[1], MOEPERM_GOLDEN_LOAD_ALL, &c, err, sizeof err) != 0)
        die(argv[1], err);
    void *actual[MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    size_t outputs = 0;
    for (size_t i = 0; i < c.tensor_count; i++) {
        const moeperm_golden_tensor *t = &c.tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s.bin", argv[2], t->name);
        if (stat(path, &st) != 0)
            snprintf(path, sizeof path, "%s/%s.npy", argv[2], t->name);
        if (stat(path, &st) != 0) {
            /* not written: the golden output itself (nothing differs) */
            actual[outputs] = malloc(t->bytes ? t->bytes : 1);
            if (!actual[outputs])
                die(t->name, "out of memory");
            memcpy(actual[outputs], t->data, t->bytes);
        } else if (moeperm_golden_tensor_read_file(path, t, &actual[outputs], err, sizeof err) !=
                   0) {
            die(path, err);
        }
        outputs++;
    }
    double *plain = malloc((size_t)reps * sizeof *plain);
    double *diag = malloc((size_t)reps * sizeof *diag);
    double *cpu = malloc((size_t)reps * sizeof *cpu);
    if (!plain || !diag || !cpu)
        die("times", "out of memory");
    moeperm_golden_judgement *j = NULL;
    for (int r = 0; r < reps; r++) {
        moeperm_golden_judgement_free(j);
        plain[r] = judge_once(&c, actual, false, &j);
    }
    qsort(plain, (size_t)reps, sizeof *plain, compare_doubles);
    printf("judge without diagnosis: median %.3f s (%.3f-%.3f)\n", plain[reps / 2], plain[0],
           plain[reps - 1]);
    for (size_t i = 0, o = 0; i < c.tensor_count; i++) {
        const moeperm_golden_tensor *t = &c.tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        const moeperm_golden_compare_result *cr = moeperm_golden_judgement_output_compare(j, o);
        printf("%s: %llu of %llu elements differ\n", t->name, (unsigned long long)cr->differing,
               (unsigned long long)cr->elements);
        if (cr->differing == 0) {
            o++;
            continue;
        }
        golden_diagnosis d;
        for (int r = 0; r < reps; r++) {
            double start = now(), start_cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
            if (golden_judge_diagnose(&c, t, actual[o], false, &d, err, sizeof err) != 0)
                die("diagnose", err);
            diag[r] = now() - start;
            cpu[r] = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - start_cpu;
        }
        for (size_t k = 0; k < d.count; k++)
            printf("  %s%s: %s\n", d.finding[k].id, d.finding[k].exact ? " (exact)" : "",
                   d.finding[k].detail);
        qsort(diag, (size_t)reps, sizeof *diag, compare_doubles);
        qsort(cpu, (size_t)reps, sizeof *cpu, compare_doubles);
        printf("  diagnosis: median %.3f s (%.3f-%.3f), cpu %.3f s (%.3f-%.3f)\n",
               diag[reps / 2], diag[0], diag[reps - 1], cpu[reps / 2], cpu[0], cpu[reps - 1]);
        o++;
    }
    moeperm_golden_judgement_free(j);
    for (size_t i = 0; i < outputs; i++)
        free(actual[i]);
    free(plain);
    free(diag);
    free(cpu);
    moeperm_golden_case_free(&c);
    return 0;
}
