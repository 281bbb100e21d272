/*
 * cmd_run.c - `moeperm run CASE_DIR --out PATH`: computes a case's outputs
 * on a backend and writes them: to the file PATH when the case has one
 * output, else as PATH/<output>.bin.  Files appear only complete
 * (temporary name + rename) and only on success, so a failed run never
 * leaves something that `compare` could mistake for an output.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "cli.h"
#include "commands.h"
#include "outputs.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: moeperm run CASE_DIR --out PATH [--backend cpu|npu] [--device N]\n"
                "  compute the case's outputs on a backend (default cpu) and write them:\n"
                "  to the file PATH when the case has one output (PATH ending in .npy\n"
                "  writes numpy's format), else, or when PATH ends with /, as\n"
                "  PATH/<output>.bin in the directory PATH\n"
                "  --device N  the npu device (default: MOEPERM_NPU_DEVICE, else 0)\n");
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
    backend_options bopts;
    const backend_ops *ops = cli_backend("run", backend_name, device_flag, &bopts);
    if (!ops)
        return EXIT_BAD_INPUT;

    char err[1024] = "";
    moeperm_golden_case c;
    if (moeperm_golden_case_read(argv[optind], MOEPERM_GOLDEN_LOAD_INPUTS, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm run: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    case_outputs outputs;
    if (case_outputs_alloc(&c, &outputs, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm run: %s\n", err);
        moeperm_golden_case_free(&c);
        return EXIT_BACKEND;
    }
    /* Several outputs go into a directory; one output to the file named.
     * Every path is refused now if it can be, before the case is computed:
     * a bad --out found after minutes of work wastes them, and one naming
     * the case's own files would destroy it. */
    size_t len = strlen(out_path);
    bool dir = outputs.count > 1 || (len > 0 && out_path[len - 1] == '/');
    char *paths[MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    int rc = BACKEND_OK;
    for (size_t i = 0; i < outputs.count && rc == BACKEND_OK; i++) {
        paths[i] = case_output_path(&outputs, i, out_path, dir);
        if (!paths[i]) {
            snprintf(err, sizeof err, "out of memory");
            rc = BACKEND_FAILURE;
        } else if ((dir && i == 0 && !cli_output_dir("run", "--out", out_path)) ||
                   !cli_output_path("run", "--out", paths[i], &argv[optind], 1)) {
            free(paths[i]);
            paths[i] = NULL;
            for (size_t j = 0; j < i; j++)
                free(paths[j]);
            case_outputs_free(&outputs);
            moeperm_golden_case_free(&c);
            return EXIT_BAD_INPUT;
        }
    }
    backend *b = NULL;
    backend_problem problem;
    case_problem(&c, &outputs, &problem);
    if (rc == BACKEND_OK)
        rc = ops->open(&bopts, &b, err, sizeof err);
    if (rc == BACKEND_OK)
        rc = ops->run(b, &problem, err, sizeof err);
    if (b)
        ops->close(b);
    for (size_t i = 0; i < outputs.count && rc == BACKEND_OK; i++)
        if (moeperm_golden_tensor_write_file(paths[i], outputs.like[i], outputs.data[i], err,
                                     sizeof err) != 0)
            rc = BACKEND_BAD_INPUT;
    if (rc != BACKEND_OK)
        fprintf(stderr, "moeperm run: %s: %s\n", argv[optind], err);
    for (size_t i = 0; i < outputs.count; i++)
        free(paths[i]);
    case_outputs_free(&outputs);
    moeperm_golden_case_free(&c);
    return rc == BACKEND_OK ? EXIT_OK : rc == BACKEND_BAD_INPUT ? EXIT_BAD_INPUT : EXIT_BACKEND;
}
