# The command line: GNU option forms (getopt_long) for every command, --help anywhere, `--`,
# suggestions for misspelt commands, --version, and the man page and the bash and zsh completions
# that the build generates from the same tables (each option of each command is in all of them).
set -u
pipectl=$(realpath "$1") src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
err() { echo "FAIL: $*"; fail=1; }
expect() { # WANT_RC WANT_STDERR_LINE CMD...
    local want_rc=$1 want_err=$2
    shift 2
    "$@" >"$tmp/o" 2>"$tmp/e"
    local rc=$?
    [ $rc -eq "$want_rc" ] || err "'$*': exit $rc, expected $want_rc; stderr: $(head -c 300 "$tmp/e")"
    [ -z "$want_err" ] || grep -qxF -- "$want_err" "$tmp/e" || err "'$*': stderr '$(cat "$tmp/e")', expected '$want_err'"
}
cp "$src/pipelines/quickstart.yaml" "$tmp/q.yaml"
cp "$src/pipelines/quickstart.yaml" "$tmp/-dash.yaml"
q=$tmp/q.yaml
batches() { grep -o '"batches_done": [0-9]*' "$tmp/o" | grep -o '[0-9]*$'; }

# One option, every spelling: --batches=2, --batches 2, -b 2, -b2, a unique prefix (--bat=2),
# after the file, bundled flags (-qj).
for form in "--batches=2" "--batches 2" "-b 2" "-b2" "--bat=2"; do
    # shellcheck disable=SC2086 # the form is meant to be split into words
    expect 0 "" "$pipectl" run -e host --json $form "$q"
    [ "$(batches)" = 2 ] || err "run $form: batches_done $(batches), expected 2"
done
expect 0 "" "$pipectl" run "$q" --executor=host -qj --batches=3
[ "$(batches)" = 3 ] || err "options after the file: batches_done $(batches), expected 3"
# `--` ends the options: a file whose name starts with '-'.
(cd "$tmp" && "$pipectl" run -e host -j -b 1 -- -dash.yaml >"$tmp/o" 2>"$tmp/e") ||
    err "run -- -dash.yaml: $(cat "$tmp/e")"
[ "$(batches)" = 1 ] || err "run -- -dash.yaml: batches_done $(batches)"
expect 2 "error: 'pipectl run' takes one pipeline file; '--json' is a second one; see 'pipectl run --help'" \
    "$pipectl" run -e host -- "$q" --json

# --fault-marks (run.fault_marks) is a GPU executor setting: the host runs the same batches.
expect 0 "" "$pipectl" run -e host --json --fault-marks -b 2 "$q"
[ "$(batches)" = 2 ] || err "run --fault-marks: batches_done $(batches), expected 2"
expect 2 "error: --fault-marks does not go with --capture (a capture takes the options of 'pipectl capture'); see 'pipectl run --help'" \
    "$pipectl" run --fault-marks --capture "$tmp/bundle" "$q"

# --help anywhere, also after the file and before a bad option: the usage, exit 0.
for cmd in run check capture replay diff plan doctor bench index version schema help; do
    expect 0 "" "$pipectl" "$cmd" --help
    grep -q "^usage: pipectl $cmd" "$tmp/o" || err "$cmd --help: no usage line"
done
expect 0 "" "$pipectl" run "$q" --help --bogus
grep -q '^usage: pipectl run' "$tmp/o" || err "run FILE --help: no usage"
expect 0 "" "$pipectl" run -h
grep -q '^  -b, --batches N  ' "$tmp/o" || err "run -h: no '-b, --batches N' line"

