//! The options of leveled compaction: every limit in one place, each with
//! its default, minimum and maximum. [`CompactionOptions::validate`] checks
//! them before the engine uses them; a TOML config may name any subset of
//! the fields (the rest take their defaults) and no unknown field.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::version::NUM_LEVELS_MAX;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// How the engine shapes its levels and paces compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionOptions {
    /// Levels of the tree, L0 included. Default 7; 2 to 16.
    pub num_levels: usize,
    /// L0 files that make L0 due for compaction into the base level.
    /// Default 4; 1 to 1,000.
    pub level0_compaction_trigger: usize,
    /// L0 files at which the engine slows writes down. Default 20; at least
    /// `level0_compaction_trigger`, at most 10,000.
    pub level0_slowdown_trigger: usize,
    /// L0 files at which the engine stops writes until compaction catches
    /// up. Default 36; at least `level0_slowdown_trigger`, at most 10,000.
    pub level0_stop_trigger: usize,
    /// Target size of the base level (the level L0 compacts into), in bytes.
    /// Default 256 MiB; 4 KiB to 1 TiB.
    pub base_level_bytes: u64,
    /// Ratio of each level's target to the target of the level above.
    /// Default 10; 2 to 1,000.
    pub level_size_multiplier: u64,
    /// Size at which compaction and flush outputs are cut, in bytes.
    /// Default 64 MiB; 4 KiB (tests that want many files) to 4 GiB.
    pub target_file_bytes: u64,
    /// Most bytes one compaction should read (inputs of both levels), a soft
    /// limit: a single input file and its overlap are always allowed.
    /// Default 1.6 GiB (25 x the default target file size); at least
    /// `target_file_bytes`, at most 1 TiB.
    pub max_compaction_bytes: u64,
    /// Level targets follow the size of the last level (RocksDB's
    /// `level_compaction_dynamic_level_bytes`); otherwise L1's target is
    /// `base_level_bytes` and each level below multiplies it. Default true.
    pub dynamic_level_bytes: bool,
    /// Estimated compaction debt at which the engine slows writes down, in
    /// bytes. Default 64 GiB; 0 (never) or at least 1 MiB.
    pub soft_pending_compaction_bytes: u64,
    /// Estimated compaction debt at which the engine stops writes, in bytes.
    /// Default 256 GiB; 0 (never) or at least `soft_pending_compaction_bytes`.
    pub hard_pending_compaction_bytes: u64,
    /// Bytes per second that flush and compaction may write together;
    /// 0 is unlimited. Default 0; at most 64 GiB/s.
    pub rate_limit_bytes_per_sec: u64,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            num_levels: 7,
            level0_compaction_trigger: 4,
            level0_slowdown_trigger: 20,
            level0_stop_trigger: 36,
            base_level_bytes: 256 * MIB,
            level_size_multiplier: 10,
            target_file_bytes: 64 * MIB,
            max_compaction_bytes: 25 * 64 * MIB,
            dynamic_level_bytes: true,
            soft_pending_compaction_bytes: 64 * GIB,
            hard_pending_compaction_bytes: 256 * GIB,
            rate_limit_bytes_per_sec: 0,
        }
    }
}

impl CompactionOptions {
    /// Checks every field against its bounds and the fields against each
    /// other; the error names the first field out of bounds.
    pub fn validate(&self) -> Result<()> {
        fn check(ok: bool, field: &str, rule: &str) -> Result<()> {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "compaction options: {field} {rule}"
                )))
            }
        }
        check(
            (2..=NUM_LEVELS_MAX).contains(&self.num_levels),
            "num_levels",
            "must be 2..=16",
        )?;
        check(
            (1..=1_000).contains(&self.level0_compaction_trigger),
            "level0_compaction_trigger",
            "must be 1..=1000",
        )?;
        check(
            (self.level0_compaction_trigger..=10_000).contains(&self.level0_slowdown_trigger),
            "level0_slowdown_trigger",
            "must be level0_compaction_trigger..=10000",
        )?;
        check(
            (self.level0_slowdown_trigger..=10_000).contains(&self.level0_stop_trigger),
            "level0_stop_trigger",
            "must be level0_slowdown_trigger..=10000",
        )?;
        check(
            (4 * KIB..=1024 * GIB).contains(&self.base_level_bytes),
            "base_level_bytes",
            "must be 4 KiB..=1 TiB",
        )?;
        check(
            (2..=1_000).contains(&self.level_size_multiplier),
            "level_size_multiplier",
            "must be 2..=1000",
        )?;
        check(
            (4 * KIB..=4 * GIB).contains(&self.target_file_bytes),
            "target_file_bytes",
            "must be 4 KiB..=4 GiB",
        )?;
        check(
            (self.target_file_bytes..=1024 * GIB).contains(&self.max_compaction_bytes),
            "max_compaction_bytes",
            "must be target_file_bytes..=1 TiB",
        )?;
        check(
            self.soft_pending_compaction_bytes == 0 || self.soft_pending_compaction_bytes >= MIB,
            "soft_pending_compaction_bytes",
            "must be 0 or at least 1 MiB",
        )?;
        check(
            self.hard_pending_compaction_bytes == 0
                || self.hard_pending_compaction_bytes >= self.soft_pending_compaction_bytes,
            "hard_pending_compaction_bytes",
            "must be 0 or at least soft_pending_compaction_bytes",
        )?;
        check(
            self.rate_limit_bytes_per_sec <= 64 * GIB,
            "rate_limit_bytes_per_sec",
            "must be at most 64 GiB/s",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bound_names_its_field() {
        CompactionOptions::default().validate().unwrap();
        let bad = |f: fn(&mut CompactionOptions), field: &str| {
            let mut o = CompactionOptions::default();
            f(&mut o);
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{e} should name {field}");
        };
        bad(|o| o.num_levels = 1, "num_levels");
        bad(|o| o.num_levels = 17, "num_levels");
        bad(
            |o| o.level0_compaction_trigger = 0,
            "level0_compaction_trigger",
        );
        bad(|o| o.level0_slowdown_trigger = 3, "level0_slowdown_trigger");
        bad(|o| o.level0_stop_trigger = 19, "level0_stop_trigger");
        bad(|o| o.base_level_bytes = 1, "base_level_bytes");
        bad(|o| o.level_size_multiplier = 1, "level_size_multiplier");
        bad(|o| o.target_file_bytes = 4095, "target_file_bytes");
        bad(|o| o.max_compaction_bytes = 1, "max_compaction_bytes");
        bad(
            |o| o.soft_pending_compaction_bytes = 5,
            "soft_pending_compaction_bytes",
        );
        bad(
            |o| o.hard_pending_compaction_bytes = GIB,
            "hard_pending_compaction_bytes",
        );
        bad(
            |o| o.rate_limit_bytes_per_sec = u64::MAX,
            "rate_limit_bytes_per_sec",
        );
    }

    #[test]
    fn a_config_names_some_fields_and_no_unknown_one() {
        let o: CompactionOptions =
            serde_json::from_str(r#"{"num_levels": 5, "rate_limit_bytes_per_sec": 1000}"#).unwrap();
        assert_eq!(o.num_levels, 5);
        assert_eq!(o.rate_limit_bytes_per_sec, 1000);
        assert_eq!(o.level0_compaction_trigger, 4);
        assert!(serde_json::from_str::<CompactionOptions>(r#"{"num_level": 5}"#).is_err());
        let back: CompactionOptions =
            serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
    }
}
