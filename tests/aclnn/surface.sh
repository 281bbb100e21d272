#!/bin/sh
# The surface of libmoeperm-aclnn: it exports the vendor's names and no
# other; each header compiles alone as C (C99, C11) and C++ (C++11, C++17)
# with every warning an error; signatures.cpp holds the vendor's exact
# signatures and values against them.
#   surface.sh BUILD_DIR SOURCE_ROOT
set -eu
build=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
lib=$build/src/aclnn/libmoeperm-aclnn.so
inc=$root/include/moeperm/aclnn
failures=0

cat >"$tmp/want" <<'NAMES'
aclCreateIntArray
aclCreateTensor
aclDestroyIntArray
aclDestroyTensor
aclFinalize
aclGetRecentErrMsg
aclInit
aclnnMoeTokenPermute
aclnnMoeTokenPermuteGetWorkspaceSize
aclnnMoeTokenPermuteGrad
aclnnMoeTokenPermuteGradGetWorkspaceSize
aclnnMoeTokenUnpermute
aclnnMoeTokenUnpermuteGetWorkspaceSize
aclnnMoeTokenUnpermuteGrad
aclnnMoeTokenUnpermuteGradGetWorkspaceSize
aclrtCreateStream
aclrtDestroyStream
aclrtFree
aclrtGetDeviceCount
aclrtGetSocName
aclrtMalloc
aclrtMemcpy
aclrtResetDevice
aclrtSetDevice
aclrtSynchronizeStream
NAMES
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRr]$/ {print $3}' | LC_ALL=C sort >"$tmp/got"
if LC_ALL=C sort "$tmp/want" | cmp -s - "$tmp/got"; then
    echo "ok   exports exactly the $(wc -l <"$tmp/want") vendor names"
else
    echo "FAIL: the exported names differ from the vendor's list (< wanted, > exported):" >&2
    LC_ALL=C sort "$tmp/want" | diff - "$tmp/got" >&2 || true
    failures=$((failures + 1))
fi

cc=${CC:-cc}
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: no C++ compiler"; exit 77; }
for header in $(cd "$inc" && find . -name '*.h' | sed 's|^\./||' | LC_ALL=C sort); do
    printf '#include "%s"\n#include "%s"\nint moeperm_unused;\n' "$header" "$header" >"$tmp/one.c"
    cp "$tmp/one.c" "$tmp/one.cpp"
    for std in c99 c11; do
        "$cc" -std=$std -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/one.c" \
            >"$tmp/log" 2>&1 ||
            { echo "FAIL: $header does not compile alone as $std:" >&2; cat "$tmp/log" >&2;
              failures=$((failures + 1)); }
    done
    for std in c++11 c++17; do
        "$cxx" -std=$std -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/one.cpp" \
            >"$tmp/log" 2>&1 ||
            { echo "FAIL: $header does not compile alone as $std:" >&2; cat "$tmp/log" >&2;
              failures=$((failures + 1)); }
    done
done
[ "$failures" -eq 0 ] && echo "ok   every header compiles alone, twice, as C99, C11, C++11 and C++17"

# shellcheck disable=SC2086
"$cxx" -std=c++11 -Wall -Wextra -Werror ${SANITIZE_FLAGS:-} -I"$inc" \
    "$root/tests/aclnn/signatures.cpp" -o "$tmp/sig" \
    -L"$build/src/aclnn" -lmoeperm-aclnn -Wl,-rpath,"$build/src/aclnn:$build/src" >"$tmp/log" 2>&1 &&
    "$tmp/sig" ||
    { echo "FAIL: the vendor's signatures and values do not hold:" >&2; cat "$tmp/log" >&2;
      failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "ok   the vendor's signatures, enumerations and codes"
[ "$failures" -eq 0 ]
