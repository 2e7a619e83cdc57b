"""Start psjob tasks forked from one process that has imported TensorFlow already.

Why: a run's start-up is CPU-bound on this machine's two cores, and much of it is the import.
`import tensorflow` costs ~4 s of CPU per process (3.6 s user + 0.6 s system, measured here on
2026-11-23), and a Fig. 13 run starts eight (2 PSs, 6 workers): in the fresh-clone replay of that
day, start-up was 15.4 of the sweep's 29.7 min of runs (the workers of a PSNet VGG-16 run were
ready 22-29 s after it began, for 22 s of steps). The fork server (`python -m tfjob.forkserver`,
started on the first task) imports TensorFlow once (tfjob.task_preload) and forks every task
from there; it lives as long as the process that runs the experiments, so a sweep of many runs
pays the import once.

A forked task still runs as its Mininet host: before psjob's main runs it enters the host
shell's network namespace (and its mount namespace where the host has one of its own), as
`mnexec -a PID` does for `Host.popen`, and starts a session of its own (`mnexec -d`). Its stdout
and stderr go to one pipe, read as text lines like `Popen(..., stdout=PIPE, stderr=STDOUT,
text=True)`'s; its exit code comes back from the server, which reaps it; its command line (what
`ps` and `pgrep -f tfjob.psjob` see) reads as the one it would have had (setproctitle, one
string). The server ends when the process that started it does (its socket closes) and every task
dies with the server (PR_SET_PDEATHSIG), so a SIGKILLed run leaves no task serving on.

A worker's graph is built here too, once per job: at the first worker task of a job the server
builds that worker's graph (psjob.build_template) and forks every worker of the job from it; each
sets its own device and batch on it (psjob.adopt_template, psjob.GraphTemplate says why). Every
child reseeds TensorFlow's random generator first, which the build started (tfjob.tf_rng).
Workers come from a server of their own, which builds the graphs; PSs from one that never builds:
a PS forked from a process that had built a graph hung at its first step (seen here on
2026-11-23: every worker of the job waiting for its sync token, the chief's aggregation waiting
for gradients), whichever job it was, while workers forked after a build ran. So a testbed
process that runs jobs has two servers. `PSNET_SHARED_GRAPH=0` has every worker build its own
(and one server forks every task).

Why not multiprocessing's fork server: it imports the parent's main script again in the server
and in every child (a user's script without a main guard would run twice), and it hands every
child the descriptor that keeps the server alive, so a task outlives a killed run until its
deadline. Python 3.11 has no os.setns (3.12 has), hence a few lines of ctypes.
`PSNET_FORKSERVER=0` starts every task as an interpreter of its own instead (Host.popen).
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import IO, Any

from tfjob import bindshim, tf_rng

#: 0 starts tasks the old way: one interpreter (and one TensorFlow import) each
ENV_SWITCH = "PSNET_FORKSERVER"
#: 0: every forked worker builds its own graph (psjob.GraphTemplate says why they share one)
SHARED_GRAPH_SWITCH = "PSNET_SHARED_GRAPH"
PSJOB = "tfjob.psjob"
CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
PR_SET_PDEATHSIG = 1
#: seconds a start waits for the server (the first waits for its TensorFlow import too, a job's
#: first worker for its graph build: ~12 s of CPU for ResNet110)
START_TIMEOUT_S = 120.0
MAX_MSG = 1 << 20


class ForkServerError(RuntimeError):
    """The fork server could not start a task (the message says why)."""


def argv_words(cmdline: list[str]) -> list[str]:
    """A process's command line (psutil's cmdline()) as words: a task forked here shows its argv
    as one title string (setproctitle, _run_task), an exec'd process as separate arguments."""
    return " ".join(cmdline).split()


def enabled(argv: list[str]) -> bool:
    """Whether a task's command line is started by the fork server: a psjob task
    (`python -m tfjob.psjob ...`), unless PSNET_FORKSERVER=0."""
    return os.environ.get(ENV_SWITCH, "1") != "0" and argv[1:3] == ["-m", PSJOB]


# ---------------------------------------------------------------- the runner's side


