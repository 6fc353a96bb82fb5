//! Separated values fetched ahead of a forward scan, in batches read in
//! (file, offset) order.
//!
//! A scan over separated values reads one value per key from blob files
//! that interleave in key order (after random overwrites, a value per file
//! in turn). Fetched one at a time, each value waits for its own read, and
//! a block shared by values of several keys is read again after the other
//! files' blocks. A scan that keeps moving forward instead takes its next
//! entries from the inner iterator ahead of its cursor (the inner iterator
//! stops at the upper bound, as every move does), tells `super::scan_asks`
//! which blocks they reference (what to ask the OS for, and how far ahead,
//! is decided there), and fetches their values later, a batch at a time, in
//! (file, offset) order, each file's nearby blocks in one read. The horizon
//! of taken entries doubles from [`FIRST_HORIZON_BYTES`] of blocks to
//! [`MAX_HORIZON_BYTES`], and batches from [`FIRST_BATCH`] to [`MAX_BATCH`]
//! entries: a short scan copies and reads little more than it uses, a long
//! one keeps many requests in flight.
//!
//! Invariants, while active:
//! - `pos < fetched <= len`: the separated values of `[pos, fetched)` are in
//!   `values` (one batch); `[fetched, len)` wait, holding a key and a
//!   reference (or an inline value); `asked` is their weight.
//! - The inner iterator is positioned at the first entry after `len - 1`
//!   (or not valid, or failed: `tail_error`): the entries are copies, taken
//!   at the iterator's fixed sequence number, so they stay what a cursor
//!   would see.
//! - An error belongs to the entry it was met at (a reference that does not
//!   decode, a value that does not read) or to the end of the taken entries
//!   (the inner iterator failed while taking): it is returned by the move
//!   that reaches it, never earlier, so a scan yields every entry before a
//!   damaged one, as a cursor fetching one value at a time would. Asking
//!   the OS for blocks is a hint: its failures are ignored.

use super::blob::BlobValues;
use super::scan_asks::Asks;
use crate::blob::BlobRef;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, SnapshotIterator};
use crate::key::ValueKind;
use crate::version::Version;

/// Forward arrivals at separated values, since the last seek or backward
/// move, before a scan fetches ahead: a seek and a next or two stay a point
/// read's cost, with nothing copied.
const STEPS_BEFORE_BATCHING: u32 = 3;

/// Entries of the first batch fetched; each next one is twice as long.
const FIRST_BATCH: usize = 16;

/// Entries of a batch, at most.
const MAX_BATCH: usize = 1024;

/// Value bytes a batch fetches, at most (its stored blocks counted when
/// larger): bounds the values an iterator holds.
const MAX_BATCH_BYTES: u64 = 2 << 20;

/// The weight (stored blocks, inline values) of the entries taken ahead of
/// the fetched ones when the scan starts; doubled at each batch up to
/// [`MAX_HORIZON_BYTES`].
const FIRST_HORIZON_BYTES: u64 = 32 << 10;

/// The weight of the entries taken ahead, at most: enough blocks known
/// ahead for `super::scan_asks` to ask for them in large requests while the
/// values before them are used (taking one 2 MiB batch ahead left a cold
/// scan at 0.4x one reading 1 MiB ahead in each file). An entry taken but
/// not fetched holds a key and a reference.
const MAX_HORIZON_BYTES: u64 = 32 << 20;

/// Entries taken ahead, at most (the keys of small values).
const MAX_TAKEN: usize = 32 << 10;

/// An inline value buffer larger than this is not kept for the slot's next
/// entry: slots are many, and large inline values rare.
const INLINE_KEPT_BYTES: usize = 8 << 10;

/// Blocks of one file closer than this are read (from the page cache, by
/// then) in one call: past it, copying the bytes between costs more than
/// another call.
const READ_GAP: u64 = 16 << 10;

