//! Printing: aligned text tables for people, one JSON object per line for
//! scripts, and the small formatters both use.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// A table of rows under a header, printed with every column aligned: the
/// first column to the left (labels), the others to the right (numbers).
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Starts a table with these column titles.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// Renders the table, a rule under the header.
    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in self.rows.iter().chain([&self.header]) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |row: &[String]| {
            let mut text = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                if i == 0 {
                    let _ = write!(text, "{cell:<w$}");
                } else {
                    let _ = write!(text, "  {cell:>w$}");
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.header);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule);
        for row in &self.rows {
            line(row);
        }
        out
    }
}

/// How a comparison table gets the number a `strata/<peer>` ratio divides,
/// for one row; `None` for rows without a ratio.
pub type RatioOf<'a, T> = Option<&'a dyn Fn(&T) -> Option<f64>>;

/// Returns the `strata / peer` cells of one table row, one per peer: empty when
/// the row has no ratio (or there is no Strata run), "n/a" when a value is missing.
pub fn ratio_cells<T>(strata: Option<&T>, peers: &[&T], ratio: RatioOf<T>) -> Vec<String> {
    peers
        .iter()
        .map(|p| {
            let (Some(s), Some(f)) = (strata, ratio) else {
                return String::new();
            };
            match (f(s), f(p)) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                _ => "n/a".to_string(),
            }
        })
        .collect()
}

/// Human progress: on stdout, or on stderr when stdout carries JSON.
pub fn say(json: bool, line: String) {
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// Prints `value` as one line of JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) {
    match serde_json::to_string(value) {
        Ok(line) => println!("{line}"),
        Err(e) => eprintln!("strata-bench: cannot encode JSON: {e}"),
    }
}

/// Formats a duration for people: `850 us`, `12.3 ms`, `4.56 s`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} us")
    } else if us < 1e6 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// Formats a count with thousands separators: `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let (head, rest) = digits.split_at(digits.len() % 3);
    let groups = rest
        .as_bytes()
        .chunks(3)
        .map(|c| std::str::from_utf8(c).expect("ASCII digits"));
    let parts: Vec<&str> = std::iter::once(head)
        .filter(|h| !h.is_empty())
        .chain(groups)
        .collect();
    parts.join(",")
}

/// Formats a rate per second with a precision that suits its size.
pub fn fmt_rate(v: f64) -> String {
    if v >= 100.0 {
        fmt_count(v.round() as u64)
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Formats an optional value, "n/a" when the engine does not report it.
pub fn or_na<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_string(), f)
}

/// Returns the median of `values` (the mean of the middle two for an even
/// count), or `None` for no values.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(["metric", "a"]);
        t.row(["writes/s", "12"]).row(["p99", "1,234"]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "metric        a");
        assert_eq!(lines[1], "--------  -----");
        assert_eq!(lines[2], "writes/s     12");
        assert_eq!(lines[3], "p99       1,234");
    }

    #[test]
    fn formatters() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(1234567), "1,234,567");
        assert_eq!(fmt_duration(Duration::from_micros(850)), "850 us");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.50 s");
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
