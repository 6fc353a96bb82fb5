//! Prints the bytes of a tiny raftlog file: the worked example in
//! `docs/format/raftlog.md` is this program's output.

use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_raftlog::{Config, Engine, LogBatch};

fn main() {
    let fs = MemFs::new();
    let config = Config {
        preallocate: false,
        ..Config::default()
    };
    let engine = Engine::open_with_fs("/db", config, Arc::new(fs.clone())).expect("open");
    let mut batch = LogBatch::new();
    batch.add_entries(7, 5, &[b"hi".as_slice(), b"raft"]);
    batch.put(7, b"st", b"t3");
    engine.write(&mut batch, true).expect("write");
    engine.close().expect("close");
    let file = fs
        .open(std::path::Path::new("/db/0000000000000001.raftlog"), false)
        .expect("file");
    let mut bytes = vec![0u8; file.len().expect("len") as usize];
    file.read_exact_at(0, &mut bytes).expect("read");
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        println!("{:04x}: {}", i * 16, hex.join(" "));
    }
}
