//! Which blob blocks enter the block cache: a block read by a point lookup
//! enters on its second read within a window, not on its first (TinyLFU's
//! "doorkeeper", alone).
//!
//! Why: a point read of a separated value reads one blob block. When reads
//! spread over more blob data than the cache holds (a 1 KiB value per block,
//! gigabytes of them), inserting every block read costs an insert and an
//! eviction per read, about a fifth of a warm 1 KiB point read's CPU in a
//! profile, for a block that is seldom read again before it is evicted; and
//! each of those inserts pushes out a block of references that every read
//! needs. A block read twice within the window (a hot key, or its
//! neighbours) still enters, one read later.
//!
//! The window is a bitmap with one hash per key: a read sets the key's bit,
//! and a key whose bit was already set is admitted. Once a quarter of the
//! bits are set the map is cleared, so a false "seen" (another key's bit)
//! stays under a quarter, and "twice within the window" means within about
//! as many first reads as the cache holds 1 KiB blocks.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rustc_hash::FxBuildHasher;

use super::BlockKey;

/// Bits of the window per block the cache holds at [`BLOCK_BYTES`].
const BITS_PER_BLOCK: u64 = 4;

/// The block size the window is sized for: the default blob block.
const BLOCK_BYTES: u64 = 1024;

/// Words of the smallest and the largest window (8 KiB and 64 MiB).
const WORDS_MIN: u64 = 1 << 10;
const WORDS_MAX: u64 = 1 << 23;

/// Remembers the blocks read once, for a window.
pub(crate) struct Doorkeeper {
    words: Box<[AtomicU64]>,
    /// Bits set since the last clear.
    set: AtomicU64,
    /// Clear once this many bits are set.
    clear_at: u64,
}

impl std::fmt::Debug for Doorkeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorkeeper")
            .field("bits", &(self.words.len() * 64))
            .field("set", &self.set.load(Relaxed))
            .finish()
    }
}

impl Doorkeeper {
    /// A window sized for a cache of `capacity_bytes`.
    pub(crate) fn new(capacity_bytes: u64) -> Doorkeeper {
        let bits = (capacity_bytes / BLOCK_BYTES).saturating_mul(BITS_PER_BLOCK);
        let words = (bits / 64).clamp(WORDS_MIN, WORDS_MAX).next_power_of_two();
        Doorkeeper {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            set: AtomicU64::new(0),
            clear_at: words * 64 / 4,
        }
    }

    /// True when `key` was read before within the window; notes it read.
    pub(crate) fn seen_before(&self, key: BlockKey) -> bool {
        // Fx's last step is a multiply: its high bits are the mixed ones.
        let h = FxBuildHasher.hash_one(key);
        let mask = self.words.len() as u64 - 1;
        let word = &self.words[((h >> 40) & mask) as usize];
        let bit = 1u64 << ((h >> 34) & 63);
        if word.load(Relaxed) & bit != 0 || word.fetch_or(bit, Relaxed) & bit != 0 {
            return true;
        }
        if self.set.fetch_add(1, Relaxed) + 1 >= self.clear_at {
            // Two readers may both clear: the window merely restarts twice.
            self.set.store(0, Relaxed);
            for w in self.words.iter() {
                w.store(0, Relaxed);
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_admitted_on_its_second_read() {
        let d = Doorkeeper::new(1 << 20);
        assert!(!d.seen_before((7, 4096)));
        assert!(d.seen_before((7, 4096)));
        assert!(!d.seen_before((7, 8192)), "another offset is another block");
        assert!(!d.seen_before((8, 4096)), "another file is another block");
    }

    #[test]
    fn the_window_forgets_once_a_quarter_of_it_is_set() {
        let d = Doorkeeper::new(1 << 20);
        let clear_at = d.clear_at;
        assert!(!d.seen_before((1, 0)));
        // New keys until the window clears (collisions are seen, not new).
        let mut offset = 0u64;
        let mut new = 1;
        while new < clear_at {
            offset += 1024;
            if !d.seen_before((2, offset)) {
                new += 1;
            }
        }
        assert_eq!(d.set.load(Relaxed), 0, "cleared");
        assert!(!d.seen_before((1, 0)), "forgotten after the clear");
    }

    #[test]
    fn false_sightings_stay_rare_before_a_clear() {
        let d = Doorkeeper::new(64 << 20);
        let n = d.clear_at - 1;
        let seen = (0..n).filter(|i| d.seen_before((3, i * 1024))).count() as u64;
        // At most a quarter of the bits are set when the last key is tried.
        assert!(seen < n / 6, "{seen} of {n} distinct keys reported seen");
    }
}
