"""rtx-run (python -m rustytorch.distributed.run): starts the processes of a distributed job with
torchrun's options and environment, and supervises them.

    rtx-run --nproc-per-node 4 train.py --epochs 3
    rtx-run --standalone --nproc-per-node gpu -m my_package.train
    rtx-run --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 --nproc-per-node 8 train.py

Each process gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
GROUP_RANK and the rest of torchrun's variables; its output lines are prefixed with [rank N]:.
When one process fails the others are stopped, the group is restarted up to --max-restarts times,
and the launcher exits non-zero naming the rank that failed."""
import argparse
import collections
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

#: Seconds a process has between SIGTERM (or a forwarded signal) and SIGKILL.
GRACE_S = 5.0
#: Seconds between two looks at the processes.
POLL_S = 0.05
#: Lines of a failed rank's stderr repeated in the failure report.
TAIL_LINES = 10
#: Signals forwarded to every process (torchrun's TORCHELASTIC_SIGNALS_TO_HANDLE).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Bits of --redirects / --tee: which streams go to the log files.
STDOUT, STDERR = 1, 2


def _nproc(value):
    """The number of processes for --nproc-per-node: an int, or cpu, gpu or auto as torchrun."""
    try:
        n = int(value)
    except ValueError:
        if value not in ("cpu", "gpu", "auto"):
            raise argparse.ArgumentTypeError(f"expected an int, cpu, gpu or auto, got {value!r}") from None
        gpus = _gpu_count() if value != "cpu" else 0
        if value == "gpu" and gpus == 0:
            raise argparse.ArgumentTypeError("gpu: no CUDA device is available") from None
        n = gpus or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 process, got {n}")
    return n


def _gpu_count():
    """CUDA devices seen by rustytorch; 0 where it has no CUDA support or no device."""
    try:
        from rustytorch import cuda
    except ImportError:
        return 0
    return cuda.device_count() if cuda.is_available() else 0


def _nnodes(value):
    """--nnodes: an int, or torchrun's MIN:MAX form with MIN == MAX (no elastic membership)."""
    low, _, high = value.partition(":")
    try:
        low, high = int(low), int(high or low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {value!r}") from None
    if low != high:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a range of node counts needs elastic rendezvous, which rtx-run does not have; "
            "give the number of nodes")
    if low < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 node, got {low}")
    return low


def _streams(value):
    """--redirects / --tee: 0-3 for every local rank ({None: bits}), or LOCAL_RANK:0-3,... for some of
    them ({local_rank: bits}); read with _bits."""
    def bits(text):
        if text not in ("0", "1", "2", "3"):
            raise argparse.ArgumentTypeError(f"expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), got {text!r}")
        return int(text)
    if ":" not in value:
        return {None: bits(value)}
    spec = {}
    for item in value.split(","):
        rank, _, b = item.partition(":")
        if not rank.isdigit():
            raise argparse.ArgumentTypeError(f"expected LOCAL_RANK:VALUE pairs, got {item!r}")
        spec[int(rank)] = bits(b)
    return spec


def _bits(spec, local_rank):
    return spec.get(local_rank, spec.get(None, 0))


