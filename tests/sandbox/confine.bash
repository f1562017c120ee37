# Runs "$@" where it cannot harm the machine: in a mount namespace of its own where
# every mount is read-only but the directory $WRITABLE, and in a network namespace with no
# interface up but the loopback one when $HOSTS is set (tests/bash_differential.rs,
# tests/effects_oracle.rs). As root the
# namespaces are the root's; otherwise an unprivileged user namespace maps the caller to
# root inside. The command runs as the caller's user mapped in that namespace.
set -euo pipefail
: "${WRITABLE:?set WRITABLE to the one directory the command may write}"
inner() {
    # With $HOSTS, names resolve from that file alone and the loopback device is up, so a
    # program that reaches for a host connects to an address that names it (refused).
    if [[ -n "${HOSTS:-}" ]]; then
        mount --bind "$HOSTS" /etc/hosts
        ip link set lo up
    fi
    mount --rbind / / 2>/dev/null || true
    mount --bind "$WRITABLE" "$WRITABLE"
    # Every mount read-only, deepest last so the writable one is done last.
    while read -r _ point _; do
        [[ "$point" == "$WRITABLE" ]] && continue
        mount -o remount,bind,ro "$point" 2>/dev/null || true
    done < /proc/self/mounts
    exec "$@"
}
export -f inner
flags=(--mount --net --propagation private)
[[ $(id -u) -eq 0 ]] || flags+=(--map-root-user)
exec unshare "${flags[@]}" bash -c 'inner "$@"' confine "$@"
