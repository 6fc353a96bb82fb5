//! An install publishes its version, releases the installer lock, and only
//! then makes its edits durable (`read_state.rs`): the manifest sync, most
//! of an install's time, no longer holds the lock every other install of
//! the family waits for. What must not change with it: no file an install
//! removed is queued for deletion before its edits are durable (or ever,
//! if that fails), and an ingestion, whose state holds data no earlier one
//! had, is still durable before anyone can see it.

mod version_support;

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::Receiver;
use strata_lsm::read_state::Sequenced;
use strata_lsm::version::ObsoleteFile;
use strata_lsm::{
    Error, Install, InstallError, Installer, PersistEdits, Result, Version, VersionEdit,
};
use version_support::*;

/// A persist hook whose `make_durable` tells the test it started, then
/// waits for the test's verdict.
struct HeldSync {
    started: mpsc::Sender<()>,
    verdict: mpsc::Receiver<Result<()>>,
}

impl PersistEdits for HeldSync {
    fn persist(&mut self, _: &[VersionEdit], _: &Arc<Version>) -> Result<()> {
        Ok(())
    }

    fn make_durable(&mut self) -> Result<()> {
        self.started.send(()).unwrap();
        self.verdict
            .recv_timeout(Duration::from_secs(30))
            .expect("the test gives a verdict")
    }
}

/// Starts, on a thread, an install of `edits` through a [`HeldSync`];
/// returns once its `make_durable` has started, with the sender of the
/// verdict and the install's outcome to come.
fn install_held(
    inst: &Arc<Installer>,
    edits: Vec<VersionEdit>,
) -> (
    mpsc::Sender<Result<()>>,
    thread::JoinHandle<std::result::Result<(), InstallError>>,
) {
    let (started_tx, started) = mpsc::channel();
    let (verdict, verdict_rx) = mpsc::channel();
    let inst = inst.clone();
    let job = thread::spawn(move || {
        let mut hook = HeldSync {
            started: started_tx,
            verdict: verdict_rx,
        };
        let change = Install {
            edits: &edits,
            ..Default::default()
        };
        inst.install(change, &mut hook).map(|_| ())
    });
    started
        .recv_timeout(Duration::from_secs(30))
        .expect("the install reaches its sync");
    (verdict, job)
}

fn queued(rx: &Receiver<ObsoleteFile>) -> Vec<ObsoleteFile> {
    rx.try_iter().collect()
}

/// An installer holding file 1 in L1, with no other state alive.
fn with_one_file() -> (Arc<Installer>, Receiver<ObsoleteFile>) {
    let (inst, rx) = installer();
    install(&inst, &[edit(&[(1, desc(1, 0, 10, 1, 1))], &[])]).unwrap();
    (Arc::new(inst), rx)
}

#[test]
fn an_install_is_published_and_releases_its_lock_before_its_sync() {
    let (inst, rx) = with_one_file();
    // A compaction-like install replacing file 1 with file 2, held in its sync.
    let (verdict, job) = install_held(&inst, vec![edit(&[(1, desc(2, 0, 10, 1, 1))], &[(1, 1)])]);
    // Readers see the new version already.
    assert_eq!(numbers(&inst.load().version, 1), vec![2]);
    // The lock is free: another install of the family completes meanwhile.
    let other = thread::spawn({
        let inst = inst.clone();
        move || install(&inst, &[edit(&[(2, desc(3, 20, 30, 2, 2))], &[])]).map(|_| ())
    });
    other.join().unwrap().unwrap();
    assert_eq!(numbers(&inst.load().version, 2), vec![3]);
    // File 1 is unreachable from the published state, but its removal is
    // not durable: it must not be queued for deletion.
    assert!(
        queued(&rx).is_empty(),
        "a file queued before its removal was durable"
    );
    verdict.send(Ok(())).unwrap();
    job.join().unwrap().unwrap();
    assert_eq!(queued(&rx), vec![ObsoleteFile::Table(1)]);
}

#[test]
fn a_failed_sync_after_publishing_leaves_the_removed_files_alone() {
    let (inst, rx) = with_one_file();
    let (verdict, job) = install_held(&inst, vec![edit(&[(1, desc(2, 0, 10, 1, 1))], &[(1, 1)])]);
    verdict
        .send(Err(Error::ReadOnly("the manifest sync failed".into())))
        .unwrap();
    let outcome = job.join().unwrap();
    assert!(
        matches!(outcome, Err(InstallError::Durability(_))),
        "{outcome:?}"
    );
    // Published (the caller stops writes and keeps the outputs) ...
    assert_eq!(numbers(&inst.load().version, 1), vec![2]);
    // ... but the removed file is never queued: a reopen, which recovers
    // the durable manifest, may still need it.
    assert!(queued(&rx).is_empty());
}

#[test]
fn an_ingestion_is_durable_before_it_is_published() {
    let (inst, rx) = with_one_file();
    let inst2 = inst.clone();
    // The hook checks, in its sync, that nothing is published yet.
    struct CheckUnpublished {
        inst: Arc<Installer>,
        synced: bool,
    }
    impl PersistEdits for CheckUnpublished {
        fn persist(&mut self, _: &[VersionEdit], _: &Arc<Version>) -> Result<()> {
            Ok(())
        }
        fn make_durable(&mut self) -> Result<()> {
            assert_eq!(
                numbers(&self.inst.load().version, 1),
                vec![1],
                "an ingestion was visible before it was durable"
            );
            self.synced = true;
            Ok(())
        }
    }
    let mut hook = CheckUnpublished {
        inst: inst2,
        synced: false,
    };
    let e = edit(&[(1, desc(2, 0, 10, 5, 5))], &[(1, 1)]);
    let published = inst
        .install_sequenced(
            Install {
                edits: std::slice::from_ref(&e),
                ..Default::default()
            },
            &mut hook,
            &mut || {
                Ok(Sequenced {
                    edits: vec![e.clone()],
                    visible: 5,
                })
            },
        )
        .unwrap();
    assert!(hook.synced);
    assert_eq!(published.visible, 5);
    assert_eq!(numbers(&published.version, 1), vec![2]);
    assert_eq!(queued(&rx), vec![ObsoleteFile::Table(1)]);
}