class ForkedTask:
    """A task forked from the server: subprocess.Popen's reading and ending part
    (tfjob.hosts.HostProcess)."""

    def __init__(self, pid: int, argv: list[str], stdout: IO[str]) -> None:
        self.pid: int | None = pid
        self.args = argv
        self.stdout = stdout
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _end(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None and self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class ForkServer:
    """The server process and the one socket to it (started once per process, on first use)."""

    _current: dict[bool, ForkServer] = {}
    _create = threading.Lock()

    @classmethod
    def get(cls, builds_graphs: bool) -> ForkServer:
        with cls._create:
            s = cls._current.get(builds_graphs)
            if s is None or s.owner != os.getpid() or s.proc.poll() is not None:
                s = cls._current[builds_graphs] = cls(builds_graphs)
            return s

    def __init__(self, builds_graphs: bool) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        from emulation import registry

        try:
            env = bindshim.with_preload(dict(os.environ))  # every task it forks binds its own address only
        except bindshim.BindShimError as err:
            ours.close()
            theirs.close()
            raise ForkServerError(str(err)) from None
        # the server outlives the run it was started in (it serves the next runs of this process):
        # not of that run, so no run's clean-up takes it; its tasks join their own run's cgroup
        for key in (registry.RUN_ENV, registry.CGROUP_ENV):
            env.pop(key, None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno()), str(os.getpid())]
            + ["graphs" if builds_graphs else "plain"],
            env=env,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # TensorFlow's import banner; the server's errors come on the socket
        )
        theirs.close()
        registry.leave_run_cgroup(self.proc.pid)  # before its first fork: it has no task yet
        self.sock = ours
        self._starting = threading.Lock()
        self._replies: list[dict] = []
        self._reply = threading.Condition()
        self._tasks: dict[int, ForkedTask] = {}
        self._codes: dict[int, int] = {}  # exits reported before their task was registered
        self._gone = ""
        threading.Thread(target=self._read, name="forkserver-reader", daemon=True).start()

    def start(self, ns_pid: int, argv: list[str], env: dict[str, str], cwd: str) -> ForkedTask:
        r, w = os.pipe()
        request = {"ns_pid": ns_pid, "args": argv[3:], "env": env, "cwd": cwd}
        with self._starting:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [w])
            except OSError as err:
                os.close(r)
                raise ForkServerError(
                    f"the fork server is gone ({err}); set {ENV_SWITCH}=0 to start tasks without it"
                ) from None
            finally:
                os.close(w)
            reply = self._next_reply()
            if "pid" not in reply:
                os.close(r)
                raise ForkServerError(f"the fork server could not start {PSJOB}: {reply.get('error', reply)}")
            task = ForkedTask(reply["pid"], argv, open(r, encoding="utf-8", errors="replace"))  # noqa: SIM115
            with self._reply:
                self._tasks[task.pid] = task
                if task.pid in self._codes:
                    task._end(self._codes.pop(task.pid))
        return task

    def _next_reply(self) -> dict:
        deadline = time.monotonic() + START_TIMEOUT_S
        with self._reply:
            while not self._replies:
                if self._gone:
                    return {"error": self._gone}
                if not self._reply.wait(deadline - time.monotonic()):
                    return {"error": f"no answer in {START_TIMEOUT_S:g} s"}
            return self._replies.pop(0)

    def _read(self) -> None:
        """Replies to starts, and exit codes of tasks (the server reaps them)."""
        while True:
            try:
                data = self.sock.recv(MAX_MSG)
            except OSError:
                data = b""
            with self._reply:
                if not data:  # the server ended: its tasks died with it (PR_SET_PDEATHSIG)
                    self._gone = f"the fork server ended (exit code {self.proc.wait()})"
                    for task in self._tasks.values():
                        if task.returncode is None:
                            task._end(-signal.SIGKILL)
                    self._reply.notify_all()
                    return
                msg = json.loads(data)
                if "exit" in msg:
                    task = self._tasks.get(msg["exit"])
                    if task is None:
                        self._codes[msg["exit"]] = msg["code"]
                    else:
                        task._end(msg["code"])
                else:
                    self._replies.append(msg)
                    self._reply.notify_all()


def start_task(ns_pid: int, argv: list[str], env: dict[str, str], cwd: str) -> ForkedTask:
    """Start `argv` (python -m tfjob.psjob ...) as the host whose shell is `ns_pid`."""
    return ForkServer.get(builds_graphs=shares_graph(argv, env)).start(ns_pid, argv, env, cwd)


