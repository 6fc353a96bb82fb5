//! Reading the entries of one run out of its record's payload, for the read
//! path and for purge.

use crate::index::Run;

/// The entries of one run, taken from its record's payload in one pass over
/// the item's length table: calling `entry_at` for each would sum the table
/// from its start every time, quadratic in the item's size (a rewritten
/// group's whole log may be one item).
pub(crate) struct RunEntries<'p> {
    payload: &'p [u8],
    /// Offset of the item's length table.
    table: usize,
    /// Position of the next entry in the item, and one past the last wanted.
    next: usize,
    end: usize,
    /// Offset of the next entry's bytes.
    data: usize,
}

impl<'p> RunEntries<'p> {
    pub fn new(payload: &'p [u8], run: &Run) -> std::result::Result<Self, &'static str> {
        let end = run
            .skip
            .checked_add(run.count)
            .filter(|e| *e <= run.item_count)
            .ok_or("run reaches past its entries item")? as usize;
        let table = run.body_offset as usize;
        let data = (run.item_count as usize)
            .checked_mul(4)
            .and_then(|len| table.checked_add(len))
            .filter(|d| *d <= payload.len())
            .ok_or("entry length table past the payload")?;
        let mut it = RunEntries {
            payload,
            table,
            next: 0,
            end,
            data,
        };
        for _ in 0..run.skip {
            it.data = it
                .data
                .checked_add(it.len(it.next))
                .ok_or("entry lengths overflow")?;
            it.next += 1;
        }
        Ok(it)
    }

    /// Returns the run's entries as they lie in the payload, back to back,
    /// and puts their lengths in `lens` (emptied first).
    pub fn packed(self, lens: &mut Vec<u32>) -> std::result::Result<&'p [u8], &'static str> {
        lens.clear();
        let start = self.data;
        let mut end = start;
        for i in self.next..self.end {
            let len = self.len(i);
            end = end.checked_add(len).ok_or("entry lengths overflow")?;
            lens.push(len as u32);
        }
        self.payload.get(start..end).ok_or("entry past the payload")
    }

    /// The length of entry `i`, whose table slot is inside the payload (`new`
    /// checked the whole table).
    fn len(&self, i: usize) -> usize {
        let at = self.table + 4 * i;
        let b = &self.payload[at..at + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
    }
}

impl<'p> Iterator for RunEntries<'p> {
    type Item = std::result::Result<&'p [u8], &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let len = self.len(self.next);
        let Some(bytes) = self
            .data
            .checked_add(len)
            .and_then(|stop| self.payload.get(self.data..stop))
        else {
            self.next = self.end;
            return Some(Err("entry past the payload"));
        };
        self.data += len;
        self.next += 1;
        Some(Ok(bytes))
    }
}
