//! Starting writeback as a file grows, so that its final sync is short.

use crate::File;

/// Asks the OS to write a growing file back every `every` bytes
/// ([`File::start_writeback`]).
///
/// Without it a file written at hundreds of MB/s piles its pages up dirty
/// until its sync, and on ext4 (`data=ordered`) a journal commit, such as
/// the one a WAL's fdatasync makes, waits for them too: a WAL sync took
/// 160 ms here behind a 64 MiB blob file written by a compaction.
#[derive(Debug, Clone)]
pub struct WritebackPacer {
    every: u64,
    done: u64,
}

impl WritebackPacer {
    /// Writeback every `every` bytes, counted from `start`.
    pub fn new(every: u64, start: u64) -> WritebackPacer {
        WritebackPacer { every, done: start }
    }

    /// Called after writing up to `end`: starts writeback of what was
    /// written since the last call that did. The hint's error is ignored:
    /// the kernel keeps a writeback error against the file, and the file's
    /// sync reports it.
    pub fn wrote(&mut self, file: &dyn File, end: u64) {
        if let Some((offset, len)) = self.due(end) {
            let _ = file.start_writeback(offset, len);
        }
    }

    /// Called after writing up to `end`: the range whose writeback is due
    /// (`offset`, `len`), for a caller that starts it elsewhere (another
    /// thread: the hint can block while the device queue is full).
    pub fn due(&mut self, end: u64) -> Option<(u64, u64)> {
        if end >= self.done + self.every {
            let range = (self.done, end - self.done);
            self.done = end;
            Some(range)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::Path;
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::WritebackPacer;
    use crate::{File, FileSystem, MemFs};

    /// A file that records the writeback ranges asked of it.
    #[derive(Debug)]
    struct Recording {
        inner: Arc<dyn File>,
        asked: Mutex<Vec<(u64, u64)>>,
    }

    impl File for Recording {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
            self.inner.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.inner.write_at(offset, data)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.inner.sync_data()
        }
        fn sync_all(&self) -> io::Result<()> {
            self.inner.sync_all()
        }
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
        fn allocate(&self, len: u64) -> io::Result<()> {
            self.inner.allocate(len)
        }
        fn truncate(&self, len: u64) -> io::Result<()> {
            self.inner.truncate(len)
        }
        fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
            self.asked.lock().push((offset, len));
            Err(io::Error::other("a hint may fail"))
        }
    }

    #[test]
    fn writeback_is_asked_for_each_stretch_once_it_reaches_the_step() {
        let fs = MemFs::new();
        let file = Recording {
            inner: fs.create(Path::new("/f")).unwrap(),
            asked: Mutex::new(Vec::new()),
        };
        let mut pacer = WritebackPacer::new(100, 10);
        for end in [50, 109, 110, 150, 260, 300, 365] {
            pacer.wrote(&file, end);
        }
        // Contiguous, from the start offset, none shorter than the step.
        assert_eq!(*file.asked.lock(), vec![(10, 100), (110, 150), (260, 105)]);
    }
}
