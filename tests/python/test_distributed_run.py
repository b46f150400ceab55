"""The rtx-run launcher (python -m rustytorch.distributed.run): the environment of every rank, -m,
--standalone, output prefixes and log files, failures, restarts and signals, each run bounded in
time and checked to leave no process behind; beside torch, the same variables as torchrun's."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from dist_launch import process_alive

from rustytorch.distributed import run

#: The variables torchrun sets that rtx-run sets too.
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
              "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "OMP_NUM_THREADS",
              "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS")

#: Prepended to every child script: records the child's pid in $PIDS so that the test can check
#: that none is left running; wait_for_pids(n) waits until n processes have recorded theirs.
RECORD_PID = textwrap.dedent("""
    import os, time
    open(os.path.join(os.environ["PIDS"], str(os.getpid())), "w").close()
    def wait_for_pids(n):
        while len(os.listdir(os.environ["PIDS"])) < n:
            time.sleep(0.01)
""")

ENV_SCRIPT = textwrap.dedent(f"""
    import json, sys
    # One write a line: the ranks share the launcher's stdout, and print() writes the text and its
    # newline apart when the output is unbuffered.
    sys.stdout.write(json.dumps({{k: os.environ.get(k) for k in {RENDEZVOUS!r}}}) + "\\n")
    sys.stdout.write(" ".join(["args", *sys.argv[1:]]) + "\\n")
    print("to stderr", os.environ["RANK"], file=sys.stderr)
