use std::sync::Arc;
use strata_fs::{FileSystem, MemFs};
use strata_raftlog::{Config, Engine, LogBatch};

#[test]
fn scratch_rewrite_order() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let config = Config {
        target_file_size_bytes: 64 << 10,
        purge_threshold_bytes: 1 << 20,
        preallocate: false,
        ..Config::default()
    };
    let e = Engine::open_with_fs("/db", config.clone(), fs.clone()).unwrap();
    let mut b = LogBatch::new();
    b.add_entries(1, 1, &[b"old1".as_slice(), b"old2", b"old3"]);
    b.put(1, b"k", b"v1");
    e.write(&mut b, true).unwrap();
    for i in 1..=400u64 {
        let mut b = LogBatch::new();
        b.add_entries(2, i, &[vec![i as u8; 4000]]);
        e.write(&mut b, false).unwrap();
    }
    e.compact_to(2, 400).unwrap();
    let out = e.purge().unwrap();
    println!("{out:?}");
    let mut b = LogBatch::new();
    b.add_entries(1, 2, &[b"new2".as_slice()]);
    b.put(1, b"k", b"v2");
    e.write(&mut b, true).unwrap();
    assert_eq!(e.get(1, b"k").unwrap(), b"v2");
    e.close().unwrap();
    let e = Engine::open_with_fs("/db", config, fs.clone()).unwrap();
    println!("{:?}", fs.list(std::path::Path::new("/db")).unwrap());
    assert_eq!(e.get(1, b"k").unwrap(), b"v2");
    assert_eq!(e.last_index(1), Some(2));
    assert_eq!(e.get_entry(1, 2).unwrap().unwrap(), b"new2");
}
