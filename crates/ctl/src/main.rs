//! `strata-ctl`: inspects Strata's data directories without opening an engine.
//!
//! It only ever reads: opening the engine would start a new log file and cut
//! damaged tails, which is the last thing wanted on a directory being diagnosed.
//! Each subcommand lives in its own module; this file parses the command line
//! and maps outcomes to exit codes.
//!
//! Exit codes: 0 when the directory is clean (or the command only reports),
//! 1 when `check` found damage, 2 on a usage or I/O error.

mod check;
mod dump;
mod error;
mod log_dir;
mod lsm;
mod stats;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata_fs::DiskFs;

use crate::error::CtlError;

#[derive(Debug, Parser)]
#[command(
    name = "strata-ctl",
    version,
    about = "Inspects Strata data directories (read only)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspects a raftlog directory.
    Raftlog {
        #[command(subcommand)]
        command: RaftlogCommand,
    },
    /// Inspects an lsm directory.
    Lsm {
        #[command(subcommand)]
        command: LsmCommand,
    },
}

#[derive(Debug, Subcommand)]
enum LsmCommand {
    /// Prints the manifest's records and the WAL's batches.
    Dump {
        /// The lsm directory.
        dir: PathBuf,
        /// Also prints every item of every WAL batch.
        #[arg(long)]
        entries: bool,
    },
    /// Prints one SST file: footer, properties, range tombstones, data blocks.
    DumpSst {
        /// The SST file.
        file: PathBuf,
        /// Also prints every entry.
        #[arg(long)]
        entries: bool,
    },
    /// Prints one blob file: header, footer and, with --entries, every record.
    DumpBlob {
        /// The blob file.
        file: PathBuf,
        /// Also prints every record.
        #[arg(long)]
        entries: bool,
    },
    /// Verifies the manifest, every block of every SST and blob file it names,
    /// every blob reference, and every WAL record; exits 1 if anything is
    /// damaged.
    Check {
        /// The lsm directory.
        dir: PathBuf,
    },
    /// Prints families, files, bytes and entries per level, and WAL bytes.
    Stats {
        /// The lsm directory.
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum RaftlogCommand {
    /// Prints every file, record and item of the directory.
    Dump {
        /// The raftlog directory.
        dir: PathBuf,
        /// Also prints each entry: its length and first 32 bytes in hex.
        #[arg(long)]
        entries: bool,
        /// Prints only the items (and the records holding them) of this group.
        #[arg(long, value_name = "G")]
        group: Option<u64>,
    },
    /// Verifies every checksum and the sequence of files, and that every entry
    /// the index would hold decodes; exits 1 if anything is damaged.
    Check {
        /// The raftlog directory.
        dir: PathBuf,
    },
    /// Prints counts: files, bytes and records per queue, groups, live entries, keys.
    Stats {
        /// The raftlog directory.
        dir: PathBuf,
    },
}

/// What a command concluded about the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing wrong was found (or the command does not judge).
    Clean,
    /// Damage was found and reported.
    Damaged,
}

fn main() -> ExitCode {
    // Usage errors exit with 2, from clap itself.
    let cli = Cli::parse();
    let fs = DiskFs::new();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let result = match &cli.command {
        Command::Raftlog { command } => match command {
            RaftlogCommand::Dump {
                dir,
                entries,
                group,
            } => dump::run(
                &fs,
                dir,
                &dump::Options {
                    entries: *entries,
                    group: *group,
                },
                &mut out,
            ),
            RaftlogCommand::Check { dir } => check::run(&fs, dir, &mut out),
            RaftlogCommand::Stats { dir } => stats::run(&fs, dir, &mut out),
        },
        Command::Lsm { command } => match command {
            LsmCommand::Dump { dir, entries } => lsm::dump(&fs, dir, *entries, &mut out),
            LsmCommand::DumpSst { file, entries } => lsm::dump_sst(&fs, file, *entries, &mut out),
            LsmCommand::DumpBlob { file, entries } => lsm::dump_blob(&fs, file, *entries, &mut out),
            LsmCommand::Check { dir } => lsm::check(&fs, dir, &mut out),
            LsmCommand::Stats { dir } => lsm::stats(&fs, dir, &mut out),
        },
    };
    let result = result.and_then(|verdict| out.flush().map(|()| verdict).map_err(CtlError::from));
    match result {
        Ok(Verdict::Clean) => ExitCode::SUCCESS,
        Ok(Verdict::Damaged) => ExitCode::from(1),
        // A reader that went away (`| head`) is not an error worth a message.
        Err(CtlError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(2),
        Err(e) => {
            eprintln!("strata-ctl: {e}");
            ExitCode::from(2)
        }
    }
}
