# The bash differential's driver (inside confine.bash): runs every case file in $CASES
# twice with bash (every command succeeding, then failing), each in a fresh copy of the
# seed directory $SEED under $WRITABLE, recording with recorder.bash into
# $RECORDS/<case>.<status>.
set -uo pipefail
# The recorder reports every open descriptor from 3 to 9 as a file the line opened: none
# may come from whatever started the test (`/usr/bin/time -o FILE cargo test` leaves
# FILE open as 3, and every command then seemed to open it).
for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done
here=$(cd "$(dirname "$0")" && pwd)
base_in=$WRITABLE/base.in base_out=$WRITABLE/base.out base_err=$WRITABLE/base.err
: > "$base_in"
run=$WRITABLE/run
# The recorder's functions, one for every builtin of /bin/bash but `builtin`.
builtins=$WRITABLE/builtins.bash
/bin/bash --norc --noprofile -c 'for b in $(compgen -b); do
    [[ $b == builtin ]] || printf "function %s { __rec %s \"\$@\"; builtin return \"\$__STATUS\"; }\n" "$b" "$b"
done' >"$builtins"
count=0
for case in "$CASES"/*; do
    name=${case##*/}
    # The commands never run, only redirections touch the directory: a fresh copy of the
    # seed now and then is enough (and the driver moves into it: no subshell per run).
    if (( count++ % 200 == 0 )); then cd "$WRITABLE" && rm -rf "$run" && cp -a "$SEED" "$run" && cd "$run"; fi
    # The line exactly as holon reads it (a command substitution would fork, and drop
    # trailing newlines).
    IFS= read -r -d '' line <"$case" || true
    for status in 0 1; do
        timeout -k 1 5 /usr/bin/env -i PATH=/nonexistent __LOG="$RECORDS/$name.$status" __STATUS=$status \
            __TMP="$WRITABLE/recorder.tmp" __BUILTINS="$builtins" \
            __BASE_FD0="$base_in" __BASE_FD1="$base_out" __BASE_FD2="$base_err" \
            BASH_ENV="$here/recorder.bash" /bin/bash --norc --noprofile -c "$line" <"$base_in" >"$base_out" 2>"$base_err"
        : > "$RECORDS/$name.$status.done"
    done
done
