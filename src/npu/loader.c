/*
 * loader.c - dlopen the Ascend runtime and look up the functions the npu
 * backend needs (loader.h says why it is done at run time).
 *
 * A symbol is taken from the first loaded library that has it, so the
 * order of loading is the order of preference: with MOEPERM_ASCEND_LIBS a
 * custom package listed before the stock operator library wins.
 */
#include "loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The runtime first, then tensors, then every layout of the operator
 * libraries (docs/npu.md): missing ones are simply skipped. */
static const char *const default_libs[] = {
    "libascendcl.so",   "libnnopbase.so",   "libopapi.so",
    "libopapi_transformer.so", "libopapi_math.so", "libopapi_nn.so",
};
#define NUM_DEFAULT_LIBS (sizeof default_libs / sizeof default_libs[0])

static const struct {
    const char *name;
    size_t offset;
    bool required;
} symbols[] = {
#define SYM(name, required) {#name, offsetof(acl_api, name), required}
    SYM(aclInit, true),
    SYM(aclFinalize, true),
    SYM(aclrtSetDevice, true),
    SYM(aclrtResetDevice, true),
    SYM(aclrtCreateStream, true),
    SYM(aclrtDestroyStream, true),
    SYM(aclrtSynchronizeStream, true),
    SYM(aclrtMalloc, true),
    SYM(aclrtFree, true),
    SYM(aclrtMemcpy, true),
    SYM(aclCreateTensor, true),
    SYM(aclDestroyTensor, true),
    SYM(aclnnMoeTokenPermuteGradGetWorkspaceSize, true),
    SYM(aclnnMoeTokenPermuteGrad, true),
    SYM(aclGetRecentErrMsg, false),
    SYM(aclrtGetSocName, false),
    SYM(aclCreateIntArray, false),
    SYM(aclDestroyIntArray, false),
    SYM(aclnnMoeTokenPermuteGetWorkspaceSize, false),
    SYM(aclnnMoeTokenPermute, false),
    SYM(aclnnMoeTokenUnpermuteGetWorkspaceSize, false),
    SYM(aclnnMoeTokenUnpermute, false),
    SYM(aclnnMoeTokenUnpermuteGradGetWorkspaceSize, false),
    SYM(aclnnMoeTokenUnpermuteGrad, false),
#undef SYM
};

/* The table is filled by copying dlsym()'s void * into function pointers. */
_Static_assert(sizeof(aclInit_fn) == sizeof(void *), "function and data pointers differ in size");

