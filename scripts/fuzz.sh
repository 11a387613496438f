#!/usr/bin/env bash
# Fuzzes the readers of user files (docs/fuzzing.md): runs one target or all
# of them, one after the other, one fuzzer process at a time, for SECONDS
# each (default 600), growing engine/fuzz/corpus/<target>/ from the committed
# corpus and the seeds in engine/fuzz/seeds/<target>/. The corpora are
# committed as one archive, engine/fuzz/corpus.tar.xz (the files themselves
# are ignored): it is unpacked when corpus/ is missing, and `cmin` packs it
# again after minimising. A crash, panic,
# timeout (10 s) or out-of-memory (2 GiB) stops the run; libFuzzer writes
# the input to engine/fuzz/artifacts/<target>/ and this script exits 1.
#
# Usage: scripts/fuzz.sh [TARGET|all] [SECONDS]
#        scripts/fuzz.sh cmin [TARGET|all]    minimise the committed corpora
# Targets: manifest cells tensors trace model_dir policy schedule layout
# Needs the nightly toolchain (`rustup toolchain install nightly`); installs
# cargo-fuzz when missing.
set -euo pipefail
cd "$(dirname "$0")/../engine/fuzz"

targets=(manifest cells tensors trace model_dir policy schedule layout)
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz
fi

# The committed corpora, unpacked once.
if [ ! -d corpus ] && [ -f corpus.tar.xz ]; then
  tar -xJf corpus.tar.xz
fi

# Packs corpus/ into corpus.tar.xz, the same bytes for the same files.
pack() {
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - corpus |
    xz -9 -T1 > corpus.tar.xz.tmp
  mv corpus.tar.xz.tmp corpus.tar.xz
}

pick() {
  case "${1:-all}" in
    all) echo "${targets[@]}" ;;
    manifest | cells | tensors | trace | model_dir | policy | schedule | layout) echo "$1" ;;
    *) echo "fuzz.sh: unknown target $1 (${targets[*]} or all)" >&2; exit 2 ;;
  esac
}

if [ "${1:-}" = cmin ]; then
  for t in $(pick "${2:-all}"); do
    mkdir -p "corpus/$t"
    cargo +nightly fuzz cmin -O -a "$t" "corpus/$t" -- -rss_limit_mb=2048 -timeout=10
  done
  pack
  exit 0
fi

secs=${2:-600}
for t in $(pick "${1:-all}"); do
  mkdir -p "corpus/$t"
  echo "fuzz.sh: $t for $secs s"
  cargo +nightly fuzz run -O -a "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 ||
    { echo "fuzz.sh: $t failed; the input is in engine/fuzz/artifacts/$t/" >&2; exit 1; }
done
