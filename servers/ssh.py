"""SSH to other machines (paramiko): connect with checked host keys, stream a command through a
pty, copy files both ways over SFTP. Every failure a user can cause is one SSHError line.

It sits in the core so that both `testbed remote` (drive a testbed VM) and a future hardware mode
(job processes on real servers, started from workloads/) can use it.

Security choices: host keys are checked against known_hosts and an unknown key is refused unless
the caller accepts new keys explicitly (a changed key is always refused); keys come from a file or
from ssh-agent and the default key files, never a password; names read from the remote side are
single safe path components before they become local paths.
"""

from __future__ import annotations

import io
import logging
import os
import select
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import paramiko

from topologies.schema import is_safe_name

LOG = logging.getLogger(__name__)
#: what the user's Ctrl-C becomes in the remote pty: the line discipline turns it into SIGINT for
#: the command's foreground process group, as if the user had pressed Ctrl-C there
INTERRUPT = b"\x03"


class SSHError(RuntimeError):
    """A connection, authentication, host key or transfer problem; the message is one line."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to log in. `None` fields come from the SSH config file, then OpenSSH's defaults."""

    host: str
    port: int | None = None
    user: str | None = None
    key: Path | None = None
    known_hosts: Path = Path("~/.ssh/known_hosts")
    accept_new_host_key: bool = False
    timeout_s: float = 10.0
    ssh_config: Path = Path("~/.ssh/config")

    def resolved(self) -> Endpoint:
        """This endpoint with what ~/.ssh/config says for its host (HostName, Port, User,
        IdentityFile) filled in where the caller gave nothing, so `Host` aliases work as with ssh."""
        cfg_path = self.ssh_config.expanduser()
        cfg = paramiko.SSHConfig.from_path(str(cfg_path)).lookup(self.host) if cfg_path.is_file() else {}
        key = self.key
        if key is None and cfg.get("identityfile"):
            first = Path(cfg["identityfile"][0]).expanduser()
            key = first if first.exists() else None  # OpenSSH also skips a missing default IdentityFile
        return Endpoint(
            host=cfg.get("hostname", self.host),
            port=self.port or int(cfg.get("port", 22)),
            user=self.user or cfg.get("user") or _local_user(),
            key=key,
            known_hosts=self.known_hosts,
            accept_new_host_key=self.accept_new_host_key,
            timeout_s=self.timeout_s,
            ssh_config=self.ssh_config,
        )

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}" if self.user else self.host