/// One entry taken from the inner iterator.
#[derive(Debug)]
struct Entry {
    key: Vec<u8>,
    kind: ValueKind,
    /// The inline value.
    inline: Vec<u8>,
    /// The reference of a separated value.
    reference: Option<BlobRef>,
    /// Where the range of the batch's blocks this one belongs to ends.
    range_end: u64,
    /// Where its fetched value sits in the batch's `values`.
    fetched: (usize, usize),
    /// What it weighs ahead of the fetched entries: its stored block for a
    /// separated value whose block the entry before did not share (what
    /// is asked for), its bytes for an inline one (what is held).
    weight: u64,
    /// Why its value could not be had: returned when the cursor gets here.
    error: Option<Error>,
}

/// A forward scan's entries taken ahead of its cursor (see the module).
#[derive(Debug)]
pub(super) struct ScanAhead {
    /// Slots reused as the scan goes, with their buffers.
    entries: Vec<Entry>,
    /// The separated values of the last batch fetched: every entry in
    /// `[pos, fetched)` that is separated is from it.
    values: Vec<u8>,
    pos: usize,
    fetched: usize,
    len: usize,
    active: bool,
    /// Scratch: the indices of a batch's separated values, in (file,
    /// offset) order.
    order: Vec<u32>,
    batch: usize,
    horizon: u64,
    /// The weight of the entries in `[fetched, len)`.
    asked: u64,
    /// What is asked for, per blob file.
    asks: Asks,
    /// The inner iterator reached its end (its upper bound) while taking:
    /// every block left to read is known and asked for.
    ended: bool,
    steps: u32,
    /// The last take held no separated value: serve what is taken, then
    /// let the cursor move on its own again.
    draining: bool,
    /// The inner iterator failed while taking: returned once every entry
    /// taken before it is served.
    tail_error: Option<Error>,
}

impl Default for ScanAhead {
    fn default() -> Self {
        ScanAhead {
            entries: Vec::new(),
            values: Vec::new(),
            pos: 0,
            fetched: 0,
            len: 0,
            active: false,
            order: Vec::new(),
            batch: FIRST_BATCH,
            horizon: FIRST_HORIZON_BYTES,
            asked: 0,
            asks: Asks::default(),
            ended: false,
            steps: 0,
            draining: false,
            tail_error: None,
        }
    }
}

impl ScanAhead {
    /// Whether the cursor is an entry taken ahead (not the inner
    /// iterator's).
    pub(super) fn active(&self) -> bool {
        self.active
    }

    /// The current entry's key; empty when not active.
    pub(super) fn key(&self) -> &[u8] {
        match self.active {
            true => &self.entries[self.pos].key,
            false => &[],
        }
    }

    /// The current entry's value; empty when not active.
    pub(super) fn value(&self) -> &[u8] {
        if !self.active {
            return &[];
        }
        let e = &self.entries[self.pos];
        match e.reference {
            Some(_) => &self.values[e.fetched.0..e.fetched.0 + e.fetched.1],
            None => &e.inline,
        }
    }

    /// The current entry's kind; `Put` when not active.
    pub(super) fn kind(&self) -> ValueKind {
        match self.active {
            true => self.entries[self.pos].kind,
            false => ValueKind::Put,
        }
    }

    /// Forgets what was taken ahead and the scan's run: after a seek, a
    /// backward move or an error.
    pub(super) fn reset(&mut self) {
        self.stop();
        self.steps = 0;
    }

    fn stop(&mut self) {
        self.active = false;
        self.draining = false;
        self.tail_error = None;
        self.pos = 0;
        self.fetched = 0;
        self.len = 0;
        self.asked = 0;
        self.asks.clear();
        self.ended = false;
        self.batch = FIRST_BATCH;
        self.horizon = FIRST_HORIZON_BYTES;
    }

    /// Counts a forward arrival of the cursor at an entry that is
    /// `separated`; true when the scan should now fetch ahead from it.
    pub(super) fn arrived(&mut self, separated: bool) -> bool {
        if separated {
            self.steps = self.steps.saturating_add(1);
        }
        separated && self.steps >= STEPS_BEFORE_BATCHING
    }

