//! Compaction: the machinery that produces SST files from memtables (flush)
//! and from other SST files (leveled compaction), for the engine to install.
//!
//! One concept per file:
//! - `options`: [`CompactionOptions`], every limit with its bounds;
//! - `picker`: which files to compact next (dynamic level sizes, scores,
//!   clean cuts, trivial moves, manual ranges, compaction debt);
//! - `output`: writing a sorted run (snapshot-stripe garbage collection,
//!   range tombstones, the compaction filter), shared by `flush` and `job`;
//!   `outputs`: its files (tombstones per file, cleanup on error);
//!   `grandparents`: where outputs are closed (the target size, and the
//!   boundaries of the files in the level below the output);
//! - `separate`: key-value separation inside a run (values to blob files,
//!   references to the SST); `blob_gc`: relocating values out of blob files
//!   with too much garbage, and the in-place rewrites that do it when no
//!   compaction is due;
//! - `flush`: memtables to L0 files; `job`: a compaction to a version edit;
//! - `rate_limiter`: the token bucket that paces flush and compaction.
//!
//! Nothing here installs a version or deletes an input: the engine installs
//! the returned edit and its obsolete-file queue deletes the inputs once no
//! reader holds them. The rules are in `docs/lsm.md` (Compaction).

mod blob_gc;
mod flush;
mod grandparents;
mod job;
mod options;
mod output;
mod outputs;
mod picker;
mod rate_limiter;
mod separate;

pub use blob_gc::{
    blob_gc_candidates, blob_space_amp, blob_value_and_live_bytes, garbage_ratio, pick_blob_gc,
    BlobGc, GcPolicy, ReadBlobValue,
};
pub use flush::flush_memtables;
pub use job::{run_compaction, CompactionStats};
pub use options::CompactionOptions;
pub use output::{
    blob_file_name, sst_file_name, write_sorted_run, write_sorted_run_with_stats, CollectorFactory,
    CompactionFilter, FilterDecision, OutputContext, RunStats,
};
pub use picker::{
    base_level, level_targets, pending_compaction_bytes, pick, pick_manual, Compaction,
    CompactionReason,
};
pub use rate_limiter::{Clock, RateLimiter, SystemClock};
pub use separate::BlobOutput;