def _local_user() -> str:
    import getpass

    return getpass.getuser()


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """RejectPolicy with a message that says what to do, and the key's fingerprint to verify."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise SSHError(
            f"{hostname}: host key not in {self.known_hosts} ({key.get_name()} {key.fingerprint}); verify the "
            "fingerprint on that machine (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then add it "
            "(ssh-keyscan) or pass --accept-new-host-key"
        )


def connect(endpoint: Endpoint) -> paramiko.SSHClient:
    """A logged-in client, or SSHError naming the host and the fix. `endpoint` should be resolved()."""
    ep = endpoint
    if ep.key is not None and not ep.key.expanduser().is_file():
        raise SSHError(f"--key {ep.key}: no such file; give the private key's path")
    known = ep.known_hosts.expanduser()
    client = paramiko.SSHClient()
    system = Path("/etc/ssh/ssh_known_hosts")
    if system.is_file():
        client.load_system_host_keys(str(system))
    if ep.accept_new_host_key and not known.exists():
        known.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        known.touch(mode=0o600)
    if known.exists():
        client.load_host_keys(str(known))  # AutoAddPolicy saves a new key to this file
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy() if ep.accept_new_host_key else _RefuseUnknown(known))
    key = str(ep.key.expanduser()) if ep.key else None
    where = f"{ep.host}:{ep.port}"
    try:
        client.connect(
            ep.host,
            port=ep.port or 22,
            username=ep.user,
            key_filename=key,
            allow_agent=key is None,  # an explicit --key is the only key tried, so a refusal names it
            look_for_keys=key is None,
            timeout=ep.timeout_s,
            banner_timeout=ep.timeout_s,
            auth_timeout=ep.timeout_s,
        )
    except SSHError:
        client.close()
        raise
    except paramiko.BadHostKeyException as err:
        client.close()
        raise SSHError(
            f"{where}: host key CHANGED (now {err.key.get_name()} {err.key.fingerprint}, {known} has "
            f"{err.expected_key.fingerprint}): possibly a man-in-the-middle; if the machine was reinstalled, "
            f"remove the old entry (ssh-keygen -f {known} -R '{ep.host}') and connect again"
        ) from None
    except paramiko.PasswordRequiredException:
        client.close()
        raise SSHError(
            f"{where}: key {ep.key} is passphrase-protected: load it into ssh-agent (ssh-add {ep.key}) and leave "
            "out --key"
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        tried = f"key {ep.key}" if key else "ssh-agent and the default keys (~/.ssh/id_*)"
        raise SSHError(
            f"{where}: authentication failed for user {ep.user} with {tried}; check --user and --key, and that "
            "the public key is in the remote ~/.ssh/authorized_keys"
        ) from None
    except (paramiko.SSHException, ValueError) as err:  # a key file that is no key, a protocol error
        client.close()
        raise SSHError(f"{where}: SSH failed: {_one_line(err)}{_key_hint(ep)}") from None
    except OSError as err:  # refused, no route, timed out, unknown name
        client.close()
        why = _why_unreachable(err)
        raise SSHError(f"{where}: unreachable ({why}); check the address and port, and that sshd runs there") from None
    LOG.debug("connected to %s as %s", where, ep.user)
    return client


def _why_unreachable(err: OSError) -> str:
    if isinstance(err, socket.timeout | TimeoutError):
        return "timed out"
    if isinstance(err, paramiko.ssh_exception.NoValidConnectionsError):  # one error per address tried
        return "; ".join(sorted({e.strerror or _one_line(e) for e in err.errors.values()}))
    return err.strerror or _one_line(err)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _key_hint(ep: Endpoint) -> str:
    return f"; is --key {ep.key} an OpenSSH private key?" if ep.key else ""


def run_streamed(
    client: paramiko.SSHClient,
    command: str,
    out: BinaryIO,
    on_interrupt: Callable[[], None] | None = None,
) -> tuple[int, bool]:
    """Run `command` in a remote pty (progress bars render), copying its output to `out` as it
    comes. The first Ctrl-C (KeyboardInterrupt here) is sent on as Ctrl-C through the pty and the
    command is waited for, so it tears down cleanly; a second one drops the connection (sshd then
    hangs the session up). Returns (exit status, interrupted)."""
    transport = client.get_transport()
    if transport is None:
        raise SSHError("the SSH connection closed before the command could start")
    chan = transport.open_session()
    cols, rows = shutil.get_terminal_size()
    chan.get_pty(term=os.environ.get("TERM", "xterm"), width=cols, height=rows)
    chan.exec_command(command)
    interrupted = False
    while True:
        try:
            _pump(chan, out)
            break
        except KeyboardInterrupt:
            if interrupted:
                chan.close()
                raise
            interrupted = True
            if on_interrupt:
                on_interrupt()
            chan.send(INTERRUPT)
    status = chan.recv_exit_status()
    chan.close()
    return status, interrupted


def _pump(chan: paramiko.Channel, out: BinaryIO) -> None:
    """Copy the channel's output to `out` until the remote side closes it."""
    while True:
        select.select([chan], [], [], 1.0)
        if chan.recv_ready():
            data = chan.recv(65536)
            out.write(data)
            out.flush()
        elif chan.eof_received or chan.closed:
            return


def open_sftp(client: paramiko.SSHClient, host: str) -> paramiko.SFTPClient:
    """The SFTP session files move over; SSHError when the server offers none."""
    try:
        return client.open_sftp()
    except paramiko.SSHException as err:
        raise SSHError(
            f"{host}: no SFTP ({_one_line(err)}); enable it in sshd_config (Subsystem sftp internal-sftp)"
        ) from None


def remote_home(sftp: paramiko.SFTPClient) -> str:
    """The login directory (where a relative remote path starts)."""
    return sftp.normalize(".")


def exists(sftp: paramiko.SFTPClient, path: str) -> bool:
    try:
        sftp.stat(path)
    except OSError:
        return False
    return True


def put_bytes(sftp: paramiko.SFTPClient, data: bytes, path: str) -> None:
    """Write `data` to the remote `path`, making its folders first."""
    makedirs(sftp, str(PurePosixPath(path).parent))
    sftp.putfo(io.BytesIO(data), path)


def makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    done = PurePosixPath("/") if path.startswith("/") else PurePosixPath()
    for part in PurePosixPath(path).parts:
        done = done / part
        if part == "/" or exists(sftp, str(done)):
            continue
        sftp.mkdir(str(done))


