"""SSH to other machines (paramiko): connect with checked host keys, stream a command through a
pty, copy files both ways over SFTP. Every failure a user can cause is one SSHError line.

It sits in the core so that both `testbed remote` (drive a testbed VM) and a future hardware mode
(job processes on real servers, started from workloads/) can use it.

Security choices: host keys are checked against known_hosts and an unknown key is refused unless
the caller accepts new keys explicitly (a changed key is always refused, and so is a key marked
@revoked); keys come from a file or from ssh-agent and the default key files, never a password;
names read from the remote side are single safe path components before they become local paths.

~/.ssh/config is read with paramiko's SSHConfig, as OpenSSH reads it for these keywords: HostName,
Port, User, IdentityFile, ProxyJump (each hop's own config applies; the target is reached through
a direct-tcpip channel of the last hop) and ServerAliveInterval (the keepalive of connections that
stay open through an hour-long replay; KEEPALIVE_S when not set). ProxyCommand is refused in one
line. known_hosts is read line by line here rather than by paramiko's HostKeys.load, which stops
at the first `@cert-authority` line; a new key is appended as one line, never by paramiko's
save_host_keys, which rewrites the file without its comments, markers and unknown key types.
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
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from topologies.schema import is_safe_name

LOG = logging.getLogger(__name__)
#: seconds of silence after which a connection sends a keepalive (OpenSSH's ServerAliveInterval;
#: ~/.ssh/config's value wins): NAT and firewall state expire on idle TCP connections, and a
#: replay keeps its connection open for an hour or more
KEEPALIVE_S = 30.0
#: ProxyJump hops followed before a chain is taken for a loop in the config
MAX_JUMPS = 8
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
    #: "[user@]host[:port],..." as ProxyJump takes it; None: the config's, if any
    proxy_jump: str | None = None
    keepalive_s: float | None = None

    def resolved(self) -> Endpoint:
        """This endpoint with what ~/.ssh/config says for its host (HostName, Port, User,
        IdentityFile, ProxyJump, ServerAliveInterval) filled in where the caller gave nothing, so
        `Host` aliases work as with ssh; SSHError for what is not supported (ProxyCommand)."""
        cfg_path = self.ssh_config.expanduser()
        try:
            cfg = paramiko.SSHConfig.from_path(str(cfg_path)).lookup(self.host) if cfg_path.is_file() else {}
        except (OSError, ValueError, paramiko.SSHException) as err:
            raise SSHError(f"{cfg_path}: cannot read it ({_one_line(err)}); fix it or pass --ssh-config") from None
        if cfg.get("proxycommand", "none").lower() != "none":
            raise SSHError(
                f"{cfg_path}: Host {self.host}: ProxyCommand is not supported; write the hop as ProxyJump "
                "[user@]host[:port] instead"
            )
        key = self.key
        if key is None and cfg.get("identityfile"):
            first = Path(cfg["identityfile"][0]).expanduser()
            key = first if first.exists() else None  # OpenSSH also skips a missing default IdentityFile
        jump = self.proxy_jump if self.proxy_jump is not None else cfg.get("proxyjump")
        try:
            port = self.port or int(cfg.get("port", 22))
            alive = self.keepalive_s or float(cfg.get("serveraliveinterval", KEEPALIVE_S))
        except ValueError as err:
            raise SSHError(f"{cfg_path}: Host {self.host}: {_one_line(err)}; give a number") from None
        return Endpoint(
            host=cfg.get("hostname", self.host),
            port=port,
            user=self.user or cfg.get("user") or _local_user(),
            key=key,
            known_hosts=self.known_hosts,
            accept_new_host_key=self.accept_new_host_key,
            timeout_s=self.timeout_s,
            ssh_config=self.ssh_config,
            proxy_jump=None if jump is None or jump.lower() == "none" else jump,
            keepalive_s=alive,
        )

    def hop(self, spec: str, jumps: str | None) -> Endpoint:
        """The ProxyJump hop `spec` ([user@]host[:port]) as an endpoint, resolved through the same
        config (its own ProxyJump too, unless `jumps` says which hops come before it), with this
        endpoint's known_hosts, host key policy and timeout."""
        user, _, hostport = spec.rpartition("@")
        host, port = hostport, None
        if hostport.startswith("["):  # [v6-address]:port
            host, _, rest = hostport[1:].partition("]")
            port = rest[1:] or None
        elif hostport.count(":") == 1:
            host, port = hostport.split(":")
        if not host:
            raise SSHError(f"ProxyJump {spec!r}: no host; write [user@]host[:port]")
        try:
            port_no = int(port) if port else None
        except ValueError:
            raise SSHError(f"ProxyJump {spec!r}: port {port!r} is not a number; write [user@]host[:port]") from None
        return Endpoint(
            host=host,
            port=port_no,
            user=user or None,
            known_hosts=self.known_hosts,
            accept_new_host_key=self.accept_new_host_key,
            timeout_s=self.timeout_s,
            ssh_config=self.ssh_config,
            proxy_jump=jumps,
        ).resolved()

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


