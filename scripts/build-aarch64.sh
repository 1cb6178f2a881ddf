#!/usr/bin/env bash
# The aarch64-linux build (Grace Hopper, Grace Blackwell, DGX Spark), made
# on an x86_64 Debian 12 machine with Debian's own Rust and cross tools:
#
#   scripts/build-aarch64.sh              # the wheel: target/wheels-aarch64/
#   scripts/build-aarch64.sh --binary     # only the binary (dev profile):
#                                         # target/aarch64/aarch64-unknown-linux-gnu/debug/preflight
#
# PREFLIGHT_AARCH64_PROFILE picks cargo's profile (wheel default: release;
# --binary default: dev). Installs what it needs with apt-get when it is
# missing (root): Debian's `rustc-web` / `cargo-web` (Rust 1.96, in
# /usr/bin, apart from any rustup toolchain) with the aarch64 standard
# library `libstd-rust-web-dev:arm64` (multiarch: `dpkg --add-architecture
# arm64`), `gcc-aarch64-linux-gnu` as linker and C compiler (zstd's C code),
# and `qemu-user-static` to run what was built (scripts/test-aarch64.sh).
# The build has a target folder of its own (target/aarch64): Debian's rustc
# and rustup's would rebuild each other's artifacts in one.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIPLE=aarch64-unknown-linux-gnu
mode=wheel
[ "${1:-}" = "--binary" ] && mode=binary

need=()
# Debian's Rust, new enough for this crate (rust-version 1.88): bookworm's
# plain `rustc` is 1.63; `rustc-web` (bookworm-security) is 1.96.
rust_ok() {
  local v
  v=$(/usr/bin/rustc --version 2>/dev/null | cut -d' ' -f2) || return 1
  [ -x /usr/bin/cargo ] && [ "$(printf '%s\n1.88.0\n' "$v" | sort -V | head -1)" = 1.88.0 ]
}
rust_ok || need+=(rustc-web cargo-web)
[ -d /usr/lib/rustlib/$TRIPLE/lib ] || need+=(libstd-rust-web-dev:arm64)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
if [ ${#need[@]} -gt 0 ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# Debian's toolchain only: rustup's cargo and rustc (in ~/.cargo/bin) have
# no aarch64 standard library here.
export PATH=/usr/bin:/bin:/usr/sbin:/sbin
export RUSTC=/usr/bin/rustc CARGO=/usr/bin/cargo
export CARGO_TARGET_DIR=$PWD/target/aarch64
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar

if [ "$mode" = binary ]; then
  profile=${PREFLIGHT_AARCH64_PROFILE:-dev}
  /usr/bin/cargo build --locked --profile "$profile" --target $TRIPLE --bin preflight
  dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
  file "$CARGO_TARGET_DIR/$TRIPLE/$dir/preflight" 2>/dev/null || ls -l "$CARGO_TARGET_DIR/$TRIPLE/$dir/preflight"
  exit 0
fi

profile=${PREFLIGHT_AARCH64_PROFILE:-release}
BUILD_VENV=.wheelenv
if [ ! -x "$BUILD_VENV/bin/maturin" ]; then
  python3 -m venv "$BUILD_VENV"
  "$BUILD_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-wheel.txt
fi
rm -rf target/wheels-aarch64
"$BUILD_VENV/bin/maturin" build --locked --profile "$profile" --target $TRIPLE --out target/wheels-aarch64
ls -l target/wheels-aarch64/