def parser():
    p = argparse.ArgumentParser(
        prog="rtx-run", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=_nproc, default=1, metavar="N",
                   help="processes on this node: an int, cpu (one per core), gpu (one per CUDA device) or auto "
                        "(gpu when there is a device, else cpu); default 1")
    p.add_argument("--nnodes", type=_nnodes, default=1, help="number of nodes (default 1)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0, help="rank of this node, 0..nnodes-1 (default 0)")
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                   help="address of the node running rank 0 (default 127.0.0.1)")
    p.add_argument("--master-port", "--master_port", type=int,
                   help="port of rank 0's store (default: a free port on one node, 29500 on several)")
    p.add_argument("--standalone", action="store_true",
                   help="one node on this machine: 127.0.0.1 and a free port, whatever --master-* say")
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=0,
                   help="restart the whole group up to this many times when a process fails (default 0)")
    p.add_argument("--log-dir", "--log_dir",
                   help="directory of the log files of --redirects and --tee: attempt_K/LOCAL_RANK/{stdout,stderr}.log")
    p.add_argument("-r", "--redirects", type=_streams, default=_streams("0"),
                   help="streams written to the log files instead of the console: 0 none, 1 stdout, 2 stderr, 3 both; "
                        "or LOCAL_RANK:VALUE,... (default 0)")
    p.add_argument("-t", "--tee", type=_streams, default=_streams("0"),
                   help="streams written to the log files as well as the console, same values as --redirects")
    p.add_argument("-m", "--module", action="store_true", help="run the script argument as a module, as python -m")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the script argument as a program, without python in front of it")
    p.add_argument("training_script", help="the script (or module with -m, program with --no-python) each process runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def _free_port(addr):
    """A port nothing listens on at addr (an IPv4 address, a host name, or an IPv6 address, bracketed or not)."""
    addr = addr.strip("[]")
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def resolve(argv=None):
    """Parses and checks the command line; parser errors exit with status 2 naming the option."""
    p = parser()
    args = p.parse_args(argv)
    if args.module and args.no_python:
        p.error("--module and --no-python exclude each other")
    if not 0 <= args.node_rank < args.nnodes:
        p.error(f"--node-rank {args.node_rank}: expected 0..{args.nnodes - 1} for --nnodes {args.nnodes}")
    if args.max_restarts < 0:
        p.error(f"--max-restarts {args.max_restarts}: expected 0 or more")
    if args.standalone and args.nnodes != 1:
        p.error(f"--standalone runs one node, got --nnodes {args.nnodes}")
    if (any(args.redirects.values()) or any(args.tee.values())) and not args.log_dir:
        p.error("--redirects and --tee write into --log-dir: give it")
    if args.standalone:
        args.master_addr = "127.0.0.1"
    if args.standalone or (args.master_port is None and args.nnodes == 1):
        try:
            args.master_port = _free_port(args.master_addr)
        except OSError as e:
            p.error(f"--master-addr {args.master_addr}: no free port found there ({e})")
    elif args.master_port is None:
        args.master_port = 29500
    if args.no_python:
        if not shutil.which(args.training_script):
            p.error(f"{args.training_script}: no such program, or not executable")
    elif not args.module and not os.path.isfile(args.training_script):
        p.error(f"{args.training_script}: no such file")
    return args


def command(args):
    """The command line every process runs (torchrun's: python -u [-m] script args)."""
    if args.no_python:
        return [args.training_script, *args.training_script_args]
    python = os.environ.get("PYTHON_EXEC", sys.executable)
    return [python, "-u", *(["-m"] if args.module else []), args.training_script, *args.training_script_args]


def environment(args, local_rank, restart):
    """The environment of the process of local_rank: the launcher's plus the rendezvous variables."""
    n, world = args.nproc_per_node, args.nproc_per_node * args.nnodes
    rank = args.node_rank * n + local_rank
    env = dict(os.environ)
    if n > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port),
               RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local_rank), LOCAL_WORLD_SIZE=str(n),
               GROUP_RANK=str(args.node_rank), GROUP_WORLD_SIZE=str(args.nnodes),
               ROLE_NAME="default", ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world),
               TORCHELASTIC_RESTART_COUNT=str(restart), TORCHELASTIC_MAX_RESTARTS=str(args.max_restarts))
    return env


def _die_with(parent):
    """A function for each child to run before exec: on Linux it has the child SIGKILLed when the
    launcher dies, even by SIGKILL; elsewhere None."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def arm():
        prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:     # the launcher died before prctl
            os._exit(1)
    return arm


def _running_groups(pgids):
    """The process groups among pgids with a member still running. Zombies do not count: the init of
    a container may never reap what a process left behind."""
    if not os.path.isdir("/proc"):
        return {g for g in pgids if _killpg(g, 0)}
    running = set()
    for entry in os.scandir("/proc"):
        try:
            with open(os.path.join(entry.path, "stat"), "rb") as f:
                state, _, pgid = f.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):  # not a process, or one that has just exited
            continue
        if state != b"Z" and int(pgid) in pgids:
            running.add(int(pgid))
    return running


def _killpg(pgid, signum):
    """Sends signum to the process group; False when no process is left in it."""
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _signame(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class _Console:
    """The launcher's stdout and stderr, written one whole line at a time by the reader threads."""
    lock = threading.Lock()

    @classmethod
    def write(cls, stream, data):
        with cls.lock:
            try:
                stream.write(data)
                stream.flush()
            except (OSError, ValueError):  # a closed console: keep draining the pipes
                pass


class _Worker:
    """One process of the group: its rank, its Popen and the threads copying its output."""

    def __init__(self, args, local_rank, restart):
        self.local_rank = local_rank
        self.rank = args.node_rank * args.nproc_per_node + local_rank
        self.tail = collections.deque(maxlen=TAIL_LINES)
        self.readers = []
        self.proc = subprocess.Popen(command(args), env=environment(args, local_rank, restart),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=_die_with(os.getpid()))

    def copy_output(self, args, log_dir):
        """Starts the threads copying stdout and stderr, line by line, to the console and the log files.
        (Started once every process of the group is running: no thread is running while the launcher forks.)"""
        prefix = f"[rank {self.rank}]: ".encode()
        for bit, pipe, console, name in ((STDOUT, self.proc.stdout, sys.stdout.buffer, "stdout"),
                                         (STDERR, self.proc.stderr, sys.stderr.buffer, "stderr")):
            redirected, teed = _bits(args.redirects, self.local_rank) & bit, _bits(args.tee, self.local_rank) & bit
            log = None
            if redirected or teed:
                directory = os.path.join(log_dir, str(self.local_rank))
                os.makedirs(directory, exist_ok=True)
                log = open(os.path.join(directory, name + ".log"), "wb")
            t = threading.Thread(target=self._copy, args=(pipe, prefix, None if redirected else console, log,
                                                          bit == STDERR), daemon=True)
            t.start()
            self.readers.append(t)

    def _copy(self, pipe, prefix, console, log, keep_tail):
        with pipe:
            for line in iter(pipe.readline, b""):
                if not line.endswith(b"\n"):
                    line += b"\n"
                if keep_tail:
                    self.tail.append(line.decode(errors="replace").rstrip("\n"))
                if console is not None:
                    _Console.write(console, prefix + line)
                if log is not None:
                    log.write(line)
                    log.flush()
        if log is not None:
            log.close()

    def signal(self, signum):
        """Sends signum to the process and everything it started (its process group)."""
        _killpg(self.proc.pid, signum)

    def describe(self):
        code = self.proc.returncode
        how = f"was killed by {_signame(-code)} (exit code {code})" if code < 0 else f"exited with code {code}"
        return f"rank {self.rank} (local rank {self.local_rank}, pid {self.proc.pid}) {how}"


