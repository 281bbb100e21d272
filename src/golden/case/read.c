/*
 * read.c - reading a golden case: its manifest (manifest.c), then the
 * tensor files it names, each checked for size and sha256, and finally the
 * operator's own first phase, so that nothing downstream (a backend, the
 * judge) ever sees a case that lies about itself.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <moeperm/golden.h>

#include "golden/case/manifest.h"
#include "golden/case/tensorfile.h"
#include "golden/common/fileio.h"
#include "golden/common/path.h"
#include "golden/common/text.h"

/* A manifest is a few hundred bytes; anything far larger is not one. */
#define MANIFEST_MAX_BYTES ((size_t)1 << 20)

/* Reads t's file (its path noted before) when load wants its role, and
 * checks its size and hash either way unless nothing is loaded at all: the
 * golden side of a case must be whole even when only the inputs are kept. */
static int load_tensor(int dirfd, const char *manifest, moeperm_golden_tensor *t, const char *sha,
                       unsigned load, char *err, size_t err_len)
{
    bool keep = (t->role == MOEPERM_GOLDEN_ROLE_INPUT && (load & MOEPERM_GOLDEN_LOAD_INPUTS)) ||
                (t->role != MOEPERM_GOLDEN_ROLE_INPUT && (load & MOEPERM_GOLDEN_LOAD_OUTPUTS));
    char hex[GOLDEN_SHA256_HEX], what[96], inner[768];
    void *data = NULL;
    snprintf(what, sizeof what, "tensors.%s", t->name);
    if (golden_tensor_file_read(dirfd, t->path, what, t, &data, hex, inner, sizeof inner) != 0) {
        snprintf(err, err_len, "%s: %s", manifest, inner);
        return -1;
    }
    if (strcasecmp(hex, sha) != 0) {
        free(data);
        snprintf(err, err_len, "%s: tensors.%s.sha256 is %s, but %s hashes to %s", manifest,
                 t->name, sha, t->file, hex);
        return -1;
    }
    if (keep)
        t->data = data;
    else
        free(data);
    return 0;
}

/* One read of the case in dir, its files opened through dirfd (fileio.h). */
static int read_once(int dirfd, const char *dir, unsigned load, moeperm_golden_case *c, char *err,
                     size_t err_len)
{
    memset(c, 0, sizeof *c);
    char *manifest = golden_join(dir, "case.json");
    char *text = NULL;
    char sha[MOEPERM_GOLDEN_MAX_TENSORS][GOLDEN_SHA256_HEX];
    if (!manifest) {
        snprintf(err, err_len, "out of memory reading %s", dir);
        return -1;
    }
    if (golden_read_text_at(dirfd, manifest, MANIFEST_MAX_BYTES, &text, err, err_len) != 0) {
        free(manifest);
        return -1;
    }
    int rc = golden_manifest_parse(manifest, text, c, sha, err, err_len);
    free(text);
    c->manifest_path = manifest;
    c->dir = golden_strdup_printf("%s", dir);
    if (rc == 0 && !c->dir) {
        snprintf(err, err_len, "out of memory reading %s", dir);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < c->tensor_count; i++) {
        c->tensors[i].path = golden_join(dir, c->tensors[i].file);
        if (!c->tensors[i].path) {
            snprintf(err, err_len, "out of memory reading %s", dir);
            rc = -1;
        }
    }
    for (size_t i = 0; rc == 0 && load != MOEPERM_GOLDEN_LOAD_NONE && i < c->tensor_count; i++)
        rc = load_tensor(dirfd, manifest, &c->tensors[i], sha[i], load, err, err_len);
    /* The operator's own checks need the inputs (indices are checked for
     * range and uniqueness); without them only the manifest was asked for. */
    if (rc == 0 && (load & MOEPERM_GOLDEN_LOAD_INPUTS)) {
        char inner[768];
        moeperm_status st = moeperm_golden_check_reference(c, inner, sizeof inner);
        if (st != MOEPERM_SUCCESS) {
            snprintf(err, err_len, "%s: the operator refuses the case (%s): %s", manifest,
                     moeperm_status_name(st), inner);
            rc = -1;
        }
    }
    if (rc != 0)
        moeperm_golden_case_free(c);
    return rc;
}

/* How many times a read that failed while the case was replaced is tried
 * again: each try reads one whole case, so only a replacement finishing
 * during every one of them exhausts it. */
#define READ_TRIES 16

int moeperm_golden_case_read(const char *dir, unsigned load, moeperm_golden_case *c, char *err,
                             size_t err_len)
{
    memset(c, 0, sizeof *c);
    /* "" would become "/case.json": a case at the root that nobody named. */
    if (dir[0] == '\0') {
        snprintf(err, err_len, "the case directory is an empty string; name a directory "
                               "holding case.json");
        return -1;
    }
    /*
     * Every file is opened through one handle on the directory, opened
     * first: a writer replacing the case swaps the directory's name with a
     * new one (renameat2 RENAME_EXCHANGE), so the handle keeps pointing at
     * one whole case, and the manifest of one case is never read with the
     * tensors of another.  The writer then removes the old case's files,
     * so a read through the old handle can find one gone: when a read
     * fails and the name now holds another directory, it is read again.
     * Where no handle can be had (a directory that is missing or cannot
     * be opened), the files are opened by name and say what is wrong.
     */
    for (int attempt = 1;; attempt++) {
        int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int rc = read_once(dirfd >= 0 ? dirfd : AT_FDCWD, dir, load, c, err, err_len);
        struct stat held, now;
        bool swapped = rc != 0 && dirfd >= 0 && attempt < READ_TRIES &&
                       fstat(dirfd, &held) == 0 && stat(dir, &now) == 0 &&
                       (held.st_dev != now.st_dev || held.st_ino != now.st_ino);
        if (dirfd >= 0)
            close(dirfd);
        if (!swapped)
            return rc;
    }
}