""")


@pytest.fixture
def job(tmp_path):
    """Writes child scripts and runs the launcher on them; after the test, no child may be running."""
    class Job:
        pids = tmp_path / "pids"
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        env.update(PIDS=str(pids), PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))

        def script(self, name, text):
            path = tmp_path / name
            path.write_text(RECORD_PID + textwrap.dedent(text))
            return str(path)

        def cmd(self, *args, grace=None):
            if grace is None:
                return [sys.executable, "-m", "rustytorch.distributed.run", *args]
            return [sys.executable, "-c", f"import sys, rustytorch.distributed.run as r; r.GRACE_S = {grace}; "
                                          "r.main(sys.argv[1:])", *args]

        def run(self, *args, grace=None, timeout=30):
            return subprocess.run(self.cmd(*args, grace=grace), capture_output=True, text=True, timeout=timeout,
                                  env=self.env, cwd=tmp_path)

        def started(self, n, timeout=20):
            deadline = time.monotonic() + timeout
            while len(os.listdir(self.pids)) < n:
                assert time.monotonic() < deadline, "the processes did not start"
                time.sleep(0.02)
            return [int(p) for p in os.listdir(self.pids)]

    Job.pids.mkdir()
    yield Job()
    left = [int(p) for p in os.listdir(Job.pids) if process_alive(int(p))]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}"


def records(stdout):
    """{rank: environment} from the [rank N]: lines of ENV_SCRIPT."""
    out = {}
    for line in stdout.splitlines():
        prefix, _, text = line.partition(": ")
        if text.startswith("{"):
            out[int(prefix[len("[rank "):-1])] = json.loads(text)
    return out


@pytest.mark.parametrize("nproc,nodes", [(2, []), (4, []), (2, ["--nnodes", "2", "--node-rank", "1"])])
def test_every_rank_gets_the_rendezvous_environment(job, nproc, nodes):
    script = job.script("env.py", ENV_SCRIPT)
    given = ["--master-port", "29511"] if nodes else []
    r = job.run("--nproc-per-node", str(nproc), *nodes, *given, script, "--lr", "0.1")
    assert r.returncode == 0, r.stderr
    node = int(nodes[-1]) if nodes else 0
    world = nproc * (node + 1)
    env = records(r.stdout)
    assert sorted(env) == list(range(node * nproc, world))
    for rank, e in env.items():
        assert int(e["RANK"]) == int(e["ROLE_RANK"]) == rank
        assert int(e["LOCAL_RANK"]) == rank - node * nproc
        assert int(e["WORLD_SIZE"]) == int(e["ROLE_WORLD_SIZE"]) == world
        assert int(e["LOCAL_WORLD_SIZE"]) == nproc
        assert (int(e["GROUP_RANK"]), int(e["GROUP_WORLD_SIZE"])) == (node, node + 1)
        assert e["MASTER_ADDR"] == "127.0.0.1" and e["OMP_NUM_THREADS"] == "1"
        assert (e["TORCHELASTIC_RESTART_COUNT"], e["TORCHELASTIC_MAX_RESTARTS"]) == ("0", "0")
    assert len({e["MASTER_PORT"] for e in env.values()}) == 1
    port = env[world - 1]["MASTER_PORT"]
    assert (port == "29511") if nodes else (port != "29500")  # one node without --master-port: a free port
    # Each line carries its rank; stdout and stderr stay apart.
    assert sorted(r.stdout.count(f"[rank {k}]: args --lr 0.1\n") for k in env) == [1] * nproc
    assert sorted(line for line in r.stderr.splitlines() if line.startswith("[rank")) == \
        [f"[rank {k}]: to stderr {k}" for k in sorted(env)]
    assert "to stderr" not in r.stdout and "OMP_NUM_THREADS=1" in r.stderr
    assert len(job.started(nproc)) == nproc


def test_module_and_program(job):
    job.script("trainmod.py", """
        import sys
        print("module", __name__, os.environ["RANK"], *sys.argv[1:])
    """)
    r = job.run("--nproc-per-node", "2", "-m", "trainmod", "x")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["[rank 0]: module __main__ 0 x", "[rank 1]: module __main__ 1 x"]
    r = job.run("--nproc_per_node=2", "--no-python", "sh", "-c", 'echo "sh $RANK of $WORLD_SIZE"')
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["[rank 0]: sh 0 of 2", "[rank 1]: sh 1 of 2"]


def test_standalone_and_one_node_pick_a_free_port(job):
    # Rank 0 listens on MASTER_PORT, as its store will: the port given on the command line is busy.
    script = job.script("listen.py", """
        import socket
        if os.environ["RANK"] == "0":
            socket.create_server((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))).close()
        print("port", os.environ["MASTER_PORT"])
    """)
    with socket.create_server(("127.0.0.1", 0)) as busy:
        taken = str(busy.getsockname()[1])
        r = job.run("--standalone", "--nproc-per-node", "2", "--master-port", taken, script)
        assert r.returncode == 0, r.stderr
        ports = {line.split()[-1] for line in r.stdout.splitlines()}
        assert len(ports) == 1 and taken not in ports
        r = job.run("--master-port", taken, script)   # the port given is used
        assert r.returncode == 1 and "Address already in use" in r.stderr


def test_a_failing_rank_stops_the_others(job):
    script = job.script("fail.py", """
        import sys, time
        if os.environ["RANK"] == "1":
            wait_for_pids(3)  # the others are sleeping
            for i in range(30):
                print("line", i, file=sys.stderr)
            print("boom", file=sys.stderr)
            sys.exit(3)
        time.sleep(60)
    """)
    start = time.monotonic()
    r = job.run("--nproc-per-node", "3", script)
    assert time.monotonic() - start < 15  # the others sleep 60 s: they were stopped, not waited for
    assert r.returncode == 1
    report = r.stderr[r.stderr.index("rtx-run: rank 1"):]
    assert report.startswith("rtx-run: rank 1 (local rank 1, pid ") and "exited with code 3" in report
    assert "    line 29\n    boom\n" in report and "line 20" not in report  # the last lines only
    assert "rank 0" not in report and "rank 2" not in report
    assert len(job.started(3)) == 3


def test_processes_that_ignore_sigterm_are_killed_after_the_grace_period(job):
    script = job.script("stubborn.py", """
        import signal, sys, time
        ready = os.path.join(os.environ["PIDS"], "..", "ready")
        if os.environ["RANK"] == "0":
            while not os.path.exists(ready):
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGSEGV)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(ready, "w").close()
        time.sleep(60)
    """)
    start = time.monotonic()
    r = job.run("--nproc-per-node", "2", script, grace=0.5)
    assert time.monotonic() - start < 15  # the others sleep 60 s: they were stopped, not waited for
    assert r.returncode == 1 and "rank 0 (local rank 0" in r.stderr and "killed by SIGSEGV (exit code -11)" in r.stderr


def test_what_a_process_leaves_running_is_stopped(job):
    script = job.script("spawn.py", """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(os.path.join(os.environ["PIDS"], str(child.pid)), "w").close()
        print("started", child.pid)
    """)
    r = job.run("--nproc-per-node", "2", script)
    assert r.returncode == 0, r.stderr
    assert len(job.started(4)) == 4


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_reaches_every_process(job, signum):
    script = job.script("wait.py", """
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(f"rank {os.environ['RANK']} got SIGTERM"))
        print("ready", flush=True)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            sys.exit(f"rank {os.environ['RANK']} got SIGINT")
    """)
    launcher = subprocess.Popen(job.cmd("--nproc-per-node", "2", script), env=job.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        job.started(2)
        time.sleep(0.2)  # the children have installed their handlers
        launcher.send_signal(signum)
        out, err = launcher.communicate(timeout=10)
    finally:
        launcher.kill()
    assert launcher.returncode == -signum
    name = signal.Signals(signum).name
    assert f"[rank 0]: rank 0 got {name}" in err and f"[rank 1]: rank 1 got {name}" in err
    assert f"rtx-run: stopped by {name}" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the processes die with the launcher on Linux")
def test_the_processes_die_with_a_killed_launcher(job):
    script = job.script("sleep.py", "import time; time.sleep(60)\n")
    launcher = subprocess.Popen(job.cmd("--nproc-per-node", "2", script), env=job.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pids = job.started(2)
    finally:
        launcher.kill()
        launcher.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(process_alive(p) for p in pids)


@pytest.mark.parametrize("fail_on", ["every attempt", "the first attempt"])
def test_max_restarts_restarts_the_group(job, tmp_path, fail_on):
    script = job.script("flaky.py", f"""
        import sys
        restart, rank = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
        attempts = os.path.join({str(tmp_path)!r}, "attempts")
        with open(attempts, "a") as f:
            print(restart, rank, os.environ["TORCHELASTIC_MAX_RESTARTS"], file=f)
        if rank == "1" and ({fail_on == "every attempt"} or restart == "0"):
            while f"{{restart}} 0 1" not in open(attempts).read().splitlines():  # rank 0 has written its line
                time.sleep(0.01)
            sys.exit(7)
    """)
    r = job.run("--nproc-per-node", "2", "--max-restarts", "1", script)
    attempts = sorted((tmp_path / "attempts").read_text().splitlines())
    assert attempts == ["0 0 1", "0 1 1", "1 0 1", "1 1 1"]
    assert "rtx-run: restarting the group of 2 processes (restart 1 of 1)" in r.stderr
    if fail_on == "every attempt":
        assert r.returncode == 1 and r.stderr.count("rtx-run: rank 1 (local rank 1") == 2
        assert "rtx-run: the job failed after 1 restart(s)" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


def test_redirects_and_tee_write_the_log_files(job, tmp_path):
    script = job.script("env.py", ENV_SCRIPT)
    logs = tmp_path / "logs"
    r = job.run("--nproc-per-node", "2", "--log-dir", str(logs), "--redirects", "0:1", "--tee", "1:2", script)
    assert r.returncode == 0, r.stderr
    assert sorted(records(r.stdout)) == [1]                       # rank 0's stdout went to its file only
    assert "[rank 0]: to stderr 0" in r.stderr and "[rank 1]: to stderr 1" in r.stderr
    assert json.loads((logs / "attempt_0" / "0" / "stdout.log").read_text().splitlines()[0])["RANK"] == "0"
    assert (logs / "attempt_0" / "1" / "stderr.log").read_text() == "to stderr 1\n"
    assert sorted(p.relative_to(logs).as_posix() for p in logs.rglob("*.log")) == [
        "attempt_0/0/stdout.log", "attempt_0/1/stderr.log"]


@pytest.mark.parametrize("args,message", [
    (["--nnodes", "1:4", "x.py"], "argument --nnodes: '1:4': a range of node counts needs elastic rendezvous"),
    (["--nproc-per-node", "many", "x.py"], "argument --nproc-per-node/--nproc_per_node: expected an int"),
    (["--nproc-per-node", "0", "x.py"], "expected at least 1 process, got 0"),
    (["--nnodes", "2", "--node-rank", "2", "x.py"], "--node-rank 2: expected 0..1 for --nnodes 2"),
    (["--master-port", "http", "x.py"], "argument --master-port/--master_port: invalid int value: 'http'"),
    (["--standalone", "--nnodes", "2", "x.py"], "--standalone runs one node, got --nnodes 2"),
    (["-m", "--no-python", "x"], "--module and --no-python exclude each other"),
    (["-r", "3", "x.py"], "--redirects and --tee write into --log-dir"),
    (["-t", "0:4", "--log-dir", "d", "x.py"], "argument -t/--tee: expected 0 (none), 1 (stdout), 2 (stderr) or 3"),
    (["missing.py"], "missing.py: no such file"),
    (["--no-python", "no-such-program"], "no-such-program: no such program, or not executable"),
    ([], "the following arguments are required: training_script"),
])
def test_bad_command_lines_are_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as e:
        run.resolve(args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: rtx-run" in err and message in err, err


def test_the_same_variables_as_torchrun(job):
    pytest.importorskip("torch")
    script = job.script("env.py", ENV_SCRIPT)
    args = ["--nproc-per-node", "2", "--master-port", "29512", script]
    ours = job.run(*args)
    theirs = subprocess.run([sys.executable, "-m", "torch.distributed.run", *args], capture_output=True, text=True,
                            timeout=60, env=job.env)
    assert ours.returncode == 0 and theirs.returncode == 0, ours.stderr + theirs.stderr
    by_rank = {json.loads(line)["RANK"]: json.loads(line) for line in theirs.stdout.splitlines() if line.startswith("{")}
    assert by_rank == {e["RANK"]: e for e in records(ours.stdout).values()}
