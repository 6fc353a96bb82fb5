//! Pointing the index at purge's copies, group by group, only where it still
//! points at the copied data: a write made during the copy always wins.

use crate::index::{GroupIndex, Run, Runs};
use crate::Engine;

use super::select::{GroupCopy, Piece};

impl Engine {
    /// Points the group's runs and keys at their copies where they still point
    /// at the originals. Returns false if anything copied had changed
    /// meanwhile, or if copies were written that are not installed: the
    /// rewrite queue then holds copies that only later records keep from
    /// coming back.
    pub(super) fn install(&self, copy: &GroupCopy) -> bool {
        // Fresh entries written before the group passed the limit are not
        // installed (see `copy.rs`).
        let mut intact = !(copy.over && copy.fresh_written);
        let Some(g) = self.index.group(copy.group) else {
            return false;
        };
        let mut g = g.write();
        let installed = if copy.over {
            copy.carried
        } else {
            copy.runs.len()
        };
        // Pieces are in index order, the carried ones first.
        let pieces = if copy.over {
            let fresh_first = copy.fresh_first();
            &copy.pieces[..copy.pieces.partition_point(|p| p.first < fresh_first)]
        } else {
            &copy.pieces[..]
        };
        let before = g.rewrite_bytes();
        intact &= replace_runs(&mut g, &copy.runs[..installed], pieces);
        // What the group now has in the rewrite queue: when the rewrite queue
        // is being compacted its copies there were just read and counted,
        // otherwise they are what they were; plus the fresh entries copied.
        let kept = if copy.carried > 0 {
            copy.carried_bytes
        } else {
            before
        };
        let fresh = if copy.over {
            0
        } else {
            copy.bytes - copy.carried_bytes
        };
        g.copied_bytes = kept + fresh;
        for kv in &copy.kvs {
            let Some(copied) = kv.copy else {
                continue;
            };
            match g.kvs.get_mut(&kv.key) {
                Some(slot) if slot.file == kv.file => slot.file = copied,
                _ => intact = false,
            }
        }
        intact
    }
}

/// Replaces each run of `g` that is (what is left of) one of `originals` by
/// the same entries in `pieces`, which hold the originals' entries in index
/// order. Returns false unless every original was found whole.
///
/// A run is usually copied into one piece and replaced in place; a run split
/// over several pieces (an item larger than a record may be) makes several.
fn replace_runs(g: &mut GroupIndex, originals: &[Run], pieces: &[Piece]) -> bool {
    if originals.is_empty() {
        return true;
    }
    let mut matched = 0;
    let mut whole = true;
    let mut split = Vec::new();
    for at in 0..g.runs.len() {
        let run = g.runs.get(at).expect("in range");
        // Originals are contiguous and sorted: the one that would hold
        // `run.first`. A run is matched by its item and its range, since
        // several runs may share one item (an earlier copy).
        let Some(original) = originals
            .partition_point(|o| o.first <= run.first)
            .checked_sub(1)
            .map(|i| &originals[i])
            .filter(|o| {
                o.record == run.record && o.body_offset == run.body_offset && run.end() <= o.end()
            })
        else {
            continue;
        };
        let copies = copies_of(&run, pieces);
        let covered = copies.clone().last().is_some_and(|c| c.end() == run.end());
        debug_assert!(covered, "a copy misses entries of the run it replaces");
        if !covered {
            // Keep the original rather than lose the entries from the index.
            continue;
        }
        matched += 1;
        whole &= run.first == original.first && run.end() == original.end();
        let mut copies = copies;
        let first = copies.next().expect("covered");
        if first.end() == run.end() {
            g.runs.set(at, first);
        } else {
            split.push(at);
        }
    }
    if !split.is_empty() {
        let old = std::mem::take(&mut g.runs);
        let mut runs = Runs::default();
        let mut split = split.into_iter().peekable();
        for (at, run) in old.iter().enumerate() {
            if split.next_if_eq(&at).is_some() {
                copies_of(&run, pieces).for_each(|c| runs.push_back(c));
            } else {
                runs.push_back(run);
            }
        }
        g.runs = runs;
    }
    whole && matched == originals.len()
}

/// The runs of `pieces` that hold `run`'s entries, cut to its range, in
/// order, as far as they continue one another from `run.first`.
fn copies_of<'p>(run: &Run, pieces: &'p [Piece]) -> impl Iterator<Item = Run> + Clone + 'p {
    let (from, to) = (run.first, run.end());
    let start = pieces.partition_point(|p| p.first + p.count as u64 <= from);
    let mut next = from;
    pieces[start..]
        .iter()
        .take_while(move |p| p.first < to)
        .map_while(move |p| {
            if p.first > next {
                return None;
            }
            let first = next;
            let end = to.min(p.first + p.count as u64);
            next = end;
            Some(Run {
                first,
                count: (end - first) as u32,
                skip: (first - p.first) as u32,
                record: p.record,
                body_offset: p.body_offset,
                item_count: p.count,
            })
        })
}