# Usage errors: exact messages, exit 2.
expect 2 "error: unknown option '--bogus' for 'pipectl run'; see 'pipectl run --help'" "$pipectl" run --bogus "$q"
expect 2 "error: unknown option '-z' for 'pipectl run'; see 'pipectl run --help'" "$pipectl" run -z "$q"
expect 2 "error: unknown option '--batchs=2' for 'pipectl run' (did you mean '--batches'?); see 'pipectl run --help'" "$pipectl" run --batchs=2 "$q"
expect 2 "error: unknown option '--tracee' for 'pipectl run' (did you mean '--trace'?); see 'pipectl run --help'" "$pipectl" run --tracee t.json "$q"
expect 2 "error: ambiguous option '--small' for 'pipectl bench' (--small-batches, --small-depth, --small-only); see 'pipectl bench --help'" "$pipectl" bench --small
expect 2 "error: --batches needs a value (N); see 'pipectl run --help'" "$pipectl" run "$q" --batches
expect 2 "error: --batches needs a whole number from 1 to 2^40, got 'x'; see 'pipectl run --help'" "$pipectl" run --batches=x "$q"
expect 2 "error: --reps needs a whole number >= 1, got '0'; see 'pipectl bench --help'" "$pipectl" bench --reps=0
expect 2 "error: --executor must be auto, host or gpu, got 'cpu'; see 'pipectl run --help'" "$pipectl" run --executor cpu "$q"
expect 2 "error: --progress must be auto, always or never, got 'yes'; see 'pipectl run --help'" "$pipectl" run --progress=yes "$q"
expect 2 "error: --graphs must be auto, stage, segment or none, got 'bogus'; see 'pipectl run --help'" "$pipectl" run --graphs bogus "$q"
expect 2 "error: --graphs must be auto, stage, segment or none, got 'all'; see 'pipectl capture --help'" "$pipectl" capture --graphs=all -o "$tmp/nob" "$q"
expect 2 "error: --graphs must be auto, stage or segment, got 'none'; see 'pipectl bench --help'" "$pipectl" bench --graphs none
expect 2 "error: 'pipectl run' needs a pipeline file; see 'pipectl run --help'" "$pipectl" run -e host
expect 2 "error: 'pipectl doctor' takes no arguments (got 'x'); see 'pipectl doctor --help'" "$pipectl" doctor x
expect 2 "error: 'pipectl bench' takes no file (got 'x.yaml'); see 'pipectl bench --help'" "$pipectl" bench x.yaml

# The commands main brought (check -v/--arch, capture, replay, diff, index) parse the same way.
expect 0 "" "$pipectl" check "$q" -v --arch=sm_90
expect 2 "error: --arch needs an SM version like sm_90 or 90, got 'x'; see 'pipectl check --help'" "$pipectl" check --arch x "$q"
expect 0 "" "$pipectl" capture -q --reps=1 -e host "$q" -o "$tmp/b1"
expect 0 "" "$pipectl" run --capt="$tmp/b2" -b 2 -e host "$q"
grep -q '"reps": 1' "$tmp/b2/manifest.json" || err "run --capt=DIR: not a one-run bundle"
expect 2 "error: --json does not go with --capture (a capture takes the options of 'pipectl capture'); see 'pipectl run --help'" "$pipectl" run --capture "$tmp/b3" --json "$q"
expect 0 "" "$pipectl" replay "$tmp/b1" -q
expect 2 "error: --executor must be recorded, host or gpu, got 'auto'; see 'pipectl replay --help'" "$pipectl" replay --executor=auto "$tmp/b1"
expect 2 "error: 'pipectl diff' compares two bundles; 'x' is a third; see 'pipectl diff --help'" "$pipectl" diff "$tmp/b1" "$tmp/b2" x
expect 2 "error: unknown option '--quiet' for 'pipectl diff'; see 'pipectl diff --help'" "$pipectl" diff --quiet "$tmp/b1" "$tmp/b2"
expect 2 "error: 'pipectl index info' takes no options (--metric is one of 'index build'); see 'pipectl index --help'" "$pipectl" index info --metric=l2 x.faiss
expect 2 "error: --train needs a whole number >= 0, got '-1'; see 'pipectl index --help'" "$pipectl" index build --train=-1

