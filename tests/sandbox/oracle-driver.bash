# The effects oracle's driver (inside confine.bash): runs every case file in $CASES for
# real with bash, each in a fresh copy of $FIXTURE at $RUN, under strace (one trace file a
# process, in $TRACES/<case>/), with standard input empty and a plain environment.
set -uo pipefail
for case in "$CASES"/*; do
    name=$(basename "$case")
    rm -rf "$RUN" && cp -a "$FIXTURE" "$RUN"
    mkdir -p "$TRACES/$name"
    (cd "$RUN" && timeout -k 1 20 strace -ff -qq -y -s 4096 \
        -e trace=%file,%process,connect,fchdir,fchmod,fchown,ftruncate,fsetxattr,fremovexattr \
        -o "$TRACES/$name/t" /usr/bin/env -i PATH=/usr/bin:/bin HOME="$HOME_DIR" LC_ALL=C \
        GIT_CONFIG_NOSYSTEM=1 GIT_PAGER=cat PAGER=cat \
        /bin/bash --norc --noprofile -c "$(cat "$case")" </dev/null >/dev/null 2>&1)
    : > "$TRACES/$name.done"
done
