/*
 * discover.c - every case below a directory, in a deterministic order:
 * the walk follows links, enters each directory once, and reports any
 * directory it cannot read instead of skipping it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <moeperm/golden.h>

#include "golden/common/path.h"
#include "golden/common/text.h"

/* ---------------------------------------------------------------------- */
/* Discovery                                                              */
/* ---------------------------------------------------------------------- */

typedef struct path_list {
    char **items;
    size_t count, capacity;
} path_list;

static int list_add(path_list *l, char *s)
{
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? 2 * l->capacity : 64;
        char **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown)
            return -1;
        l->items = grown;
        l->capacity = cap;
    }
    l->items[l->count++] = s;
    return 0;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directories the walk has entered, by (st_dev, st_ino): symbolic links
 * are followed, so a link back up the tree would loop forever and two links
 * to one directory would list its cases twice.  An open-addressing hash set,
 * as a corpus can hold many thousands of directories. */
typedef struct dir_id {
    dev_t dev;
    ino_t ino;
    bool used;
} dir_id;

typedef struct dir_set {
    dir_id *slots;
    size_t count, capacity; /* capacity a power of two, at most half full */
} dir_set;

static size_t dir_slot(const dir_set *set, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 32 | (uint64_t)dev >> 32)) *
                 UINT64_C(0x9E3779B97F4A7C15);
    size_t i = (size_t)(h >> 32) & (set->capacity - 1);
    while (set->slots[i].used && !(set->slots[i].dev == dev && set->slots[i].ino == ino))
        i = (i + 1) & (set->capacity - 1);
    return i;
}

/* Adds the directory st describes: 1 if it is new, 0 if the walk has been
 * there already, -1 when memory runs out. */
static int dir_set_add(dir_set *set, const struct stat *st)
{
    if (2 * (set->count + 1) > set->capacity) {
        dir_set grown = {NULL, 0, set->capacity ? 2 * set->capacity : 64};
        grown.slots = calloc(grown.capacity, sizeof *grown.slots);
        if (!grown.slots)
            return -1;
        for (size_t i = 0; i < set->capacity; i++)
            if (set->slots[i].used)
                grown.slots[dir_slot(&grown, set->slots[i].dev, set->slots[i].ino)] =
                    set->slots[i];
        grown.count = set->count;
        free(set->slots);
        *set = grown;
    }
    size_t i = dir_slot(set, st->st_dev, st->st_ino);
    if (set->slots[i].used)
        return 0;
    set->slots[i] = (dir_id){st->st_dev, st->st_ino, true};
    set->count++;
    return 1;
}

/* A path for a message: long ones (a tree deeper than PATH_MAX) keep
 * their head and tail, so the sentence still fits and ends with its
 * reason. */
static const char *short_path(const char *path, char *buf, size_t size)
{
    size_t n = strlen(path);
    if (n <= 400)
        return path;
    snprintf(buf, size, "%.150s...%s (%zu bytes)", path, path + n - 200, n);
    return buf;
}

/* walk()'s refusal: the path and the system's reason, so that a directory
 * the walk cannot see into fails the command instead of dropping its
 * cases. */
static int walk_error(const char *what, const char *path, int error, char *err, size_t err_len)
{
    char buf[400];
    snprintf(err, err_len, "%s %s: %s; a case there would be missed", what,
             short_path(path, buf, sizeof buf), strerror(error));
    return -1;
}

/* A dot-entry ".NAME.old.XXXXXX" holding a case, in a directory without
 * NAME, is a case that an interrupted replacement left parked (only where
 * the file system cannot exchange two names): not a case to skip
 * silently.  Returns 0, or -1 with a sentence in err. */
static int check_parked(const char *dir, const char *entry, char *err, size_t err_len)
{
    size_t n = strlen(entry);
    const size_t suffix = strlen(".old.XXXXXX");
    if (n <= 1 + suffix || strncmp(entry + n - suffix, ".old.", 5) != 0)
        return 0;
    char *parked = golden_join(dir, entry);
    char *manifest = parked ? golden_join(parked, "case.json") : NULL;
    char *name = golden_strdup_printf("%.*s", (int)(n - 1 - suffix), entry + 1);
    char *target = name ? golden_join(dir, name) : NULL;
    struct stat st;
    int rc = 0;
    if (!target || !manifest) {
        snprintf(err, err_len, "out of memory listing %s", dir);
        rc = -1;
    } else if (lstat(manifest, &st) == 0 && lstat(target, &st) != 0 && errno == ENOENT) {
        snprintf(err, err_len, "%s is missing: an interrupted replacement left the case that was "
                 "there at %s (move it back with mv, or remove it)", target, parked);
        rc = -1;
    }
    free(target);
    free(name);
    free(manifest);
    free(parked);
    return rc;
}

/* dir_st is stat() of dir (links followed); inside is the case directory
 * dir lies in, NULL when none does. */