/* A bounded string builder: messages are cut, never overflow. */
typedef struct text {
    char *buf;
    size_t len, cap;
} text;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void text_add(text *t, const char *fmt, ...)
{
    if (t->cap == 0 || t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = (size_t)n >= t->cap - t->len ? t->cap - 1 : t->len + (size_t)n;
}

/* Load state shared by the two search modes. */
typedef struct load_state {
    acl_api *api;
    text loaded;   /* "path, path" of what was opened, for messages */
    text failures; /* files that exist but did not load, with dlerror() */
} load_state;

/* Opens path and appends its handle.  Returns NULL, or why it failed.
 *
 * RTLD_GLOBAL and lazy binding make the libraries behave as they would had
 * the program been linked against them: whatever CANN opens later by
 * itself sees the runtime already opened here. */
static const char *try_open(load_state *s, const char *path)
{
    if (s->api->num_handles == ACL_MAX_LIBS)
        return "too many libraries";
    void *h = dlopen(path, RTLD_LAZY | RTLD_GLOBAL);
    if (h == NULL) {
        const char *why = dlerror();
        return why != NULL ? why : "dlopen failed";
    }
    s->api->handles[s->api->num_handles++] = h;
    text_add(&s->loaded, "%s%s", s->loaded.len ? ", " : "", path);
    return NULL;
}

/* A long path in a message keeps its tail, where the library's name is. */
static const char *tail_of(const char *path)
{
    size_t n = strlen(path);
    return n > 120 ? path + n - 117 : path;
}

static int load_listed(load_state *s, const char *list, text *err)
{
    char *copy = strdup(list);
    if (copy == NULL) {
        text_add(err, "out of memory reading MOEPERM_ASCEND_LIBS");
        return -1;
    }
    size_t count = 0;
    for (const char *p = list; *p; p++)
        if (*p != ':' && (p == list || p[-1] == ':'))
            count++;
    if (count > ACL_MAX_LIBS) {
        text_add(err, "MOEPERM_ASCEND_LIBS lists %zu libraries; moeperm loads at most %d "
                 "(docs/npu.md)", count, ACL_MAX_LIBS);
        free(copy);
        return -1;
    }
    bool missing = false;
    char *save = NULL;
    for (char *p = strtok_r(copy, ":", &save); p != NULL; p = strtok_r(NULL, ":", &save)) {
        const char *why = try_open(s, p);
        if (why == NULL)
            continue;
        /* A listed library is a promise: one that does not load is an
         * error even when the others would be enough, so that a typo can
         * never let the stock kernel stand in for a custom one.  The
         * reasons come first and the list last, so that a long list is
         * what a short buffer cuts, not the reason; dlerror() repeats the
         * path, which is dropped from its text. */
        size_t n = strlen(p);
        if (strncmp(why, p, n) == 0 && strncmp(why + n, ": ", 2) == 0)
            why += n + 2;
        char shown[128];
        snprintf(shown, sizeof shown, "%s%s", tail_of(p) == p ? "" : "...", tail_of(p));
        text_add(err, "%s%s (%s)",
                 missing ? "; cannot load " : "no Ascend runtime found: cannot load ", shown, why);
        missing = true;
    }
    free(copy);
    if (missing) {
        text_add(err, "; MOEPERM_ASCEND_LIBS=%s", list);
        return -1;
    }
    if (s->api->num_handles == 0) {
        text_add(err, "no Ascend runtime found; looked in: MOEPERM_ASCEND_LIBS=%s names no library",
                 list);
        return -1;
    }
    return 0;
}

static int load_default(load_state *s, text *err)
{
    static const char *const vars[] = {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"};
    char dirs[2][4096] = {"", ""}; /* "" where the variable is unset */
    for (size_t i = 0; i < 2; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0')
            snprintf(dirs[i], sizeof dirs[i], "%s/lib64", v);
    }
    for (size_t l = 0; l < NUM_DEFAULT_LIBS; l++) {
        bool found = false;
        for (size_t d = 0; d < 2 && !found; d++) {
            if (dirs[d][0] == '\0')
                continue;
            char path[4200];
            if (snprintf(path, sizeof path, "%s/%s", dirs[d], default_libs[l]) >=
                (int)sizeof path)
                continue; /* no such path can exist */
            const char *why = try_open(s, path);
            found = why == NULL;
            /* A file that is there but does not load (a missing dependency,
             * another architecture) is worth telling; an absent one is not. */
            if (!found && access(path, F_OK) == 0)
                text_add(&s->failures, "; %s did not load: %s", path, why);
        }
        /* On the loader path, failure mostly means "not there": silent. */
        if (!found)
            try_open(s, default_libs[l]);
    }
    if (s->api->num_handles > 0)
        return 0;
    text_add(err, "no Ascend runtime found; looked in:");
    for (size_t i = 0; i < 2; i++) {
        if (dirs[i][0] != '\0')
            text_add(err, " $%s/lib64 = %s,", vars[i], dirs[i]);
        else
            text_add(err, " $%s/lib64 (unset),", vars[i]);
    }
    text_add(err, " the loader path (LD_LIBRARY_PATH, ld.so.cache) for libascendcl.so,"
                  " libnnopbase.so, libopapi*.so; source the CANN set_env.sh or set"
                  " MOEPERM_ASCEND_LIBS");
    return -1;
}

int acl_load(acl_api *api, char *err, size_t err_len)
{
    memset(api, 0, sizeof *api);
    char loaded[1024] = "", failures[2048] = "";
    load_state s = {api, {loaded, 0, sizeof loaded}, {failures, 0, sizeof failures}};
    text e = {err, 0, err_len};
    if (err_len > 0)
        err[0] = '\0';

    /* Empty counts as unset, as `export MOEPERM_ASCEND_LIBS=` is how a
     * shell user clears it. */
    const char *list = getenv("MOEPERM_ASCEND_LIBS");
    int rc = list != NULL && *list != '\0' ? load_listed(&s, list, &e) : load_default(&s, &e);
    if (rc == 0) {
        for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
            void *sym = NULL;
            for (size_t h = 0; h < api->num_handles && sym == NULL; h++)
                sym = dlsym(api->handles[h], symbols[i].name);
            if (sym == NULL && symbols[i].required) {
                text_add(&e, "the Ascend runtime has no %s (looked in %s)", symbols[i].name,
                         loaded);
                rc = -1;
                break;
            }
            /* POSIX guarantees a data pointer from dlsym converts to a
             * function pointer; memcpy says so without a cast ISO C frowns
             * on. */
            memcpy((char *)api + symbols[i].offset, &sym, sizeof sym);
        }
    }
    if (rc != 0) {
        text_add(&e, "%s", failures);
        acl_unload(api);
    }
    return rc;
}

void acl_unload(acl_api *api)
{
    /* In reverse, so no library goes before one that was loaded on it. */
    while (api->num_handles > 0)
        dlclose(api->handles[--api->num_handles]);
    memset(api, 0, sizeof *api);
}
