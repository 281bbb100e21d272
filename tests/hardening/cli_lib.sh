# cli_lib.sh - sourced by the hardening scripts that run the tool as a
# user other than root.  Needs $moeperm (the tool) and $work (a scratch
# directory the script removes).
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