static int walk(const char *dir, const struct stat *dir_st, const char *inside, dir_set *seen,
                path_list *out, char *err, size_t err_len)
{
    struct stat st;
    int added = dir_set_add(seen, dir_st);
    if (added < 0)
        goto oom;
    if (added == 0)
        return 0; /* a loop, or a second name for a directory already listed */

    char *manifest = golden_join(dir, "case.json");
    if (!manifest)
        goto oom;
    /* Anything named case.json makes a case, even a dangling link or a
     * directory: the reader then says what is wrong with it, where
     * skipping it would drop the case without a word. */
    int found = stat(manifest, &st) == 0 || (errno == ENOENT && lstat(manifest, &st) == 0);
    int error = errno;
    free(manifest);
    /* A case directory holds its own files only: a case written inside
     * another (--out naming a case) is refused by the writers, and one
     * found there is bad input, never judged and never skipped. */
    if (found && inside) {
        char a[400], b[400];
        snprintf(err, err_len, "%s holds a case inside the case %s; a case directory holds "
                 "only its own files (move the inner case out of it)", short_path(dir, a, sizeof a),
                 short_path(inside, b, sizeof b));
        return -1;
    }
    char *copy = NULL;
    if (found) {
        copy = golden_strdup_printf("%s", dir);
        if (!copy || list_add(out, copy) != 0) {
            free(copy);
            goto oom;
        }
    } else if (error != ENOENT) {
        return walk_error("cannot look for case.json in", dir, error, err, err_len);
    }
    if (!inside)
        inside = copy;

    DIR *d = opendir(dir);
    if (!d)
        return walk_error("cannot read directory", dir, errno, err, err_len);
    /* Children in byte order: which of two names for one directory is
     * listed must not depend on the file system's order. */
    path_list children = {0};
    struct dirent *e;
    int rc = 0;
    for (;;) {
        errno = 0;
        if ((e = readdir(d)) == NULL) {
            if (errno != 0)
                rc = walk_error("cannot read directory", dir, errno, err, err_len);
            break;
        }
        /* Dot-entries include the temporaries of an interrupted write. */
        if (e->d_name[0] == '.') {
            rc = check_parked(dir, e->d_name, err, err_len);
            if (rc != 0)
                break;
            continue;
        }
        char *child = golden_join(dir, e->d_name);
        if (!child || list_add(&children, child) != 0) {
            free(child);
            closedir(d);
            moeperm_golden_free_paths(children.items, children.count);
            goto oom;
        }
    }
    closedir(d);
    if (children.count > 1)
        qsort(children.items, children.count, sizeof *children.items, compare_paths);
    for (size_t i = 0; rc == 0 && i < children.count; i++) {
        /* stat, not lstat: a link to a directory of cases is followed.  A
         * dangling link, or an entry removed since it was listed, is no
         * directory; any other failure (EACCES, ELOOP, ENAMETOOLONG, EIO)
         * may hide cases, and fails the walk. */
        if (stat(children.items[i], &st) == 0) {
            if (S_ISDIR(st.st_mode))
                rc = walk(children.items[i], &st, inside, seen, out, err, err_len);
        } else if (errno != ENOENT) {
            rc = walk_error("cannot examine", children.items[i], errno, err, err_len);
        }
    }
    moeperm_golden_free_paths(children.items, children.count);
    return rc;
oom:
    snprintf(err, err_len, "out of memory listing %s", dir);
    return -1;
}

int moeperm_golden_find_cases(const char *root, char ***dirs, size_t *count, char *err, size_t err_len)
{
    path_list list = {0};
    dir_set seen = {0};
    struct stat st;
    *dirs = NULL;
    *count = 0;
    if (root[0] == '\0') {
        snprintf(err, err_len, "the directory to search is an empty string");
        return -1;
    }
    if (stat(root, &st) != 0) {
        snprintf(err, err_len, "%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s is not a directory", root);
        return -1;
    }
    /* Strip trailing slashes so paths print as "golden/x", not "golden//x". */
    char *clean = golden_strdup_printf("%s", root);
    if (!clean) {
        snprintf(err, err_len, "out of memory listing %s", root);
        return -1;
    }
    for (size_t n = strlen(clean); n > 1 && clean[n - 1] == '/'; n--)
        clean[n - 1] = '\0';
    int rc = walk(clean, &st, NULL, &seen, &list, err, err_len);
    free(clean);
    free(seen.slots);
    if (rc != 0) {
        moeperm_golden_free_paths(list.items, list.count);
        return -1;
    }
    /* No case found leaves items NULL, and qsort(NULL, 0, ...) is undefined. */
    if (list.count > 1)
        qsort(list.items, list.count, sizeof *list.items, compare_paths);
    *dirs = list.items;
    *count = list.count;
    return 0;
}

void moeperm_golden_free_paths(char **paths, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}
