# The progress line of `pipectl run` under a pseudo-terminal of 40 and 120 columns: redrawn in
# place (no newline until the summary), never wider than the terminal, rate and ETA when there is
# room; nothing on a pipe unless --progress=always (then a line per second); --progress=never.
set -u
pipectl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v python3 >/dev/null || { echo "SKIP: no python3 for the pseudo-terminal"; exit 77; }
cat >"$tmp/p.yaml" <<'YAML'
pipeline: progress
run: {batches: 3000, depth: 2}
buffers:
  x: {where: host, dtype: f32, shape: [65536]}
  y: {where: device, dtype: f32, shape: [65536]}
  z: {where: host, dtype: f32, shape: [65536]}
stages:
  - {name: gen, kind: source, to: x, generator: random}
  - {name: up, kind: h2d, from: x, to: y}
  - {name: down, kind: d2h, from: y, to: z}
  - {name: sum, kind: sink, from: z, checksum: false}
YAML
python3 - "$pipectl" "$tmp/p.yaml" <<'PY' || exit 1
import fcntl, os, pty, re, struct, sys, termios

pipectl, pipeline = sys.argv[1], sys.argv[2]

def run_pty(cols, *extra):
    pid, fd = pty.fork()
    if pid == 0:
        env = dict(os.environ)
        env.pop("COLUMNS", None)  # the terminal's own size must be used
        os.execve(pipectl, [pipectl, "run", "-e", "host", *extra, pipeline], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("FAIL: pipectl exited %d under a pty: %r" % (os.waitstatus_to_exitcode(status), out[-300:]))
    return out.decode()

fail = []
for cols in (40, 120):
    out = run_pty(cols)
    summary = out.find("pipeline 'progress'")
    if summary < 0:
        fail.append("%d cols: no summary in %r" % (cols, out[-200:]))
        continue
    before = out[:summary]
    if "\n" in before:
        fail.append("%d cols: the progress line scrolled (a newline before the summary): %r" % (cols, before[:300]))
    frames = [f.rstrip(" ") for f in before.split("\r") if "batches" in f]
    if len(frames) < 2:
        fail.append("%d cols: %d progress frames, expected several: %r" % (cols, len(frames), before[:300]))
    for f in frames:
        if len(f) > cols - 1:
            fail.append("%d cols: a frame of %d columns: %r" % (cols, len(f), f))
            break
    last = frames[-1] if frames else ""
    want = ["/3000 batches", "ETA", "["] + (["batches/s"] if cols == 120 else [])
    for w in want:
        if w not in last:
            fail.append("%d cols: %r not in the last frame %r" % (cols, w, last))
    if cols == 120 and not re.search(r"[0-9.]+ [KMGT]iB/s", last):
        fail.append("120 cols: no bytes/s in the last frame %r" % last)
    # The line is cleared before the summary: nothing of it is left on the summary's row.
    if not before.endswith("\r"):
        fail.append("%d cols: the progress line was not cleared: %r" % (cols, before[-80:]))
out = run_pty(120, "--progress=never")
if "ETA" in out or "\r" in out[:out.find("pipeline 'progress'")]:
    fail.append("--progress=never drew a progress line: %r" % out[:200])
for f in fail:
    print("FAIL: " + f)
sys.exit(1 if fail else 0)
PY
# Not a terminal: nothing on stderr by default; --progress=always writes whole lines.
"$pipectl" run -e host "$tmp/p.yaml" >/dev/null 2>"$tmp/err" || { echo "FAIL: run exited $?"; exit 1; }
[ ! -s "$tmp/err" ] || { echo "FAIL: progress on a pipe: $(head -c 200 "$tmp/err")"; exit 1; }
COLUMNS=60 "$pipectl" run -e host --progress=always "$tmp/p.yaml" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: run --progress=always exited $?"; exit 1; }
grep -q '^\[#*\.*\] [0-9]*/3000 batches' "$tmp/err" || { echo "FAIL: --progress=always on a pipe: $(head -c 300 "$tmp/err")"; exit 1; }
grep -q $'\r' "$tmp/err" && { echo "FAIL: --progress=always on a pipe redraws with CR"; exit 1; }
awk 'length > 59 { exit 1 }' "$tmp/err" || { echo "FAIL: --progress=always: a line wider than COLUMNS=60"; exit 1; }
echo "progress: redrawn in place at 40 and 120 columns, rate and ETA, cleared; silent on a pipe; always/never"
