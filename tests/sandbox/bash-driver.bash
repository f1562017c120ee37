# The bash differential's driver (inside confine.bash): runs every case file in $CASES
# twice with bash (every command succeeding, then failing), each in a fresh copy of the
# seed directory $SEED under $WRITABLE, recording with recorder.bash into
# $RECORDS/<case>.<status>.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base_in=$WRITABLE/base.in base_out=$WRITABLE/base.out base_err=$WRITABLE/base.err
: > "$base_in"
run=$WRITABLE/run
count=0
for case in "$CASES"/*; do
    name=$(basename "$case")
    # The commands never run, only redirections touch the directory: a fresh copy of the
    # seed now and then is enough.
    if (( count++ % 200 == 0 )); then rm -rf "$run" && cp -a "$SEED" "$run"; fi
    line=$(<"$case")
    for status in 0 1; do
        (cd "$run" && timeout -k 1 5 /usr/bin/env -i PATH=/nonexistent __LOG="$RECORDS/$name.$status" __STATUS=$status \
            __BASE_FD0="$base_in" __BASE_FD1="$base_out" __BASE_FD2="$base_err" BASH_ENV="$here/recorder.bash" \
            /bin/bash --norc --noprofile -c "$line" <"$base_in" >"$base_out" 2>"$base_err")
        : > "$RECORDS/$name.$status.done"
    done
done
