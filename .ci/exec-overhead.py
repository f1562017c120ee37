#!/usr/bin/env python3
"""holon job exec's overhead (issue #25; docs/PERFORMANCE.md, "holon job exec overhead").

    python3 .ci/exec-overhead.py HOLON [RUNS]

A job approved for `true` in a fresh state under a temporary directory, then RUNS
(default 40) rounds, each running in turn `true`, `holon job exec j -- true` (confined,
cron scope), `holon job check` of the same call, and the same two through `holon-job`
(the job verbs' own program, when it is beside HOLON); prints the medians in ms. HOLON,
the holon-sandbox and holon-job beside it are copied first (exec refuses a program with a
second hard link beside a write grant, which cargo's target/*/holon has).
"""
import tempfile
import os, subprocess, shutil, json, time, statistics, sys
holon_src = sys.argv[1]
base = tempfile.mkdtemp(prefix="holon-exec-overhead-")
for d in ["w/reports", "state", "tmp", "home", "bin"]:
    os.makedirs(f"{base}/{d}")
holon = f"{base}/bin/holon"
shutil.copy(holon_src, holon)  # a single-link copy (exec refuses a linked program beside a write grant)
for other in ["holon-sandbox", "holon-job"]:  # the helper, the job verbs' program
    if os.path.exists(os.path.join(os.path.dirname(holon_src), other)):  # (older builds lack them)
        shutil.copy(os.path.join(os.path.dirname(holon_src), other), f"{base}/bin/{other}")
lean = f"{base}/bin/holon-job" if os.path.exists(f"{base}/bin/holon-job") else None
env = dict(os.environ, NO_COLOR="1", TMPDIR=f"{base}/tmp", HOME=f"{base}/home")
for k in ["HOLON_SCOPE", "HOLON_RUN", "HOLON_STATE", "HOLON_TEST_LANDLOCK_ABI"]:
    env.pop(k, None)
w = f"{base}/w"
def h(args, stdin="", front=None):
    program = [front] if front else [holon, "job"]
    return subprocess.run(program + ["--state", f"{base}/state"] + args, input=stdin.encode(), cwd=w, env=env, capture_output=True)
call = json.dumps({"tool": "terminal", "args": {"command": "ls"}, "cwd": w})
assert h(["observe", "j", "--run", "r0", "--workdir", w], call + "\n").returncode == 0
assert h(["propose", "j"]).returncode == 0
open(f"{base}/state/jobs/j/versions/v1.yaml", "w").write(
    f'mandate: 1\njob: "j"\nworkdir: {json.dumps(w)}\nobserved_runs: 1\n'
    'tools: ["terminal"]\npaths:\n  read: ["**"]\n  write: ["reports/**"]\ncommands: ["true"]\nhosts: []\n'
    'limits:\n  max_writes_per_run: null\n')
r = h(["approve", "j"]); assert r.returncode == 0, r.stderr
check_call = json.dumps({"tool": "terminal", "args": {"command": "true"}})
r = h(["exec", "j", "--run", "r1", "--scope", "cron", "--", "true"]); assert r.returncode == 0, r.stderr
ex = h(["exec", "j", "--explain"]).stdout.decode()
assert "commands run confined" in ex, ex
if lean:
    r = h(["exec", "j", "--run", "r1", "--scope", "cron", "--", "true"], front=lean); assert r.returncode == 0, r.stderr
t_true, t_exec, t_check, l_exec, l_check = [], [], [], [], []
def timed(f):
    s = time.perf_counter(); f(); return (time.perf_counter() - s) * 1000
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 40):
    t_true.append(timed(lambda: subprocess.run(["true"], cwd=w, env=env)))
    t_exec.append(timed(lambda: h(["exec", "j", "--run", f"r{i+2}", "--scope", "cron", "--", "true"])))
    t_check.append(timed(lambda: h(["check", "j", "--run", f"r{i+2}", "--scope", "cron"], check_call)))
    if lean:
        l_exec.append(timed(lambda: h(["exec", "j", "--run", f"r{i+2}", "--scope", "cron", "--", "true"], front=lean)))
        l_check.append(timed(lambda: h(["check", "j", "--run", f"r{i+2}", "--scope", "cron"], check_call, front=lean)))
m = statistics.median
print(f"true {m(t_true):.2f} ms  check {m(t_check):.2f} ms  exec {m(t_exec):.2f} ms  exec-true {m(t_exec)-m(t_true):.2f} ms  exec-check {m(t_exec)-m(t_check):.2f} ms")
if lean:
    print(f"holon-job: check {m(l_check):.2f} ms  exec {m(l_exec):.2f} ms  exec-true {m(l_exec)-m(t_true):.2f} ms  exec-check {m(l_exec)-m(l_check):.2f} ms")
shutil.rmtree(base, ignore_errors=True)
