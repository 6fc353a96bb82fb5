//! The background pool's roles: from two threads on, flushes have threads
//! of their own at the process's CPU priority, and compactions merge on a
//! thread `compaction_nice` lower but install at the process's priority; a
//! pool of one thread does everything at the process's priority. One test
//! in its own process, so that the threads it counts are its engine's only.

#![cfg(target_os = "linux")]

mod db_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use db_support::*;
use strata_fs::{FileSystem, MemFs};
use strata_lsm::compaction::{CompactionFilter, FilterDecision};
use strata_lsm::{CompactionInfo, Db, EventListener, Hooks, WriteOptions};

/// `(name, nice)` of the calling thread.
fn this_thread() -> (String, i32) {
    let name = std::thread::current().name().unwrap_or("").to_string();
    (name, own_nice())
}

/// Where the parts of a compaction ran: its filter runs in the merge, its
/// listener after the install, on the thread that installed.
#[derive(Default)]
struct WhereJobsRan {
    merges: Mutex<Vec<(String, i32)>>,
    installs: Mutex<Vec<(String, i32)>>,
}

struct MergeProbe(Arc<WhereJobsRan>);

impl CompactionFilter for MergeProbe {
    fn name(&self) -> &str {
        "merge-probe"
    }
    fn filter(&self, _level: u8, _key: &[u8], _value: &[u8]) -> FilterDecision {
        self.0.merges.lock().unwrap().push(this_thread());
        FilterDecision::Keep
    }
}

struct InstallProbe(Arc<WhereJobsRan>);

impl EventListener for InstallProbe {
    fn on_compaction_completed(&self, _info: &CompactionInfo) {
        self.0.installs.lock().unwrap().push(this_thread());
    }
}

/// `(name, nice)` of every thread of this process whose name starts with
/// `strata-lsm` (names are cut at 15 bytes by the kernel).
fn engine_threads() -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("task entry").path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        let name = name.trim().to_string();
        if !name.starts_with("strata-lsm") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        out.push((name, nice_in(&stat)));
    }
    out.sort();
    out
}

/// `engine_threads()` once `done` holds of it, or after 10 s.
fn settled(done: impl Fn(&[(String, i32)]) -> bool) -> Vec<(String, i32)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let threads = engine_threads();
        if done(&threads) || std::time::Instant::now() > deadline {
            return threads;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The nice value in a `/proc/.../stat` line: after the name in
/// parentheses, state is field 3 and nice field 19.
fn nice_in(stat: &str) -> i32 {
    let rest = &stat[stat.rfind(')').expect("stat has a name") + 2..];
    rest.split_whitespace()
        .nth(16)
        .expect("nice field")
        .parse()
        .expect("nice is a number")
}

/// This thread's nice value, which the engine's threads start from.
fn own_nice() -> i32 {
    nice_in(&std::fs::read_to_string("/proc/thread-self/stat").expect("own stat"))
}

#[test]
fn flushes_and_installs_keep_the_priority_and_merges_run_nicer() {
    let base = own_nice();
    let fs = MemFs::new();

    let mut o = small_options();
    o.background_threads = 4;
    o.compaction_nice = 7;
    let probes = Arc::new(WhereJobsRan::default());
    let mut filters: HashMap<String, Arc<dyn CompactionFilter>> = HashMap::new();
    filters.insert("default".into(), Arc::new(MergeProbe(probes.clone())));
    let hooks = Hooks {
        compaction_filters: filters,
        listeners: vec![Arc::new(InstallProbe(probes.clone()))],
        ..Hooks::default()
    };
    let dyn_fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Db::open_with(dyn_fs, DIR, o, hooks).expect("open");
    let nicer = (base + 7).min(19);
    let threads = settled(|t| t.len() == 5);
    let flush: Vec<_> = threads
        .iter()
        .filter(|(n, _)| n.starts_with("strata-lsm-flus"))
        .collect();
    let compact: Vec<_> = threads
        .iter()
        .filter(|(n, _)| n.starts_with("strata-lsm-comp"))
        .collect();
    assert_eq!(flush.len(), 1, "a quarter of 4 threads flush: {threads:?}");
    assert_eq!(compact.len(), 3, "the rest compact: {threads:?}");
    assert!(
        threads.iter().all(|(_, nice)| *nice == base),
        "every pool thread keeps the priority: {threads:?}"
    );

    // The split pool still flushes and compacts: enough writes for several
    // flushes and an L0 compaction, all readable. Each key is written
    // twice, so that L0 files overlap and compactions merge (a file that
    // overlaps nothing only moves down, with no merge).
    let cf = db.default_column_family();
    for i in (0..2_000u32).chain(0..2_000) {
        let key = format!("key{i:06}");
        db.put(&WriteOptions::default(), &cf, key.as_bytes(), &[7u8; 64])
            .expect("put");
    }
    db.flush(&cf, true).expect("flush");
    // The compaction threads take L0 under its trigger (2 files here).
    let level0 = || {
        db.property(&cf, "strata.num-files-at-level0")
            .expect("property")
            .expect("known property")
            .parse::<usize>()
            .expect("a count")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while level0() >= 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(level0() < 2, "the compaction threads emptied L0");
    let files: usize = db
        .property(&cf, "strata.num-files")
        .expect("property")
        .expect("known property")
        .parse()
        .expect("a count");
    assert!(files > level0(), "L0 went down a level: {files} files");
    for i in (0..2_000u32).step_by(97) {
        let key = format!("key{i:06}");
        assert_eq!(
            db.get(&Default::default(), &cf, key.as_bytes())
                .expect("get"),
            Some(vec![7u8; 64])
        );
    }
    db.close().expect("close");
    assert!(engine_threads().is_empty(), "close joins every thread");
    // Each merge ran on a thread of its own, niced; each install on a
    // compaction thread, not.
    let merges = probes.merges.lock().unwrap().clone();
    let installs = probes.installs.lock().unwrap().clone();
    assert!(
        !merges.is_empty() && !installs.is_empty(),
        "merges {merges:?}, installs {installs:?}"
    );
    assert!(
        merges
            .iter()
            .all(|(n, nice)| n == "strata-lsm-merge" && *nice == nicer),
        "merges ran niced: {:?}",
        &merges[..merges.len().min(4)]
    );
    assert!(
        installs
            .iter()
            .all(|(n, nice)| n.starts_with("strata-lsm-compact") && *nice == base),
        "installs kept the priority: {installs:?}"
    );

    let mut o = small_options();
    o.background_threads = 1;
    o.compaction_nice = 7;
    let db = open(&fs, o).expect("reopen");
    let threads = settled(|t| t.iter().any(|(n, _)| n.starts_with("strata-lsm-bg")));
    let pool: Vec<_> = threads
        .iter()
        .filter(|(n, _)| !n.starts_with("strata-lsm-wal"))
        .collect();
    assert_eq!(pool.len(), 1, "{threads:?}");
    assert!(pool[0].0.starts_with("strata-lsm-bg"), "{threads:?}");
    assert_eq!(
        pool[0].1, base,
        "a lone thread keeps the priority: {threads:?}"
    );
    db.close().expect("close");
}
