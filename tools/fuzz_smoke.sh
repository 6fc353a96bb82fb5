#!/usr/bin/env bash
# Runs every fuzz target of each cargo-fuzz project given (default: every
# crates/*/fuzz; the targets are those `cargo fuzz list` finds in its
# Cargo.toml) for a few seconds each, starting from its checked-in seeds in
# seeds/<target>/ (or corpus/<target>/): a smoke test that every target still
# builds and that neither a seed nor what libFuzzer mutates from it in that
# time breaks an oracle. CI runs it after the tests; it installs the nightly
# toolchain and cargo-fuzz when they are missing.
#
# Usage: tools/fuzz_smoke.sh [FUZZ_PROJECT_DIR...]
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
# regression once fixed. Regenerate raftlog's seeds after a format change with
#   cargo run -p strata-raftlog --example fuzz_seeds -- crates/raftlog/fuzz/seeds
# (the lsm's: see crates/lsm/fuzz/README.md).

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if (($# == 0)); then
    set -- "$root"/crates/*/fuzz
fi

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

# --debug-assertions: the engines' debug_assert! invariants are part of what
# the fuzzer checks. Build and run take the same flags, so the runs reuse the
# one build of every target.
flags=(--debug-assertions)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()

# Fuzzes every target of the cargo-fuzz project in directory $1.
fuzz_project() {
    local here seeds dict=() t corpora extra log start execs cov before
    here=$(cd "$1" && pwd)
    cd "$here"
    seeds=seeds
    if [[ ! -d seeds && -d corpus ]]; then seeds=corpus; fi
    for d in "$here"/*.dict; do
        if [[ -f $d ]]; then dict=(-dict="$d"); fi
    done
    say "$here: building every target ($(cargo +nightly fuzz --version), $(rustc +nightly --version))"
    if ! cargo +nightly fuzz build "${flags[@]}"; then
        failed+=("$here: build")
        return
    fi
    local targets
    read -r -a targets <<<"${FUZZ_TARGETS:-$(cargo +nightly fuzz list | tr '\n' ' ')}"
    before=$(digest "$seeds")
    for t in "${targets[@]}"; do
        mkdir -p "$work/$t"
        corpora=("$work/$t")
        if [[ -d $seeds/$t ]]; then
            corpora+=("$seeds/$t")
        else
            say "$t: no $seeds/$t, starting from nothing"
        fi
        extra=()
        # Recovery spawns threads; LeakSanitizer reports glibc's per-thread
        # destructor list as a leak.
        if [[ $t == recover_dir ]]; then extra+=(-detect_leaks=0); fi
        log="$work/$t.log"
        start=$(date +%s)
        if cargo +nightly fuzz run "${flags[@]}" "$t" "${corpora[@]}" -- \
            -max_total_time="$seconds" -runs="$runs" -timeout="$unit_timeout" \
            "${dict[@]}" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
            execs=$(grep -m1 '^stat::number_of_executed_units' "$log" | awk '{print $2}')
            cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+' || true)
            say "$t: ok, ${execs:-?} inputs in $(($(date +%s) - start)) s, ${cov:-cov: ?}"
        else
            say "$t: FAILED; the end of its log:"
            tail -n 60 "$log" >&2
            failed+=("$here: $t (inputs in $here/artifacts/)")
        fi
    done
    if [[ $(digest "$seeds") != "$before" ]]; then
        say "$here: the run changed $seeds/: libFuzzer must only write into the temporary corpus"
        failed+=("$here: $seeds")
    fi
}

# A digest of the checked-in seeds, to prove a run left them alone.
digest() {
    if [[ -d $1 ]]; then
        find "$1" -type f -print0 | sort -z | xargs -0 -r sha256sum
    fi
}

for project in "$@"; do
    fuzz_project "$project"
done
if ((${#failed[@]})); then
    say "failed: ${failed[*]}"
    exit 1
fi
say "every target ran ${seconds} s from its seeds without a failure"
