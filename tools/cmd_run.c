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
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
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

    /* The output paths are checked from the manifest alone, before the
     * tensors are read: a bad --out must not wait for a large case to come
     * off the disk, nor hide behind a bad case.  Several outputs go into a
     * directory; one output to the file named.  A path naming the case's
     * own files would destroy it. */
    char err[1024] = "";
    moeperm_golden_case c;
    if (moeperm_golden_case_read(argv[optind], MOEPERM_GOLDEN_LOAD_NONE, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm run: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    case_outputs outputs;
    memset(&outputs, 0, sizeof outputs);
    for (size_t i = 0; i < c.tensor_count; i++)
        if (c.tensors[i].role == MOEPERM_GOLDEN_ROLE_OUTPUT)
            outputs.like[outputs.count++] = &c.tensors[i];
    size_t len = strlen(out_path);
    bool dir = outputs.count > 1 || (len > 0 && out_path[len - 1] == '/');
    char *paths[MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    size_t path_count = outputs.count;
    /* A directory made for the outputs goes again if the run fails: a
     * failed run leaves nothing. */
    char *made = NULL;
    int rc = BACKEND_OK;
    for (size_t i = 0; i < path_count; i++) {
        int got = case_output_path(&outputs, i, out_path, dir, &paths[i], err, sizeof err);
        if (got != 0 || (dir && i == 0 && !cli_output_dir("run", "--out", out_path, &made)) ||
            !cli_output_path("run", "--out", paths[i], &argv[optind], 1, NULL, 0)) {
            if (got != 0)
                fprintf(stderr, "moeperm run: %s\n", err);
            for (size_t j = 0; j <= i; j++)
                free(paths[j]);
            moeperm_golden_case_free(&c);
            cli_output_dir_undo(out_path, made);
            return got == -2 ? EXIT_BACKEND : EXIT_BAD_INPUT;
        }
    }
    /* Now the inputs.  The case is read again whole: if it was replaced
     * meanwhile, the paths checked must still be its outputs. */
    moeperm_golden_case named = c;
    memset(&c, 0, sizeof c);
    if (moeperm_golden_case_read(argv[optind], MOEPERM_GOLDEN_LOAD_INPUTS, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm run: %s\n", err);
        rc = BACKEND_BAD_INPUT;
    } else {
        bool same = c.op == named.op && c.tensor_count == named.tensor_count;
        for (size_t i = 0; same && i < c.tensor_count; i++)
            same = strcmp(c.tensors[i].name, named.tensors[i].name) == 0 &&
                   c.tensors[i].role == named.tensors[i].role;
        if (!same) {
            fprintf(stderr, "moeperm run: %s changed while it was read (another operator or "
                            "other outputs); run it again\n", argv[optind]);
            rc = BACKEND_BAD_INPUT;
        }
    }
    moeperm_golden_case_free(&named);
    if (rc == BACKEND_OK && case_outputs_alloc(&c, &outputs, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm run: %s\n", err);
        rc = BACKEND_FAILURE;
    }
    if (rc != BACKEND_OK) {
        for (size_t i = 0; i < path_count; i++)
            free(paths[i]);
        moeperm_golden_case_free(&c);
        cli_output_dir_undo(out_path, made);
        return rc == BACKEND_BAD_INPUT ? EXIT_BAD_INPUT : EXIT_BACKEND;
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
    if (rc != BACKEND_OK) {
        fprintf(stderr, "moeperm run: %s: %s\n", argv[optind], err);
        cli_output_dir_undo(out_path, made);
    } else {
        free(made);
    }
    for (size_t i = 0; i < outputs.count; i++)
        free(paths[i]);
    case_outputs_free(&outputs);
    moeperm_golden_case_free(&c);
    return rc == BACKEND_OK ? EXIT_OK : rc == BACKEND_BAD_INPUT ? EXIT_BAD_INPUT : EXIT_BACKEND;
}
