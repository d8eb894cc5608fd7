#!/usr/bin/env bash
# Installs what the project needs on a fresh machine: Rust components with rustup,
# system packages with apt-get (only those missing). Safe to run again; called by
# scripts/test.sh.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

# apt_need COMMAND PACKAGE: install PACKAGE when COMMAND is not on the PATH.
missing=()
apt_need() {
  command -v "$1" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
apt_need cc gcc
apt_need valgrind valgrind   # the C API's programs run under memcheck (tidepool-capi tests)
apt_need pkg-config pkgconf # the C API's pkg-config file is tested
apt_need python3 python3     # scripts/msrv.py
apt_need nats-server nats-server # the distributed pool's broker (tidepool-cluster tests and demos)
# the server benchmark's database (tidepool-bench server): its programs are not on the PATH
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
apt_need wrk wrk             # the server benchmark's load generator
apt_need chromium chromium       # the cluster dashboard's browser test
apt_need redis-server redis-server # the Celery comparison's broker (tidepool-bench celery)
# the Celery comparison's virtualenv (Debian splits venv and ensurepip out of python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)

if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing system packages (${missing[*]}) and no apt-get: install them by hand" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "== installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# The Celery comparison's Python side (tidepool-bench celery): a virtualenv
# under the target directory with the pinned requirements, made again when
# they change (the benchmark checks the same stamp and makes it itself if
# this did not run).
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CARGO_TARGET_DIR:-$root/target}/celery-venv"
req="$root/lab/bench/celery/requirements.txt"
if ! cmp -s "$req" "$venv/tidepool-requirements.txt"; then
  echo "== making the Celery virtualenv in $venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/tidepool-requirements.txt"
fi
