/*
 * cmd_run.c - `moeperm run CASE_DIR --out FILE`: computes a case's
 * input_grad on a backend and writes it as a raw .bin.  The file appears
 * only complete (temporary name + rename) and only on success, so a
 * failed run never leaves something that `compare` could mistake for an
 * output.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "cli.h"
#include "commands.h"
#include "golden/case.h"
#include "golden/fileio.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: moeperm run CASE_DIR --out FILE [--backend cpu|npu] [--device N]\n");
}

int cmd_run(int argc, char **argv)
{
    static const struct option options[] = {
        {"out", required_argument, NULL, 'o'},
        {"backend", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *backend_name = "cpu", *device_flag = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "o:b:d:h", options, NULL)) != -1) {
        switch (opt) {
        case 'o':
            out_path = optarg;
            break;
        case 'b':
            backend_name = optarg;
            break;
        case 'd':
            device_flag = optarg;
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
    }
    if (optind + 1 != argc || !out_path) {
        fprintf(stderr, "moeperm run: %s\n",
                optind >= argc ? "missing CASE_DIR"
                : optind + 1 < argc ? "takes exactly one CASE_DIR"
                                    : "missing --out FILE");
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    /* Everything that can be refused is refused before the case is
     * computed: a bad --out found after minutes of work wastes them, and an
     * --out naming the case's own files would destroy it. */
    if (!cli_output_path("run", "--out", out_path))
        return EXIT_BAD_INPUT;
    backend_options bopts;
    const backend_ops *ops = cli_backend("run", backend_name, device_flag, &bopts);
    if (!ops)
        return EXIT_BAD_INPUT;

    char err[1024] = "";
    golden_case c;
    if (golden_case_read(argv[optind], false, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm run: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    if (!cli_not_case_file("run", "--out", out_path, &c)) {
        golden_case_free(&c);
        return EXIT_BAD_INPUT;
    }
    size_t bytes = golden_output_bytes(&c);
    void *out = malloc(bytes ? bytes : 1);
    if (!out) {
        fprintf(stderr, "moeperm run: out of memory for %zu bytes of input_grad\n", bytes);
        golden_case_free(&c);
        return EXIT_BACKEND;
    }
    backend *b = NULL;
    int rc = ops->open(&bopts, &b, err, sizeof err);
    if (rc == BACKEND_OK)
        rc = ops->run_case(b, &c, out, err, sizeof err);
    if (b)
        ops->close(b);
    if (rc == BACKEND_OK && golden_write_file_atomic(out_path, out, bytes, err, sizeof err) != 0)
        rc = BACKEND_BAD_INPUT;
    if (rc != BACKEND_OK)
        fprintf(stderr, "moeperm run: %s: %s\n", argv[optind], err);
    free(out);
    golden_case_free(&c);
    return rc == BACKEND_OK ? EXIT_OK : rc == BACKEND_BAD_INPUT ? EXIT_BAD_INPUT : EXIT_BACKEND;
}
