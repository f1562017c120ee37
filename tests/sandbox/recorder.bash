# Sourced (BASH_ENV) by the bash that runs one line of the bash differential
# (tests/bash_differential.rs). PATH names a directory that does not exist (an empty PATH
# would search the current one), so every external command bash would run reaches
# command_not_found_handle; every builtin but `builtin` is replaced by a function
# of its name. Both record instead of running: the words bash passes (argv), the files
# the command's redirections opened (fd, path, open flags) and the variables its
# assignments set, to $__LOG, as fields ended by \x1f and records ended by \x1e.
# The handler returns $__STATUS, so that a line is run once with every command
# succeeding and once with every command failing (both sides of `&&` and `||`).

__BASE_ENV=" "
for __v in $(compgen -e); do __BASE_ENV+="$__v=${!__v} "; done
builtin unset __v

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
    for __v in $(builtin compgen -e); do
        [[ $__BASE_ENV == *" $__v=${!__v} "* ]] || __out+="E${__v}"$'\x1f'
    done
    builtin printf '%s\x1e' "$__out" >> "$__LOG"
}

command_not_found_handle() {
    __rec "$@"
    builtin return "$__STATUS"
}

for __b in $(compgen -b); do
    [[ $__b == builtin ]] && builtin continue
    builtin eval "function $__b { __rec $__b \"\$@\"; builtin return \"\$__STATUS\"; }"
done
builtin unset __b
