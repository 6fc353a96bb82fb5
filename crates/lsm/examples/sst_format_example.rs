//! Prints the worked example of `docs/format/sst.md`: a tiny SST file (three
//! versions in two data blocks, a range tombstone, a bloom filter, no
//! compression), region by region in hex, each region decoded.
//!
//! Run: `cargo run -p strata-lsm --example sst_format_example`.

use std::path::Path;
use std::sync::Arc;

use strata_fs::{FileSystem, MemFs};
use strata_lsm::sst::{
    format::FOOTER_LEN as FOOTER_LEN_BYTES, unseal_block, Block, BlockHandle, Compression,
    KeyOrder, SstWriterOptions,
};
use strata_lsm::{InternalKey, SstReader, SstWriter, ValueKind};

fn hex(bytes: &[u8], base: u64) {
    for (i, line) in bytes.chunks(16).enumerate() {
        let h: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        let text: String = line
            .iter()
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
            .collect();
        println!(
            "  {:04x}: {:<48} {}",
            base + 16 * i as u64,
            h.join(" "),
            text
        );
    }
}

fn show(file: &[u8], name: &str, h: BlockHandle) {
    let end = (h.offset + h.size + 5) as usize;
    println!(
        "{name}: offset {}, {} stored bytes + 5-byte trailer",
        h.offset, h.size
    );
    hex(&file[h.offset as usize..end], h.offset);
}

fn entries(raw: Vec<u8>, order: KeyOrder) -> Vec<(Vec<u8>, Vec<u8>)> {
    let block = Arc::new(Block::decode(raw, order).expect("valid block"));
    let mut it = block.iter();
    let mut out = Vec::new();
    it.first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    out
}

fn show_index(file: &[u8], at: BlockHandle, index: &[(Vec<u8>, Vec<u8>)]) {
    show(file, "index block (single level)", at);
    for (sep, handle) in index {
        let h = BlockHandle::decode(handle).expect("handle");
        println!(
            "    {} -> offset {}, size {}",
            show_key(sep),
            h.offset,
            h.size
        );
    }
    println!();
}

fn show_key(k: &[u8]) -> String {
    match InternalKey::decode(k) {
        Ok(ik) => format!("{ik:?}"),
        Err(_) => format!("{:?}", String::from_utf8_lossy(k)),
    }
}

fn main() {
    let fs = MemFs::new();
    let path = Path::new("/000042.sst");
    let options = SstWriterOptions {
        block_size_bytes: 32,
        compression: Compression::None,
        ..SstWriterOptions::default()
    };
    let mut w = SstWriter::create(&fs, path, options).expect("create");
    for (k, seqno, kind, v) in [
        (&b"apple"[..], 3, ValueKind::Put, &b"red"[..]),
        (b"apple", 1, ValueKind::Delete, b""),
        (b"cherry", 2, ValueKind::Put, b"dark"),
    ] {
        w.add(InternalKey::new(k, seqno, kind).encoded(), v)
            .expect("add");
    }
    w.add_range_delete(b"d", b"f", 4).expect("range delete");
    let info = w.finish().expect("finish");

    let f = fs.open(path, false).expect("open");
    let mut file = vec![0u8; info.file_size as usize];
    f.read_exact_at(0, &mut file).expect("read");
    let reader = SstReader::open(&fs, path, 42, None).expect("open");
    let footer = reader.footer();
    println!("file: {} bytes\n", file.len());

    let index_raw = unseal_block(
        &file[footer.index.offset as usize..(footer.index.offset + footer.index.size + 5) as usize],
    )
    .expect("index");
    let index = entries(index_raw, KeyOrder::Internal);
    for (i, (sep, handle)) in index.iter().enumerate() {
        let h = BlockHandle::decode(handle).expect("handle");
        show(&file, &format!("data block {i}"), h);
        let raw = unseal_block(&file[h.offset as usize..(h.offset + h.size + 5) as usize])
            .expect("block");
        for (k, v) in entries(raw, KeyOrder::Internal) {
            println!("    {} -> {:?}", show_key(&k), String::from_utf8_lossy(&v));
        }
        println!("    (indexed under separator {})\n", show_key(sep));
    }
    // Regions in file order: the filter and range-deletion blocks, the
    // index, then the properties.
    let mut meta: Vec<_> = reader.meta_index().blocks.iter().collect();
    meta.sort_by_key(|(_, h)| h.offset);
    let mut index_shown = false;
    for (name, h) in meta {
        if !index_shown && h.offset > footer.index.offset {
            show_index(&file, footer.index, &index);
            index_shown = true;
        }
        show(&file, &format!("meta block {name:?}"), *h);
        if name.ends_with("range_deletions") {
            for t in reader.range_tombstones() {
                println!(
                    "    [{:?}, {:?}) @ {}",
                    String::from_utf8_lossy(&t.start),
                    String::from_utf8_lossy(&t.end),
                    t.seqno
                );
            }
        }
        if name.ends_with("properties") {
            println!("    {:?}", reader.properties());
        }
        println!();
    }
    show(&file, "meta-index block", footer.meta_index);
    for (name, h) in &reader.meta_index().blocks {
        println!("    {name:?} -> offset {}, size {}", h.offset, h.size);
    }
    println!();
    let footer_at = file.len() - FOOTER_LEN_BYTES;
    println!("footer: offset {footer_at}, {FOOTER_LEN_BYTES} bytes");
    hex(&file[footer_at..], footer_at as u64);
    println!("    {footer:?}");
}
