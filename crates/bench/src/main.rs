//! `strata-bench`: Strata's demo and benchmarks.
//!
//! - `demo`: the main job, a TiKV-like multi-group workload on raftlog, then
//!   recovery and a byte-for-byte check of every live entry.
//! - `raftlog`: the same workload, configurable, against every engine built in.
//! - `recovery`: how fast a full directory reopens.
//! - `raftlog-memory`: what the in-memory index costs per group and per entry.
//! - `raftlog-purge`: how long the purge takes that frees most of a large log.
//! - `lsm`: db_bench-like workloads on the lsm engine, beside fjall and RocksDB.
//! - `lsm-versions`: read-path latency while versions install, as the SST
//!   file count grows, beside RocksDB.
//! - `lsm-ingest`: writers' latency while SST files are ingested into other
//!   key ranges, beside RocksDB.
//! - `disk-probe`: sequential writes with fdatasync, the device's limit.
//!
//! Every subcommand lives in its own module; this file only dispatches.

/// Feature `mimalloc`: the process's allocator, Rust and C++ alike (see `Cargo.toml`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod demo;
mod engines;
mod error;
mod lsm;
mod lsm_demo;
mod lsm_ingest;
mod lsm_versions;
mod memory;
mod probe;
mod proc_stats;
mod purge;
mod raftlog;
mod recovery;
mod report;
mod runner;
mod units;
mod verify;
mod workload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Strata's demo and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "strata-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo: write, purge, reopen, verify every entry, summarize.
    Demo(demo::DemoArgs),
    /// Run the multi-group raft log workload against each engine.
    Raftlog(raftlog::RaftlogArgs),
    /// Time reopening a directory full of live entries.
    Recovery(recovery::RecoveryArgs),
    /// Measure index memory per idle group and per live entry.
    RaftlogMemory(memory::MemoryArgs),
    /// Time the purge that frees most of a large log, over many groups.
    RaftlogPurge(purge::PurgeArgs),
    /// Run db_bench-like workloads against the lsm engine and its peers.
    Lsm(lsm::LsmArgs),
    /// Time snapshots, iterators and gets while versions install, as the
    /// number of SST files grows.
    LsmVersions(lsm_versions::VersionsArgs),
    /// Show that ingesting SST files does not stall writers of other ranges.
    LsmIngest(lsm_ingest::LsmIngestArgs),
    /// Measure sequential write + fdatasync on the device.
    DiskProbe(probe::ProbeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Raftlog(args) => raftlog::run(args),
        Command::Recovery(args) => recovery::run(args),
        Command::RaftlogMemory(args) => memory::run(args),
        Command::RaftlogPurge(args) => purge::run(args),
        Command::Lsm(args) => lsm::run(args),
        Command::LsmVersions(args) => lsm_versions::run(args),
        Command::LsmIngest(args) => lsm_ingest::run(args),
        Command::DiskProbe(args) => probe::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
