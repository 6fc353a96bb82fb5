#!/usr/bin/env bash
# Runs every fuzz target of this project (those `cargo fuzz list` finds in
# Cargo.toml) for a few seconds each, starting from its checked-in seeds in
# seeds/<target>/: a smoke test that every target still builds and that neither
# a seed nor what libFuzzer mutates from it in that time breaks an oracle. CI
# runs it after the tests; it installs the nightly toolchain and cargo-fuzz
# when they are missing.
#
# Environment (defaults in brackets):
#   FUZZ_SECONDS       seconds per target [10]
#   FUZZ_RUNS          inputs per target at most, -1 for no limit [-1]
#   FUZZ_UNIT_TIMEOUT  seconds one input may take before it counts as a hang [30]
#   FUZZ_TARGETS       targets to run, space-separated [all of them]
#
# libFuzzer writes the new inputs it finds into the first corpus directory it
# is given: that is a temporary directory, and seeds/<target>/ comes second, so
# a run never adds to (or shrinks) the checked-in seeds. A failing input is
# left in artifacts/<target>/; copy it into seeds/<target>/ to keep it as a
# regression once fixed. Regenerate the seeds after a format change with
#   cargo run -p strata-raftlog --example fuzz_seeds -- crates/raftlog/fuzz/seeds

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

seconds=${FUZZ_SECONDS:-10}
runs=${FUZZ_RUNS:--1}
unit_timeout=${FUZZ_UNIT_TIMEOUT:-30}

say() { echo "fuzz: $*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! rustup toolchain list | grep -q '^nightly'; then
    say "installing the nightly toolchain (cargo-fuzz needs it for the sanitizers)"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# --debug-assertions: the engine's debug_assert! invariants are part of what
# the fuzzer checks. Build and run take the same flags, so the runs reuse the
# one build of every target.
flags=(--debug-assertions)
say "building every target ($(cargo +nightly fuzz --version), $(rustc +nightly --version))"
cargo +nightly fuzz build "${flags[@]}"

read -r -a targets <<<"${FUZZ_TARGETS:-$(cargo +nightly fuzz list | tr '\n' ' ')}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seeds_digest() {
    if [[ -d seeds ]]; then
        find seeds -type f -print0 | sort -z | xargs -0 -r sha256sum
    fi
}
seeds_before=$(seeds_digest)

failed=()
for t in "${targets[@]}"; do
    mkdir -p "$work/$t"
    corpora=("$work/$t")
    if [[ -d seeds/$t ]]; then
        corpora+=("seeds/$t")
    else
        say "$t: no seeds/$t, starting from nothing"
    fi
    extra=()
    # Recovery spawns threads; LeakSanitizer reports glibc's per-thread
    # destructor list as a leak.
    if [[ $t == recover_dir ]]; then extra+=(-detect_leaks=0); fi
    log="$work/$t.log"
    start=$(date +%s)
    if cargo +nightly fuzz run "${flags[@]}" "$t" "${corpora[@]}" -- \
        -max_total_time="$seconds" -runs="$runs" -timeout="$unit_timeout" \
        -dict="$here/raftlog.dict" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
        execs=$(grep -m1 '^stat::number_of_executed_units' "$log" | awk '{print $2}')
        cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+' || true)
        say "$t: ok, ${execs:-?} inputs in $(($(date +%s) - start)) s, ${cov:-cov: ?}"
    else
        say "$t: FAILED; the end of its log:"
        tail -n 60 "$log" >&2
        failed+=("$t")
    fi
done

if [[ $(seeds_digest) != "$seeds_before" ]]; then
    say "the run changed seeds/: libFuzzer must only write into the temporary corpus"
    failed+=("seeds")
fi
if ((${#failed[@]})); then
    say "failed: ${failed[*]} (inputs in $here/artifacts/)"
    exit 1
fi
say "every target ran ${seconds} s from its seeds without a failure"