def get_tree(sftp: paramiko.SFTPClient, remote: str, local: Path) -> tuple[int, int]:
    """Copy the remote file or folder `remote` to `local` (folders recursively, files overwritten);
    returns (files, bytes). Entries whose names are not one safe path component, and anything
    that is neither a regular file nor a folder (links, devices), are skipped with a warning."""
    attr = sftp.stat(remote)
    if stat.S_ISREG(attr.st_mode or 0):
        local.parent.mkdir(parents=True, exist_ok=True)
        sftp.get(remote, str(local))
        return 1, attr.st_size or 0
    local.mkdir(parents=True, exist_ok=True)
    files = size = 0
    for entry in sftp.listdir_attr(remote):
        mode = entry.st_mode or 0
        if not is_safe_name(entry.filename):
            LOG.warning("%s: skipped %r: not a plain file name", remote, entry.filename)
            continue
        src = f"{remote}/{entry.filename}"
        if stat.S_ISDIR(mode):
            f, b = get_tree(sftp, src, local / entry.filename)
        elif stat.S_ISREG(mode):
            sftp.get(src, str(local / entry.filename))
            f, b = 1, entry.st_size or 0
        else:
            LOG.warning("%s: skipped (not a regular file or folder)", src)
            continue
        files, size = files + f, size + b
    return files, size


class SSHProcess:
    """A command running on another machine, shaped like subprocess.Popen for the callers that only
    read its lines and end it (stdout, poll, wait, returncode, kill).

    It runs in a pty, so stderr arrives merged into stdout (as with stderr=STDOUT) and ending it
    works like a user's: `kill` sends Ctrl-C through the pty (SIGINT to the command), then closes
    the channel, at which sshd hangs the pty up and the command gets SIGHUP: a process blocked in
    native code, where Python never sees the SIGINT, still ends. `pid` is the remote pid when
    `command` ends by exec-ing the process (it is the shell's, printed first)."""

    #: what the remote shell prints first, so the remote pid is known
    PID_MARK = "psnet-pid "

    def __init__(self, client: paramiko.SSHClient, command: str, label: str) -> None:
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            raise SSHError(f"{label}: the SSH connection is closed; cannot start {command.split()[0]}")
        self.label = label
        self.returncode: int | None = None
        self._chan = transport.open_session()
        self._chan.get_pty(term="dumb", width=500, height=24)
        self._chan.exec_command(f"echo {self.PID_MARK}$$; {command}")
        self._out = self._chan.makefile("r")
        first = self._out.readline()
        self.pid: int | None = int(first.split()[-1]) if first.startswith(self.PID_MARK) else None
        self.stdout = self._lines("" if self.pid is not None else first)

    def _lines(self, first: str) -> Iterator[str]:
        """The command's output lines (pty line ends turned back into "\\n")."""
        if first:
            yield first.replace("\r\n", "\n")
        for line in self._out:
            yield line.replace("\r\n", "\n")

    def poll(self) -> int | None:
        if self.returncode is None and self._chan.exit_status_ready():
            self.returncode = self._chan.recv_exit_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; subprocess.TimeoutExpired after `timeout` seconds, as Popen.wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if self._chan.closed and not self._chan.exit_status_ready():
                self.returncode = -1  # closed before it reported a status (killed, connection gone)
                break
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.label, timeout or 0.0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def kill(self, grace_s: float = 2.0) -> None:
        """Ctrl-C through the pty, up to `grace_s` for it to end, then close the channel (SIGHUP)."""
        if self.poll() is not None or self._chan.closed:
            return
        try:
            self._chan.send(INTERRUPT)
        except (OSError, paramiko.SSHException):
            pass
        deadline = time.monotonic() + grace_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.returncode is None:
            self._chan.close()


def run_text(client: paramiko.SSHClient, command: str, timeout_s: float = 10.0) -> str:
    """A short command's stdout (no pty), e.g. reading /proc; SSHError if it fails."""
    try:
        _, out, err = client.exec_command(command, timeout=timeout_s)
        text = out.read().decode(errors="replace")
        status = out.channel.recv_exit_status()
    except (OSError, paramiko.SSHException) as e:
        raise SSHError(f"{command.split()[0]} over SSH failed: {_one_line(e)}") from None
    if status != 0:
        raise SSHError(
            f"{command.split()[0]} over SSH exited {status}: {_one_line(err.read().decode(errors='replace'))}"
        )
    return text
