# cli_lib.sh - the helpers the hardening scripts share, sourced by each.
# Needs $moeperm (the tool), $work (a scratch directory the script
# removes) and $failures (the count of failed checks, which the script
# reports at its end).
#
# fail MESSAGE: one failed check, said on one line.
# expect STATUS WHAT COMMAND...: runs COMMAND, stdout to $work/out and
# stderr to $work/err, and fails WHAT unless it exits STATUS.  (The
# scripts that count their checks or bound each command's time define
# their own after sourcing this.)
# says WHAT TEXT: the last command's stderr or stdout holds TEXT.
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
expect() {
    local want=$1 what=$2 rc
    shift 2
    "$@" >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "$what: status $rc, expected $want (stderr: $(cat "$work/err"))"
}
says() {
    cat "$work/err" "$work/out" | grep -qF -- "$2" ||
        fail "$1: the command does not say '$2': $(cat "$work/err")"
}

# Running the tool as another user than root:
#
# as_user COMMAND...: runs COMMAND as a user other than root: nobody when
# this runs as root, else the current user; returns 77 where root cannot
# become nobody.  nobody runs a copy of the tool: the build tree may sit
# below a directory only root can enter (a home directory, a mktemp -d
# directory), so user_tool() copies the tool and the libraries it loads
# from the build tree into $work/tool, which anyone can reach.
# drop_setup sets can_drop to 1 when as_user works, else 0 with a note.
user_tool() {
    local build lib
    build=$(cd "$(dirname "$moeperm")/.." && pwd) || return 1
    mkdir -p "$work/tool" && cp "$moeperm" "$work/tool/moeperm" || return 1
    for lib in $(ldd "$moeperm" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
        case $lib in "$build"/*) cp "$lib" "$work/tool/" || return 1 ;; esac
    done
    chmod 755 "$work" "$work/tool" && chmod a+rX "$work/tool"/*
}
as_user() {
    if [ "$(id -u)" -ne 0 ]; then
        "$@"
    elif command -v setpriv >/dev/null; then
        [ "$1" = "$moeperm" ] && { shift; set -- "$work/tool/moeperm" "$@"; }
        LD_LIBRARY_PATH=$work/tool setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
    else
        return 77
    fi
}
drop_setup() {
    can_drop=1
    if [ "$(id -u)" -eq 0 ] && ! user_tool; then
        can_drop=0
        echo "note: cannot copy the tool where another user can run it: skipping the checks that need one"
    elif ! as_user true || ! as_user "$moeperm" version >/dev/null; then
        can_drop=0
        echo "note: cannot run the tool as another user than root: skipping the checks that need one"
    fi
}
