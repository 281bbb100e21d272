#!/bin/sh
# The layers point one way (README, "Layout"): each directory includes
# only the headers of the layers below it.  A forbidden include fails the
# test with the file and the line.
#   includes.sh SOURCE_ROOT
set -eu
root=$1
failures=0

# forbid DIR PATTERN WHY [FILES]: no #include line in DIR's C files (those
# named FILES, a glob, when given; the others, with FILES prefixed by !)
# matches PATTERN
forbid() {
    dir=$1 pattern=$2 why=$3 files=${4:-*.[ch]}
    case $files in
    !*) select="--include=*.c --include=*.h --exclude=${files#!}" ;; # the last match wins
    *) select="--include=$files" ;;
    esac
    set -f # $select is split into words, not expanded as globs
    # shellcheck disable=SC2086
    hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($pattern)" "$root/$dir" \
        $select || true)
    set +f
    if [ -n "$hits" ]; then
        echo "FAIL $dir: $why:" >&2
        echo "$hits" >&2
        failures=$((failures + 1))
    else
        echo "ok   $dir: $why"
    fi
}

# libmoeperm: libc, OpenMP and its own files; nothing of golden, backends, tools
forbid src/x86 'golden|backend|npu|json|openssl' "the kernels include nothing from the layers above" '!golden_rows_*'
# the golden generator's row loops, built there per instruction set, are
# libmoeperm-golden's: libmoeperm's public header and the generator's own
forbid src/x86 'core/|sum/|x86/[^g]|internal\.h|kernel\.h|fp\.h|backend|npu|json|openssl|golden/(case|judge)/' \
    "the generator's row loops use libmoeperm's public API only" 'golden_rows_*'

for f in "$root"/src/*.c "$root"/src/*.h; do
    [ -e "$f" ] || continue
    if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](golden|backend|npu|json-c|openssl|moeperm/golden)' "$f"; then
        echo "FAIL $f includes a layer above libmoeperm" >&2
        failures=$((failures + 1))
    fi
done
# backends: libmoeperm's public header and their own interface
forbid src/backend 'golden|moeperm/golden|json|openssl|internal\.h|kernel\.h|fp\.h' "backends know no golden data and no library internals"
forbid src/npu 'golden|moeperm/golden|json|openssl|internal\.h|kernel\.h|fp\.h' "the npu backend knows no golden data and no library internals"
# golden: libmoeperm's public header only (and its own files)
forbid src/golden '\.\./internal\.h|kernel\.h|fp\.h|backend|npu' "the golden library uses libmoeperm's public API only"
# golden's rooms: judge -> case -> common, generate -> case -> common
forbid src/golden/common 'golden/(case|generate|judge)/' "golden's common helpers know no case, generator or judge"
forbid src/golden/case 'golden/(generate|judge)/' "golden's case format knows neither the generator nor the judge"
forbid src/golden/generate 'golden/judge/' "golden's generator knows nothing of the judge"
forbid src/golden/judge 'golden/generate/' "golden's judge knows nothing of the generator"
for f in "$root"/src/golden/*.c "$root"/src/golden/*.h; do
    [ -e "$f" ] || continue
    echo "FAIL $f: every file of the golden library lives in one of its rooms" >&2
    failures=$((failures + 1))
done
# tools: public headers and the backend interface
forbid tools 'internal\.h|kernel\.h|fp\.h|golden/|npu/|x86/' "the tool uses public headers and backend.h only"
forbid examples 'internal\.h|kernel\.h|fp\.h|golden/|backend|npu' "the examples use the public headers only"

# libmoeperm-aclnn: libmoeperm's public header, libc's, and its own (the
# vendor-named headers under include/moeperm/aclnn and internal.h), nothing
# else: every include line is matched against what is allowed.
hits=$(grep -rnE '^[[:space:]]*#[[:space:]]*include' "$root/src/aclnn" --include='*.c' --include='*.h' |
    grep -vE '#[[:space:]]*include[[:space:]]*(<moeperm/moeperm\.h>|<[a-z]+(/[a-z]+)?\.h>|"internal\.h"|"(acl|aclnn|aclnnop)/[a-z_/]+\.h")' |
    grep -E '#[[:space:]]*include' || true)
hits="$hits$(grep -rnE '#[[:space:]]*include[[:space:]]*<(json|openssl|cmocka|moeperm/)' "$root/src/aclnn" |
    grep -v '<moeperm/moeperm\.h>' || true)"
if [ -n "$hits" ]; then
    echo "FAIL src/aclnn: it includes only <moeperm/moeperm.h>, libc and its own headers:" >&2
    echo "$hits" >&2
    failures=$((failures + 1))
else
    echo "ok   src/aclnn: libmoeperm's public header, libc and its own headers only"
fi

[ "$failures" -eq 0 ] || exit 1