    /// Starts fetching ahead from the inner iterator's entry (valid and
    /// separated): takes entries from it on and asks for their blocks, then
    /// fetches the first batch.
    pub(super) fn start<I: InternalIterator>(
        &mut self,
        inner: &mut SnapshotIterator<I>,
        blobs: &mut BlobValues,
        version: &Version,
    ) -> Result<()> {
        self.stop();
        self.take(inner, blobs, version);
        if self.len == 0 {
            // Only when the inner iterator was not valid: the caller checks.
            return self.tail_error.take().map_or(Ok(()), Err);
        }
        self.active = true;
        self.fetch_batch(inner, blobs, version);
        self.arrive()
    }

    /// Moves the cursor to the next entry taken; false when none is left
    /// and the cursor is the inner iterator's again (positioned at the entry
    /// after the last one served, or not valid).
    pub(super) fn next<I: InternalIterator>(
        &mut self,
        inner: &mut SnapshotIterator<I>,
        blobs: &mut BlobValues,
        version: &Version,
    ) -> Result<bool> {
        debug_assert!(self.active);
        self.pos += 1;
        if self.pos == self.len {
            if let Some(e) = self.tail_error.take() {
                return Err(e);
            }
            if self.draining {
                self.steps = 0;
            }
            self.stop();
            return Ok(false);
        }
        if self.pos == self.fetched {
            self.fetch_batch(inner, blobs, version);
        }
        self.arrive().map(|()| true)
    }

