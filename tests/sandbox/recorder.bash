# Sourced (BASH_ENV) by the bash that runs one line of the bash differential
# (tests/bash_differential.rs). PATH names a directory that does not exist (an empty PATH
# would search the current one), so every external command bash would run reaches
# command_not_found_handle; every builtin but `builtin` is replaced by a function
# of its name. Both record instead of running: the words bash passes (argv), the files
# the command's redirections opened (fd, path, open flags) and the variables its
# assignments set, to $__LOG, as fields ended by \x1f and records ended by \x1e.
# The handler returns $__STATUS, so that a line is run once with every command
# succeeding and once with every command failing (both sides of `&&` and `||`).

# No command substitution here or in __rec (but readlink's, for a redirection): each would
# fork, and the differential runs this bash about 20,000 times (the lists go through the
# scratch file $__TMP.<pid> instead: one per process, as a command run with `&` records
# beside the rest of its line).
builtin compgen -e > "$__TMP.$BASHPID"
builtin mapfile -t __names < "$__TMP.$BASHPID"
__BASE_ENV=" "
for __v in "${__names[@]}"; do __BASE_ENV+="$__v=${!__v} "; done
builtin unset __v __names

__rec() {
    builtin local __n __path __flags __line __out __v __i __pid=$BASHPID
    __out=""
    for __v in "$@"; do __out+="A${__v}"$'\x1f'; done
    for __n in 0 1 2 3 4 5 6 7 8 9; do
        [[ -e /proc/$__pid/fd/$__n ]] || builtin continue
        if [[ $__n -le 2 ]]; then
            __v="__BASE_FD$__n"
            [[ /proc/$__pid/fd/$__n -ef ${!__v} ]] && builtin continue
        fi
        __path=$(/usr/bin/readlink "/proc/$__pid/fd/$__n")
        __flags=""
        builtin mapfile -t __i < "/proc/$__pid/fdinfo/$__n"
        for __line in "${__i[@]}"; do
            [[ $__line == flags:* ]] && __flags=${__line#flags:}
        done
        __out+="D${__n}=${__flags//[[:space:]]/}=${__path}"$'\x1f'
    done
    builtin compgen -e > "$__TMP.$__pid"
    builtin mapfile -t __i < "$__TMP.$__pid"
    for __v in "${__i[@]}"; do
        [[ $__BASE_ENV == *" $__v=${!__v} "* ]] || __out+="E${__v}"$'\x1f'
    done
    builtin printf '%s\x1e' "$__out" >> "$__LOG"
}

command_not_found_handle() {
    __rec "$@"
    builtin return "$__STATUS"
}

# Every builtin but `builtin` as a function that records: the definitions are written once
# by the driver (bash-driver.bash) to $__BUILTINS; sourcing them costs a run 0.4 ms where
# building them here cost 1.9 ms.
builtin source "$__BUILTINS"
