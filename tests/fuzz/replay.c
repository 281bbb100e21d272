/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput() over files, so
 * that the seed corpus and every input that once crashed stay regression
 * tests in the ordinary build (any compiler, no libFuzzer) and, under the
 * sanitizer build, with AddressSanitizer and UBSan watching.
 *
 * Arguments are files or directories (their regular files, in name order,
 * not recursive).  A target reports a failure by aborting, which fails the
 * test; the exit status is 0 when every input ran and 2 when one could not
 * be read or no input was found, so an emptied corpus cannot pass quietly.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return -1;
        }
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    /* An exactly sized copy, so AddressSanitizer sees a target reading past
     * the end of its input. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    size_t ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 2;
            ran++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            return 2;
        }
        char **names = NULL;
        size_t count = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char **grown = realloc(names, (count + 1) * sizeof *names);
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            char *path = malloc(len);
            if (!grown || !path)
                return 2;
            names = grown;
            snprintf(path, len, "%s/%s", argv[i], e->d_name);
            names[count++] = path;
        }
        closedir(d);
        qsort(names, count, sizeof *names, by_name);
        for (size_t j = 0; j < count; j++) {
            if (run_file(names[j]) != 0)
                return 2;
            ran++;
            free(names[j]);
        }
        free(names);
    }
    printf("replayed %zu inputs\n", ran);
    return ran ? 0 : 2;
}