# Commands: prefixes, suggestions for typos, nothing suggested for something far away.
expect 0 "" "$pipectl" pl "$q"
expect 2 "error: unknown command 'chek' (did you mean 'check'?); see 'pipectl help'" "$pipectl" chek "$q"
expect 2 "error: unknown command 'rnu' (did you mean 'run'?); see 'pipectl help'" "$pipectl" rnu "$q"
expect 2 "error: unknown command 'bnech' (did you mean 'bench'?); see 'pipectl help'" "$pipectl" bnech
expect 2 "error: unknown command 'frobnicate'; see 'pipectl help'" "$pipectl" frobnicate
expect 2 "error: unknown command '__'; see 'pipectl help'" "$pipectl" __
expect 2 "error: unknown option '--bogus'; options follow the command: 'pipectl COMMAND [options]' (see 'pipectl help')" "$pipectl" --bogus

# OpenBLAS's kernels: where it falls back far below the CPU (PIPECTL_BLAS_PICKED stands for its
# pick), pipectl sets OPENBLAS_CORETYPE and starts again; a user's OPENBLAS_CORETYPE stands.
"$pipectl" version | grep -q "^blas: OpenBLAS .* kernels)" || err "version: no blas line: $("$pipectl" version)"
want=
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && want=Haswell
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
    grep -qw avx512vl /proc/cpuinfo && want=SkylakeX