def shares_graph(argv: list[str], env: dict[str, str]) -> bool:
    """Whether a task is a worker to fork from the server that builds worker graphs (the other
    server forks PSs: see the module docstring), unless PSNET_SHARED_GRAPH=0."""
    if env.get(SHARED_GRAPH_SWITCH, os.environ.get(SHARED_GRAPH_SWITCH, "1")) == "0":
        return False
    return "--job" in argv and argv[argv.index("--job") + 1 :][:1] == ["worker"]


# ---------------------------------------------------------------- the server


def serve(fd: int, parent: int, builds_graphs: bool) -> None:
    """Import TensorFlow once, then fork a task per request until the runner goes."""
    libc = ctypes.CDLL(None, use_errno=True)
    if os.getppid() != parent:  # the runner is gone already
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    sock = socket.socket(fileno=fd)
    try:
        import tfjob.task_preload  # noqa: F401
    except Exception:  # every start is then answered with why
        failed = traceback.format_exc(limit=3)
    else:
        failed = ""
    template = None  # the last worker graph built here (psjob.GraphTemplate)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is wake_r:
                os.read(wake_r, 4096)
                _reap(sock)
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, MAX_MSG, 1)
            except OSError:
                data = b""
            if not data:  # the runner ended (its end closes with the process, whichever thread started us)
                os._exit(0)
            if failed:
                _send(sock, {"error": f"importing TensorFlow failed: {failed}"})
                for f in fds:
                    os.close(f)
                continue
            req = json.loads(data)
            template = _template_for(template, req) if builds_graphs else None
            pid = os.fork()
            if pid == 0:
                sel.close()
                _child(sock, (wake_r, wake_w), req, fds[0], libc, template)
            os.close(fds[0])
            _send(sock, {"pid": pid})


def _template_for(template: Any, req: dict) -> Any:
    """The worker graph for this request's task (psjob.GraphTemplate), built here unless the last
    one built is its job's already; None when the build failed (the task builds its own then,
    and reports what fails)."""
    from tfjob import psjob

    if tf_rng.slot() is None:  # the children could not be given random streams of their own
        return None
    if template is not None and template.key == psjob.template_key(req["args"]):
        return template
    try:
        return psjob.build_template(req["args"]) or template
    except Exception:
        return None


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        pass  # the runner is gone; so are we, once the next read sees it


def _child(sock: socket.socket, wake: tuple[int, int], req: dict, out: int, libc: ctypes.CDLL, template: Any) -> None:
    """In the forked child: become the host's process, then run psjob's main (it ends the process)."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        sock.close()
        for f in wake:
            os.close(f)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        tf_rng.reseed()  # its own session handles and step ids, not its siblings' (tfjob.tf_rng)
        _run_task(libc, req["ns_pid"], req["args"], req["env"], req["cwd"], template)
    except BaseException:  # nothing may return into the server's loop
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _run_task(libc: ctypes.CDLL, ns_pid: int, args: list[str], env: dict[str, str], cwd: str, template: Any) -> None:
    import setproctitle

    _enter(libc, ns_pid, "net", CLONE_NEWNET)
    if os.stat(f"/proc/{ns_pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino:
        _enter(libc, ns_pid, "mnt", CLONE_NEWNS)
    os.setsid()
    setproctitle.setproctitle(" ".join([sys.executable, "-m", PSJOB, *args]))
    os.environ.clear()
    os.environ.update(env)
    _join_cgroup(env.get("PSNET_RUN_CGROUP", ""))
    os.chdir(cwd)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's own)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
    from tfjob import psjob

    psjob.IMPORTED_UNIX_S = time.time()  # its start-up counts from the fork, as from an exec
    if template is not None and template.key == psjob.template_key(args):
        psjob.TEMPLATE = template
    sys.argv = [psjob.__file__, *args]
    psjob.main(args)


def _join_cgroup(cgroup: str) -> None:
    """Join the cgroup of the run that started this task (emulation.registry.CGROUP_ENV), as a
    process the run forked would be in it: the run's clean-up then finds the task by it. The
    server itself is in none (it outlives runs)."""
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass  # the run's end kills its tasks anyway, and they die with the server


def _enter(libc: ctypes.CDLL, ns_pid: int, kind: str, flag: int) -> None:
    fd = os.open(f"/proc/{ns_pid}/ns/{kind}", os.O_RDONLY)
    try:
        if libc.setns(fd, flag) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into the {kind} namespace of pid {ns_pid}: {os.strerror(err)}")
    finally:
        os.close(fd)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "graphs")
