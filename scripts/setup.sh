#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine for psnet-testbed (run as root):
# apt packages, Open vSwitch started (userspace datapath: this kernel has no OVS module),
# and an isolated venv in .venv with Debian's Mininet linked in and the pinned PyPI packages.
# A second run on a ready machine only checks, and finishes in seconds.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
venv="$top/.venv"
apt_pkgs=(mininet openvswitch-switch openssh-server iperf3 ethtool python3-venv iproute2 iputils-ping procps openmpi-bin python3-mpi4py python3-simgrid)

log() { printf 'setup: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (sudo scripts/setup.sh): Mininet and OVS need it" >&2
  exit 1
fi

missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing apt packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# ovs-vswitchd sends on every switch-side port through one AF_PACKET socket; packets waiting in
# the switch-side HTB queues are charged to its send buffer, and when it is full ovs-vswitchd
# drops them without counting them anywhere (emulation/datapath.py). The socket takes
# net.core.wmem_default when the daemon creates it, so raise that first (32 MiB: ~14 full
# queues of 1000 frames) and keep it across reboots. It is the default of every new socket that
# does not set its own (TCP does: tcp_wmem); wmem_max, the cap for SO_SNDBUF, is left alone.
sndbuf=33554432
# Receiving is the mirror image: each port's AF_PACKET receive socket is made when Mininet adds
# the port and takes net.core.rmem_default (208 KB); a burst from several senders while the one
# datapath thread is busy overflows it, again silently (`ss -0` shows the drops). 8 MiB per port
# absorbs an incast of a scheme's mesh without drops (bench_schemes: 2,373 -> 0 on leafspine-2rack).
rcvbuf=8388608
ovs_ctl=/usr/share/openvswitch/scripts/ovs-ctl
if [ "$(sysctl -n net.core.wmem_default)" -lt "$sndbuf" ]; then
  log "net.core.wmem_default -> $sndbuf (room for ovs-vswitchd's switch-side queues)"
  sysctl -qw net.core.wmem_default="$sndbuf"
fi
if [ "$(sysctl -n net.core.rmem_default)" -lt "$rcvbuf" ]; then
  log "net.core.rmem_default -> $rcvbuf (room in ovs-vswitchd's per-port receive sockets)"
  sysctl -qw net.core.rmem_default="$rcvbuf"
fi
sysctl_conf=/etc/sysctl.d/60-psnet-testbed.conf
if ! grep -qsx "net.core.rmem_default = $rcvbuf" "$sysctl_conf"; then
  printf '# psnet-testbed: room in ovs-vswitchd'"'"'s send socket for switch-side queues, and in its
# per-port receive sockets for bursts
net.core.wmem_default = %s
net.core.rmem_default = %s
' \
    "$sndbuf" "$rcvbuf" > "$sysctl_conf"
fi

if ! ovs-vsctl --timeout=2 show >/dev/null 2>&1; then
  log "starting Open vSwitch"
  "$ovs_ctl" --system-id=random --no-monitor start >/dev/null 2>&1 || true
  ovs-vsctl --timeout=5 show >/dev/null || { echo "setup: Open vSwitch did not start" >&2; exit 1; }
fi

# Debian's interpreter, since apt's Mininet module is built for it; isolated venv (not
# --system-site-packages: Debian's old cryptography breaks paramiko/eventlet after TF).
py=/usr/bin/python3
stamp="$venv/.requirements.sha"
want=$(cat "$top/requirements.txt" "$top/setup.py" | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ]; then
  log "creating venv $venv"
  "$py" -m venv "$venv"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -sfn /usr/lib/python3/dist-packages/mininet "$site/mininet"
# Open MPI's Python binding, built for this interpreter: the reference allreduce (engine/mpi.py)
ln -sfn /usr/lib/python3/dist-packages/mpi4py "$site/mpi4py"
# SimGrid 3.32 (one compiled module, Python 3.11): the flow-level model (models/flow)
ln -sfn /usr/lib/python3/dist-packages/simgrid.cpython-311-x86_64-linux-gnu.so "$site/"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "installing Python packages (first time: a few minutes, TensorFlow is large)"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -r "$top/requirements.txt"
  "$venv/bin/pip" install -q --no-deps -e "$top"
  echo "$want" > "$stamp"
fi
# A daemon that made its send socket before the sysctl keeps the small buffer: enlarge it in
# place (no restart, nothing lost). Where that is impossible, restart ovs-vswitchd, but only
# when nothing uses it: no bridge at all, and the testbed's emulator lock held meanwhile.
if ! (cd "$top" && "$venv/bin/python" -m emulation.datapath ensure | sed 's/^/setup: /'); then
  mkdir -p /run/psnet-testbed
  exec 9<>/run/psnet-testbed/.lock
  if flock -n 9 && [ -z "$(ovs-vsctl --timeout=5 list-br)" ]; then
    log "restarting ovs-vswitchd so that its send socket takes net.core.wmem_default"
    "$ovs_ctl" --no-ovsdb-server --system-id=random --no-monitor restart >/dev/null 2>&1 || true
    ovs-vsctl --timeout=5 show >/dev/null || { echo "setup: ovs-vswitchd did not restart" >&2; exit 1; }
  else
    log "WARNING: ovs-vswitchd keeps a small send buffer (switch-side queues lose packets"
    log "  silently); an emulation runs, so it was not restarted: run setup again later"
  fi
  exec 9>&-
fi
log "ready: $venv/bin/testbed"