class _AppendNew(paramiko.MissingHostKeyPolicy):
    """Trust a host key not yet known (--accept-new-host-key) and add it to known_hosts as one
    appended line, as OpenSSH's StrictHostKeyChecking=accept-new does: every line already there
    (comments, @cert-authority and @revoked lines, hashed names, key types paramiko cannot read)
    stays byte for byte."""

    def __init__(self, known_hosts: Path, revoked: list[paramiko.PKey]) -> None:
        self.known_hosts = known_hosts
        self.revoked = revoked

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        _refuse_revoked(hostname, key, self.revoked, self.known_hosts)
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with self.known_hosts.open("ab") as f:  # O_APPEND: one write at the end, nothing rewritten
            if f.tell() > 0 and not _ends_with_newline(self.known_hosts):
                line = "\n" + line
            f.write(line.encode())
        client.get_host_keys().add(hostname, key.get_name(), key)
        LOG.warning("%s: new host key %s %s added to %s", hostname, key.get_name(), key.fingerprint, self.known_hosts)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def load_known_hosts(keys: paramiko.HostKeys, path: Path) -> list[paramiko.PKey]:
    """Add the plain and hashed host lines of an OpenSSH known_hosts file to `keys`; returns the
    keys of its @revoked lines. Comments, @cert-authority lines (paramiko checks no host
    certificates: such a host is unknown here) and lines paramiko cannot parse (key types it does
    not know) are skipped, not fatal: paramiko's own HostKeys.load raises on the first marker."""
    revoked: list[paramiko.PKey] = []
    for lineno, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        marker = ""
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            line = line.strip()
            if marker != "@revoked":
                continue
        try:
            entry = HostKeyEntry.from_line(line, lineno)
        except (InvalidHostKey, ValueError, paramiko.SSHException):
            entry = None
        if entry is None:
            LOG.debug("%s:%d: skipped (not a host key paramiko reads)", path, lineno)
            continue
        if marker == "@revoked":
            revoked.append(entry.key)
            continue
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)
    return revoked


def _refuse_revoked(hostname: str, key: paramiko.PKey, revoked: list[paramiko.PKey], known: Path) -> None:
    if any(key == r for r in revoked):
        raise SSHError(
            f"{hostname}: host key {key.get_name()} {key.fingerprint} is marked @revoked in {known}: refused; ask "
            "that machine's administrator for its new key"
        )


class _Client(paramiko.SSHClient):
    """An SSHClient that also closes the jump hosts' connections it was reached through."""

    def __init__(self) -> None:
        super().__init__()
        self.jumps: list[paramiko.SSHClient] = []

    def close(self) -> None:
        super().close()
        for j in reversed(self.jumps):
            j.close()
        self.jumps.clear()


def connect(endpoint: Endpoint, _hops: int = 0) -> paramiko.SSHClient:
    """A logged-in client, or SSHError naming the host and the fix. `endpoint` should be resolved().
    Through ProxyJump: the last hop is connected first (itself through the hops before it, or its
    own ProxyJump), and the target reached over a direct-tcpip channel of that connection."""
    ep = endpoint
    if ep.key is not None and not ep.key.expanduser().is_file():
        raise SSHError(f"--key {ep.key}: no such file; give the private key's path")
    if _hops > MAX_JUMPS:
        raise SSHError(f"{ep.host}: ProxyJump chain longer than {MAX_JUMPS} hops; is there a loop in {ep.ssh_config}?")
    sock = None
    jumps: list[paramiko.SSHClient] = []
    if ep.proxy_jump:
        hops = [h.strip() for h in ep.proxy_jump.split(",") if h.strip()]
        before = ",".join(hops[:-1]) or None
        jump = connect(ep.hop(hops[-1], before), _hops + 1)
        jumps.append(jump)
        try:
            sock = jump.get_transport().open_channel(  # type: ignore[union-attr]
                "direct-tcpip", (ep.host, ep.port or 22), ("127.0.0.1", 0), timeout=ep.timeout_s
            )
        except (paramiko.SSHException, OSError) as err:
            jump.close()
            raise SSHError(
                f"{ep.host}:{ep.port}: unreachable through ProxyJump {hops[-1]} ({_one_line(err)}); check the "
                "address, and that the jump host may forward (AllowTcpForwarding)"
            ) from None
    try:
        client = _connect_one(ep, sock)
    except BaseException:
        for j in jumps:
            j.close()
        raise
    client.jumps = jumps
    return client


def _connect_one(ep: Endpoint, sock: paramiko.Channel | None) -> _Client:
    known = ep.known_hosts.expanduser()
    client = _Client()
    revoked: list[paramiko.PKey] = []
    system = Path("/etc/ssh/ssh_known_hosts")
    if system.is_file():
        revoked += load_known_hosts(client.get_host_keys(), system)
    if ep.accept_new_host_key and not known.exists():
        known.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        known.touch(mode=0o600)
    if known.exists():
        revoked += load_known_hosts(client.get_host_keys(), known)
    client.set_missing_host_key_policy(_AppendNew(known, revoked) if ep.accept_new_host_key else _RefuseUnknown(known))
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
            sock=sock,
        )
        transport = client.get_transport()
        if transport is not None:
            _refuse_revoked(where, transport.get_remote_server_key(), revoked, known)
            transport.set_keepalive(int(max(1, round(ep.keepalive_s or KEEPALIVE_S))))
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
    LOG.debug("connected to %s as %s%s", where, ep.user, f" through {ep.proxy_jump}" if ep.proxy_jump else "")
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
