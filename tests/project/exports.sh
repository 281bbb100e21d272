#!/bin/sh
# A shared library exports its public header and nothing else: every
# symbol it defines in its dynamic table must be declared, outside
# comments, as a function or a variable in one of the headers.  An
# internal helper, a named OpenMP critical section (.gomp_critical_user_*)
# or anything else that leaks into the ABI fails the test with its name.
#   exports.sh NM LIBRARY HEADER...
set -eu
nm=$1 lib=$2
shift 2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT INT TERM

# The headers without their comments, one declaration's words per line.
for header in "$@"; do
    awk '
        {
            line = $0
            out = ""
            while (length(line) > 0) {
                if (incomment) {
                    end = index(line, "*/")
                    if (end == 0) { line = ""; break }
                    line = substr(line, end + 2)
                    incomment = 0
                    continue
                }
                start = index(line, "/*")
                slash = index(line, "//")
                if (slash > 0 && (start == 0 || slash < start)) {
                    out = out substr(line, 1, slash - 1)
                    line = ""
                    break
                }
                if (start == 0) { out = out line; line = ""; break }
                out = out substr(line, 1, start - 1) " "
                line = substr(line, start + 2)
                incomment = 1
            }
            print out
        }' "$header"
done >"$tmp"

exported=$("$nm" -D --defined-only "$lib" | awk '{ print $NF }')
[ -n "$exported" ] || { echo "FAIL: $nm read no exported symbol from $lib" >&2; exit 1; }
failures=0 count=0
for symbol in $exported; do
    case $symbol in
    # what the linker itself defines in every shared object
    _init | _fini | _edata | _end | __bss_start) continue ;;
    esac
    count=$((count + 1))
    # a function (NAME followed by "(") or a variable (by ";", "[" or "=")
    if ! grep -qE "(^|[^A-Za-z0-9_])$symbol[[:space:]]*[([;=]" "$tmp"; then
        echo "FAIL: $lib exports $symbol, which no public header declares" >&2
        failures=$((failures + 1))
    fi
done
[ "$failures" -eq 0 ] || exit 1
echo "ok: the $count symbols $(basename "$lib") exports are all declared in $*"
