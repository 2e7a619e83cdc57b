#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine for psnet-testbed (run as root). A second run on
# a ready machine only checks, and finishes in seconds. `scripts/setup.sh --list` prints what it
# changes without changing anything.
#
# What it changes on this machine (each printed as "setup: ..." when it is made):
#   - apt packages: mininet openvswitch-switch openssh-server iperf3 ethtool python3-venv iproute2
#     iputils-ping procps openmpi-bin python3-mpi4py python3-simgrid gcc libc6-dev chromium (the
#     headless browser of the reproduction page's test), sudo (Mininet's cluster edition runs every
#     remote command through `sudo -E`, also as root: `--cluster` runs)
#   - openssh-server: Debian's package starts sshd (port 22, every address) and enables it at boot;
#     `testbed remote` and hardware mode log in through it (`systemctl disable --now ssh` if this
#     machine is only ever the one you type on)
#   - sysctls net.core.wmem_default = 33554432 (32 MiB) and net.core.rmem_default = 8388608
#     (8 MiB), set now and kept in /etc/sysctl.d/60-psnet-testbed.conf: the default buffers of
#     every new socket that sets none of its own, so that ovs-vswitchd drops no packets silently
#   - sysctl net.ipv4.tcp_allowed_congestion_control gains cubic (and reno) where missing, kept in
#     /etc/sysctl.d/61-psnet-testbed-tcp.conf: emulated hosts pin their congestion control
#   - Open vSwitch started (ovs-ctl start) when it is not running; ovs-vswitchd's send socket
#     enlarged in place, or the daemon restarted when no bridge exists and no emulation runs
#   - Open vSwitch's other_config:userspace-tso-enable=true (GSO packets cross the userspace
#     datapath whole: emulation/tso.py), and ovs-vswitchd restarted (as above) to take it
# Inside this checkout and root's home only:
#   - .venv: a venv of Debian's python3 with the pinned packages of requirements.txt, and links to
#     Debian's Mininet, mpi4py and SimGrid modules (found for the venv's Python, any architecture)
#   - ~/.cache/psnet-testbed/bindaddr-*.so: the bind shim compiled from tfjob/bindaddr.c (it keeps
#     TensorFlow's gRPC servers on their task's address: tfjob/bindshim.py)
set -euo pipefail

# chromium: the headless browser the reproduction page's test opens results/index.html in (Playwright
# drives it; Playwright's own browser download is not reachable from these machines)
apt_pkgs=(mininet openvswitch-switch openssh-server iperf3 ethtool python3-venv iproute2 iputils-ping procps openmpi-bin
  python3-mpi4py python3-simgrid gcc libc6-dev chromium sudo)
dist=/usr/lib/python3/dist-packages
sysctl_conf=/etc/sysctl.d/60-psnet-testbed.conf
tcp_conf=/etc/sysctl.d/61-psnet-testbed-tcp.conf
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

log() { printf 'setup: %s\n' "$*"; }