class _Launcher:
    """Runs the group, restarts it on failure, forwards the launcher's signals to it."""

    def __init__(self, args):
        self.args = args
        self.workers = []
        self.signals = []    # appended by the handler, forwarded by the main loop
        self.stopping = None  # the first signal received

    def _on_signal(self, signum, frame):
        self.signals.append(signum)

    def _forward_signals(self):
        while self.signals:
            signum = self.signals.pop(0)
            first = self.stopping is None
            self.stopping = self.stopping or signum
            for w in self.workers:
                w.signal(signum if first else signal.SIGKILL)  # a second signal: kill now

    def _stop(self, signum):
        """Sends signum (unless None) to every process group, SIGKILL after GRACE_S to what is left;
        returns once all have exited and their output is copied."""
        if signum is not None:
            for w in self.workers:
                w.signal(signum)
        deadline = time.monotonic() + GRACE_S
        while any([w.proc.poll() is None for w in self.workers]) or \
                _running_groups({w.proc.pid for w in self.workers}):
            self._forward_signals()
            if time.monotonic() > deadline:
                for w in self.workers:
                    w.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        for w in self.workers:
            for t in w.readers:
                t.join(timeout=1.0)  # bounded: a process that left the group may hold the pipe open

    def _attempt(self, restart):
        """Runs the group once; returns the workers that failed (empty when all exited with 0)."""
        self.workers = []
        try:
            for local_rank in range(self.args.nproc_per_node):
                self.workers.append(_Worker(self.args, local_rank, restart))
        except OSError as e:
            self._stop(signal.SIGTERM)
            raise SystemExit(f"rtx-run: cannot start {' '.join(command(self.args))}: {e}") from None
        log_dir = self.args.log_dir and os.path.join(self.args.log_dir, f"attempt_{restart}")
        for w in self.workers:
            w.copy_output(self.args, log_dir)
        while True:
            self._forward_signals()
            codes = [w.proc.poll() for w in self.workers]
            failed = [w for w, c in zip(self.workers, codes) if c not in (None, 0)]
            if self.stopping is not None or failed or all(c == 0 for c in codes):
                break
            time.sleep(POLL_S)
        # After a forwarded signal the processes get the grace period to act on it; otherwise
        # SIGTERM stops the others (or what the finished processes left running).
        self._stop(None if self.stopping is not None else signal.SIGTERM)
        return failed

    def _report(self, failed):
        for w in failed:
            lines = "".join(f"\n    {line}" for line in w.tail)
            print(f"rtx-run: {w.describe()}" + (f"; the last lines of its stderr:{lines}" if lines else ""),
                  file=sys.stderr, flush=True)

    def run(self):
        """The launcher's exit status; a signal that stopped the group is raised again on the launcher."""
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED}
        try:
            for restart in range(self.args.max_restarts + 1):
                if self.stopping is not None:
                    break
                failed = self._attempt(restart)
                if self.stopping is not None:
                    break
                if not failed:
                    return 0
                self._report(failed)
                if restart < self.args.max_restarts:
                    print(f"rtx-run: restarting the group of {len(self.workers)} processes "
                          f"(restart {restart + 1} of {self.args.max_restarts})", file=sys.stderr, flush=True)
                    self._forward_signals()
            else:
                print(f"rtx-run: the job failed after {self.args.max_restarts} restart(s)", file=sys.stderr,
                      flush=True)
                return 1
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        print(f"rtx-run: stopped by {_signame(self.stopping)}", file=sys.stderr, flush=True)
        signal.signal(self.stopping, signal.SIG_DFL)
        os.kill(os.getpid(), self.stopping)
        return 128 + self.stopping  # the shell's status for it, where the signal is blocked


def main(argv=None):
    args = resolve(argv)
    if args.nproc_per_node > 1 and "OMP_NUM_THREADS" not in os.environ:
        print("rtx-run: setting OMP_NUM_THREADS=1 in every process so that they do not overload the machine; "
              "set it yourself to tune it", file=sys.stderr, flush=True)
    raise SystemExit(_Launcher(args).run())


if __name__ == "__main__":
    main()