# A user's OPENBLAS_CORETYPE stands (checked below), so the replacement is seen only without one.
if [ -n "$want" ] && [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    out=$(PIPECTL_BLAS_PICKED=Prescott "$pipectl" version)
    echo "$out" | grep -q "($want kernels), OPENBLAS_CORETYPE=$want$" || err "Prescott fallback not replaced by $want: $out"
fi
out=$(PIPECTL_BLAS_PICKED=Prescott OPENBLAS_CORETYPE=Nehalem "$pipectl" version)
echo "$out" | grep -q "OPENBLAS_CORETYPE=Nehalem$" || err "the user's OPENBLAS_CORETYPE was overridden: $out"
# --version, -V and the version command agree.
v=$("$pipectl" version)
[ "$("$pipectl" --version)" = "$v" ] || err "--version differs from 'pipectl version'"
[ "$("$pipectl" -V)" = "$v" ] || err "-V differs from 'pipectl version'"
echo "$v" | grep -qx 'pipectl [0-9]*\.[0-9]*\.[0-9]*' || err "version: '$v'"
"$pipectl" help | grep -q '__' && err "help lists a hidden command"

# Every long option of every command (from its --help) is in the man page and both completions.
# The build writes them next to the binary: build/pipectl.1, build/completions/{pipectl,_pipectl}.
b=$(dirname "$pipectl")
man=$b/pipectl.1 bash_c=$b/completions/pipectl zsh_c=$b/completions/_pipectl
for f in "$man" "$bash_c" "$zsh_c"; do [ -s "$f" ] || err "not generated by the build: $f"; done
cmp -s "$man" <("$pipectl" __man) || err "$man is not 'pipectl __man'"
for cmd in run check capture replay diff plan doctor bench index version schema help; do
    grep -q "^\.SS \"pipectl $cmd" "$man" || err "man page: no section for $cmd"
    for o in $("$pipectl" "$cmd" --help | grep -o -- '^  \(-., \)\?--[a-z-]*' | grep -o -- '--[a-z-]*'); do
        grep -qF -- "\\fB$(echo "$o" | sed 's/-/\\-/g')\\fR" "$man" || err "man page: no $o of $cmd"
        grep -qF -- "$o" "$bash_c" || err "bash completion: no $o of $cmd"
        grep -qF -- "'$o" "$zsh_c" || grep -qF -- ",$o" "$zsh_c" || err "zsh completion: no $o of $cmd"
    done
done
if command -v groff >/dev/null; then
    w=$(groff -man -Tutf8 -ww -z "$man" 2>&1)
    [ -z "$w" ] || err "groff warns about the man page: $w"
fi

# The bash completion, run as bash would: command names, options, option values (also after
# '='), files for FILE operands, unique prefixes of commands.
complete_words() { # WORDS... (the last is the word being completed)
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _pipectl; printf "%s\n" "${COMPREPLY[@]}"' \
        sh "$bash_c" pipectl "$@" | sort | tr '\n' ' '
}
[ "$(complete_words r)" = "replay run " ] || err "bash: 'pipectl r<TAB>' gave '$(complete_words r)'"
mkdir -p "$tmp/bundle1"
[ "$(complete_words replay "$tmp/bun")" = "$tmp/bundle1 " ] || err "bash: 'replay $tmp/bun<TAB>' gave '$(complete_words replay "$tmp/bun")'"
[ "$(complete_words index "")" = "build info " ] || err "bash: 'index <TAB>' gave '$(complete_words index "")'"
[ "$(complete_words index build --me)" = "--metric " ] || err "bash: 'index build --me<TAB>' gave '$(complete_words index build --me)'"
[ "$(complete_words --v)" = "--version " ] || err "bash: 'pipectl --v<TAB>' gave '$(complete_words --v)'"
[ "$(complete_words run --ba)" = "--batches " ] || err "bash: 'run --ba<TAB>' gave '$(complete_words run --ba)'"
[ "$(complete_words run --executor "")" = "auto gpu host " ] || err "bash: 'run --executor <TAB>' gave '$(complete_words run --executor "")'"
[ "$(complete_words run --executor = h)" = "host " ] || err "bash: 'run --executor=h<TAB>' gave '$(complete_words run --executor = h)'"
[ "$(complete_words ru --timing "")" = "all off sample " ] || err "bash: 'ru --timing <TAB>' gave '$(complete_words ru --timing "")'"
[ "$(complete_words run "$tmp/q.y")" = "$tmp/q.yaml " ] || err "bash: 'run $tmp/q.y<TAB>' gave '$(complete_words run "$tmp/q.y")'"
[ "$(complete_words help ke)" = "kernel " ] || err "bash: 'help ke<TAB>' gave '$(complete_words help ke)'"
[ "$(complete_words help ch)" = "check " ] || err "bash: 'help ch<TAB>' gave '$(complete_words help ch)'"
if command -v zsh >/dev/null; then
    zsh -n "$zsh_c" || err "zsh -n: the zsh completion does not parse"
    # Its dispatch, with zsh's completion functions stubbed to print what they are given.
    zsh_args() { # WORDS... (CURRENT is the last)
        zsh -f -c '_arguments() { print -l -- "$@"; }; _describe() { print -l -- $cmds; };
                   compadd() { print -- "$@"; }; words=("$@"); CURRENT=$#; source "$0"' \
            "$zsh_c" pipectl "$@"
    }
    zsh_args ru --ex | grep -qx -- "(-e --executor)--executor=\[auto (default.*\]:E:(auto host gpu)" ||
        err "zsh: 'pipectl ru --ex<TAB>' does not offer --executor with its values: $(zsh_args ru --ex | head -5)"
    zsh_args plan x | grep -qxF -- "1:pipeline file:_files" || err "zsh: plan does not complete a file"
    zsh_args replay x | grep -qxF -- "1:bundle folder:_files -/" || err "zsh: replay does not complete a folder"
    zsh_args index x | grep -qxF -- "1:subcommand:(build info)" || err "zsh: index does not complete build|info"
    zsh_args c | grep -q '^check:check pipelines' || err "zsh: no command list: $(zsh_args c | head -3)"
    zsh_args help k | grep -q "^1:command or stage kind:(.* kinds .*kernel" || err "zsh: help does not complete kinds"
else
    echo "zsh not found: the zsh completion was not parsed"
fi
head -1 "$zsh_c" | grep -qx '#compdef pipectl' || err "zsh completion: no '#compdef pipectl' line"

[ $fail -eq 0 ] && echo "command line: GNU forms, --help anywhere, suggestions, --version, man page and completions"
exit $fail