list_changes() {
  # The comment block above, as the user reads it: what this script may change.
  sed -n '/^# What it changes on this machine/,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

# find_simgrid DIR EXT_SUFFIX: the path of SimGrid's compiled module for a Python whose extension
# modules end in EXT_SUFFIX (e.g. .cpython-311-aarch64-linux-gnu.so), or one line saying what is
# missing (on stderr) and status 1.
find_simgrid() {
  local dir=$1 ext=$2 found=()
  if [ -e "$dir/simgrid$ext" ]; then
    printf '%s\n' "$dir/simgrid$ext"
    return 0
  fi
  shopt -s nullglob
  found=("$dir"/simgrid*.so)
  shopt -u nullglob
  if [ ${#found[@]} -gt 0 ]; then
    echo "setup: $dir has ${found[*]##*/} but the venv's Python loads simgrid$ext: install a python3-simgrid built for it" >&2
  else
    echo "setup: no SimGrid module (simgrid*.so) in $dir: apt-get install python3-simgrid (the flow model needs it)" >&2
  fi
  return 1
}

# link NAME TARGET SITE: SITE/NAME -> TARGET, said only when it changes.
link() {
  if [ "$(readlink "$3/$1" 2>/dev/null)" != "$2" ]; then
    log "linking $2 into the venv"
    ln -sfn "$2" "$3/$1"
  fi
}

main() {
  local top venv missing=() p py stamp want site ext simgrid stale
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  venv="$top/.venv"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: run as root: Mininet, Open vSwitch and the system changes listed by scripts/setup.sh --list need it" >&2
    exit 1
  fi

  for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing apt packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    if [[ " ${missing[*]} " == *" openssh-server "* ]]; then
      log "openssh-server installed: Debian starts sshd on port 22 (every address) and at every boot"
      log "  (testbed remote and hardware mode log in through it; systemctl disable --now ssh stops it)"
    fi
  fi

  if [ "$(sysctl -n net.core.wmem_default)" -lt "$sndbuf" ]; then
    log "sysctl net.core.wmem_default -> $sndbuf (room for ovs-vswitchd's switch-side queues)"
    sysctl -qw net.core.wmem_default="$sndbuf"
  fi
  if [ "$(sysctl -n net.core.rmem_default)" -lt "$rcvbuf" ]; then
    log "sysctl net.core.rmem_default -> $rcvbuf (room in ovs-vswitchd's per-port receive sockets)"
    sysctl -qw net.core.rmem_default="$rcvbuf"
  fi
  if ! grep -qsx "net.core.rmem_default = $rcvbuf" "$sysctl_conf"; then
    log "writing $sysctl_conf (both sysctls, kept across reboots)"
    printf '# psnet-testbed: room in ovs-vswitchd'"'"'s send socket for switch-side queues, and in its
# per-port receive sockets for bursts
net.core.wmem_default = %s
net.core.rmem_default = %s
' \
      "$sndbuf" "$rcvbuf" >"$sysctl_conf"
  fi

  # an emulated host pins its TCP congestion control (a topology's `tcp:`, cubic by default); the
  # kernel lets a network namespace take only one of the allowed list, which some VMs set to
  # "reno bbr"
  allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
  for cc in cubic reno; do
    if [[ " $allowed " != *" $cc "* ]] && [[ " $(sysctl -n net.ipv4.tcp_available_congestion_control) " == *" $cc "* ]]; then
      allowed="$allowed $cc"
      log "sysctl net.ipv4.tcp_allowed_congestion_control -> $allowed (emulated hosts may pin $cc)"
      sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed"
    fi
  done
  if ! grep -qs "^net.ipv4.tcp_allowed_congestion_control" "$tcp_conf"; then
    log "writing $tcp_conf (the allowed congestion controls, kept across reboots)"
    printf '# psnet-testbed: emulated hosts pin their TCP congestion control (topology field tcp)\nnet.ipv4.tcp_allowed_congestion_control = %s\n' "$allowed" >"$tcp_conf"
  fi

  if ! ovs-vsctl --timeout=2 show >/dev/null 2>&1; then
    log "starting Open vSwitch"
    "$ovs_ctl" --system-id=random --no-monitor start >/dev/null 2>&1 || true
    ovs-vsctl --timeout=5 show >/dev/null || {
      echo "setup: Open vSwitch did not start" >&2
      exit 1
    }
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
  ext=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  link mininet "$dist/mininet" "$site"
  # Open MPI's Python binding, built for this interpreter: the reference allreduce (engine/mpi.py)
  link mpi4py "$dist/mpi4py" "$site"
  # SimGrid (one compiled module): the flow-level model (models/flow)
  simgrid=$(find_simgrid "$dist" "$ext") || exit 1
  for stale in "$site"/simgrid*.so; do # a link for another interpreter or architecture
    if [ -L "$stale" ] && [ "${stale##*/}" != "${simgrid##*/}" ]; then
      log "removing $stale (not this Python's SimGrid module)"
      rm -f "$stale"
    fi
  done
  link "${simgrid##*/}" "$simgrid" "$site"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "installing Python packages (first time: a few minutes, TensorFlow is large)"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q -r "$top/requirements.txt"
    "$venv/bin/pip" install -q --no-deps -e "$top"
    echo "$want" >"$stamp"
  fi
  # The shim that keeps TensorFlow's gRPC servers on their task's address (tfjob/bindshim.py);
  # a task would build it on first use, but a missing compiler is better said here.
  (cd "$top" && "$venv/bin/python" -m tfjob.bindshim) | sed 's/^/setup: /'
  # Userspace TSO (emulation/tso.py): ovs-vswitchd reads the setting once, at its start.
  if [ "$(ovs-vsctl --timeout=5 get Open_vSwitch . other_config:userspace-tso-enable 2>/dev/null)" != '"true"' ]; then
    log "ovs-vsctl set Open_vSwitch . other_config:userspace-tso-enable=true (GSO packets cross the datapath whole)"
    ovs-vsctl --timeout=5 set Open_vSwitch . other_config:userspace-tso-enable=true
  fi
  # A daemon that made its send socket before the sysctl keeps the small buffer: enlarge it in
  # place (no restart, nothing lost). Where that is impossible, or the daemon started before the
  # TSO setting, restart ovs-vswitchd, but only when nothing uses it: no bridge at all, and the
  # testbed's emulator lock held meanwhile.
  why=""
  (cd "$top" && "$venv/bin/python" -m emulation.datapath ensure | sed 's/^/setup: /') || why="its send socket takes net.core.wmem_default"
  (cd "$top" && "$venv/bin/python" -m emulation.tso check >/dev/null) || why="${why:+$why and }it takes userspace TSO"
  if [ -n "$why" ]; then
    mkdir -p /run/psnet-testbed
    exec 9<>/run/psnet-testbed/.lock
    if flock -n 9 && [ -z "$(ovs-vsctl --timeout=5 list-br)" ]; then
      log "restarting ovs-vswitchd so that $why"
      "$ovs_ctl" --no-ovsdb-server --system-id=random --no-monitor restart >/dev/null 2>&1 || true
      ovs-vsctl --timeout=5 show >/dev/null || {
        echo "setup: ovs-vswitchd did not restart" >&2
        exit 1
      }
    else
      log "WARNING: ovs-vswitchd was not restarted so that $why: an emulation runs;"
      log "  run setup again later (until then: a small send buffer loses packets silently, and"
      log "  runs go without userspace TSO)"
    fi
    exec 9>&-
  fi
  log "ready: $venv/bin/testbed"
}

# Sourced (the tests call find_simgrid), define the functions only; run, set up.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  if [ "${1:-}" = "--list" ]; then
    list_changes
  else
    main "$@"
  fi
fi
