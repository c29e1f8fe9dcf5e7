# `pipectl help kinds` and `pipectl help KIND` come from the kind table: every kind is listed
# with its engine, every key of a kind with its type and default; a misspelt kind gets a "did you
# mean" and exit code 2; `pipectl help COMMAND` still describes commands.
set -u
pipectl=$1
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
kinds=$("$pipectl" help kinds) || say_fail "pipectl help kinds failed"
for k in source search h2d kernel d2h lua sink; do
    echo "$kinds" | grep -q "^  $k " || say_fail "help kinds does not list $k"
    "$pipectl" help "$k" >/dev/null || say_fail "pipectl help $k failed"
done
h2d=$("$pipectl" help h2d)
echo "$h2d" | grep -q "^h2d: " || say_fail "help h2d: no heading: $h2d"
echo "$h2d" | grep -q "engine: *h2d" || say_fail "help h2d: no engine"
echo "$h2d" | grep -Eq "^  from +buffer name +- +host buffer" || say_fail "help h2d: no 'from' row"
sink=$("$pipectl" help sink)
echo "$sink" | grep -Eq "^  format +auto, raw, npy, text, jsonl +auto " || say_fail "help sink: no 'format' row with values and default"
echo "$sink" | grep -Eq "^  reads +list of names +\[\] " || say_fail "help sink: no common key 'reads'"
err=$("$pipectl" help kernal 2>&1 >/dev/null)
rc=$?
[ $rc = 2 ] || say_fail "help kernal: exit $rc, want 2"
[ "$err" = "error: unknown command or stage kind 'kernal' (did you mean 'kernel'?); see 'pipectl help' and 'pipectl help kinds'" ] ||
    say_fail "help kernal: $err"
"$pipectl" help plan | grep -q "^usage: pipectl plan" || say_fail "help plan does not describe the command"
[ $fail = 0 ] && echo "help kinds and help KIND match the kind table"
exit $fail