    /// The error of the entry the cursor just reached, if it has one.
    fn arrive(&mut self) -> Result<()> {
        match self.entries[self.pos].error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fetches the next batch of taken entries' values in (file, offset)
    /// order, each file's nearby blocks in one read, then takes more entries
    /// to keep the horizon asked for.
    fn fetch_batch<I: InternalIterator>(
        &mut self,
        inner: &mut SnapshotIterator<I>,
        blobs: &mut BlobValues,
        version: &Version,
    ) {
        let from = self.fetched;
        let mut to = from;
        let mut bytes = 0u64;
        while to < self.len && to - from < self.batch && bytes < MAX_BATCH_BYTES {
            if let Some(r) = &self.entries[to].reference {
                bytes += u64::from(r.value_len.max(r.block_size));
            }
            to += 1;
        }
        self.batch = (self.batch * 2).min(MAX_BATCH);
        for e in &self.entries[from..to] {
            self.asked = self.asked.saturating_sub(e.weight);
        }
        self.plan(from, to);
        // Each file's blocks of the batch are about to be read: what of
        // them was not asked for yet is, and a window past them.
        let mut ask = |file, from, len| blobs.read_ahead(version, file, from, len);
        let mut i = 0;
        while i < self.order.len() {
            let file = self.reference(i).file_number;
            let mut last = i;
            let mut block_bytes = u64::from(self.reference(i).block_size);
            while last + 1 < self.order.len() && self.reference(last + 1).file_number == file {
                last += 1;
                // Blocks, not values: several values share a block.
                if self.reference(last).block_offset != self.reference(last - 1).block_offset {
                    block_bytes += u64::from(self.reference(last).block_size);
                }
            }
            let need = block_end(&self.reference(last));
            self.asks
                .before_read(file, need, block_bytes, self.ended, &mut ask);
            i = last + 1;
        }
        self.values.clear();
        for &i in &self.order {
            let e = &mut self.entries[i as usize];
            let r = e.reference.expect("planned entries are separated");
            let at = self.values.len();
            match blobs.fetch_in_range(version, &e.key, &r, e.range_end, &mut self.values) {
                Ok(()) => e.fetched = (at, self.values.len() - at),
                Err(err) => {
                    self.values.truncate(at);
                    e.fetched = (at, 0);
                    e.error = Some(err);
                }
            }
        }
        self.fetched = to;
        self.horizon = (self.horizon * 2).min(MAX_HORIZON_BYTES);
        if !self.draining && self.tail_error.is_none() && self.asked < self.horizon {
            self.take(inner, blobs, version);
        }
    }

    /// Takes entries from the inner iterator into the slots after `len`
    /// until the horizon is taken, and notes their blocks with `asks`.
    fn take<I: InternalIterator>(
        &mut self,
        inner: &mut SnapshotIterator<I>,
        blobs: &mut BlobValues,
        version: &Version,
    ) {
        // The served slots go to the back, to be reused; only once they are
        // as many as the waiting ones, so that each slot moves a bounded
        // number of times (moving every waiting entry at every batch cost
        // a fifth of a scan of 1 KiB values).
        if self.pos > 0 && self.pos >= self.len - self.pos {
            for e in &mut self.entries[..self.pos] {
                if e.inline.capacity() > INLINE_KEPT_BYTES {
                    e.inline = Vec::new();
                }
            }
            self.entries[..self.len].rotate_left(self.pos);
            self.len -= self.pos;
            self.fetched -= self.pos;
            self.pos = 0;
        }
        let start = self.len;
        let mut separated = false;
        let mut last_block = None;
        while inner.valid() && self.asked < self.horizon && self.len - self.pos < MAX_TAKEN {
            if self.len == self.entries.len() {
                self.entries.push(Entry {
                    key: Vec::new(),
                    kind: ValueKind::Put,
                    inline: Vec::new(),
                    reference: None,
                    range_end: 0,
                    fetched: (0, 0),
                    weight: 0,
                    error: None,
                });
            }
            let e = &mut self.entries[self.len];
            e.key.clear();
            e.key.extend_from_slice(inner.key());
            e.kind = inner.kind();
            e.inline.clear();
            e.reference = None;
            e.error = None;
            e.weight = 0;
            if e.kind == ValueKind::BlobIndex {
                match blobs.decode_ref(&e.key, inner.value()) {
                    Ok(r) => {
                        let block = (r.file_number, r.block_offset);
                        if last_block.replace(block) != Some(block) {
                            e.weight = u64::from(r.block_size);
                        }
                        e.reference = Some(r);
                        separated = true;
                    }
                    Err(err) => e.error = Some(err),
                }
            } else {
                e.inline.extend_from_slice(inner.value());
                e.weight = e.inline.len() as u64;
            }
            self.asked += e.weight;
            self.len += 1;
            if let Err(err) = inner.next() {
                self.tail_error = Some(err);
                break;
            }
        }
        let mut ask = |file, from, len| blobs.read_ahead(version, file, from, len);
        for e in &self.entries[start..self.len] {
            if let Some(r) = &e.reference {
                self.asks
                    .note(r.file_number, r.block_offset, block_end(r), &mut ask);
            }
        }
        if !inner.valid() || self.tail_error.is_some() {
            // Nothing more will be taken: what waits is all there is, asked
            // for now, and no window goes past it.
            self.ended = true;
            self.asks.flush_all(&mut ask);
        }
        if !separated && (self.len > start || self.ended) {
            // Inline values only (or the end): the scan goes on without
            // fetching ahead. Taking nothing because `MAX_TAKEN` entries
            // wait is no reason to stop.
            self.draining = true;
        }
    }

    /// Lists the separated values of `[from, to)` in (file, offset) order in
    /// `order`, and gives each the end of its range: the blocks of its file
    /// that follow with gaps of at most [`READ_GAP`].
    fn plan(&mut self, from: usize, to: usize) {
        self.order.clear();
        self.order.extend(
            (from..to)
                .filter(|&i| self.entries[i].reference.is_some())
                .map(|i| i as u32),
        );
        let entries = &self.entries;
        self.order.sort_unstable_by_key(|&i| {
            let r = entries[i as usize].reference.expect("listed as separated");
            (r.file_number, r.block_offset)
        });
        let mut i = 0;
        while i < self.order.len() {
            let file = self.reference(i).file_number;
            let mut end = block_end(&self.reference(i));
            let mut j = i + 1;
            while j < self.order.len() {
                let r = self.reference(j);
                if r.file_number != file || r.block_offset > end.saturating_add(READ_GAP) {
                    break;
                }
                end = end.max(block_end(&r));
                j += 1;
            }
            for &k in &self.order[i..j] {
                self.entries[k as usize].range_end = end;
            }
            i = j;
        }
    }

    /// The reference of the `i`th entry of `order`.
    fn reference(&self, i: usize) -> BlobRef {
        self.entries[self.order[i] as usize]
            .reference
            .expect("listed as separated")
    }
}

/// Where the stored block a reference points into ends.
fn block_end(r: &BlobRef) -> u64 {
    r.block_offset.saturating_add(u64::from(r.block_size))
}
