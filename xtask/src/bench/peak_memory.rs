//! The memory a measured step of the bench takes: Linux's resident-set high-water mark of this
//! process (`VmHWM` in `/proc/self/status`), reset just before the step by writing `5` to
//! `/proc/self/clear_refs`, minus the resident set at that moment (`VmRSS`). So the figure is
//! the whole process's peak during the step above what it already held (the input batches,
//! the runtime), not counting memory the allocator kept from earlier steps and reused.
//! Elsewhere than Linux, or where the reset is refused, there is no figure.

use std::fmt::Write as _;

use super::report::SizeResult;

/// A `kB` field of `/proc/self/status`, in bytes.
fn status_bytes(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resets the high-water mark; returns the resident set now, or `None` when that is not
/// possible here.
fn reset() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_bytes(&status, "VmRSS:")
}

/// The high-water mark since the last [`reset`].
fn high_water() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_bytes(&status, "VmHWM:")
}

/// Runs `step`; returns its result and the peak resident memory it added (see the module
/// doc), `None` when not measurable.
pub fn peak_of<T>(step: impl FnOnce() -> T) -> (T, Option<u64>) {
    let before = reset();
    let out = step();
    let added = match (before, high_water()) {
        (Some(b), Some(h)) => Some(h.saturating_sub(b)),
        _ => None,
    };
    (out, added)
}

/// The larger of two optional figures.
pub fn max(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn figure(bytes: Option<u64>, input: u64) -> String {
    match bytes {
        Some(b) if input > 0 => format!(
            "{:.1} ({:.2}x)",
            b as f64 / (1u64 << 20) as f64,
            b as f64 / input as f64
        ),
        Some(b) => format!("{:.1}", b as f64 / (1u64 << 20) as f64),
        None => "-".to_string(),
    }
}

/// The write-memory table: per size, the input's Arrow size and the peak resident memory each
/// writer added (MiB, and as a multiple of the input), the largest over the runs.
pub fn write_memory_table(results: &[SizeResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "| rows | input (Arrow, MiB) | arbor COW bulk insert: peak RSS added (MiB, x input) | arrow-rs parquet write | arrow-rs parquet write, meta columns added |\n\
         |---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {} | {} |",
            r.rows,
            r.input_bytes as f64 / (1u64 << 20) as f64,
            figure(r.cow_write_rss, r.input_bytes),
            figure(r.raw_write_rss, r.input_bytes),
            figure(r.raw_meta_write_rss, r.input_bytes),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_status_bytes_reads_kib_fields() {
        let s = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_bytes(s, "VmHWM:"), Some(2 << 20));
        assert_eq!(status_bytes(s, "VmRSS:"), Some(1 << 20));
        assert_eq!(status_bytes(s, "VmSwap:"), None);
    }

    #[test]
    fn test_peak_of_sees_an_allocation_where_measurable() {
        let (len, added) = peak_of(|| {
            let v = vec![1u8; 64 << 20];
            std::hint::black_box(&v).len()
        });
        assert_eq!(len, 64 << 20);
        if let Some(added) = added {
            assert!(added >= 32 << 20, "{added}");
        }
    }

    #[test]
    fn test_write_memory_table_ratio_to_input() {
        let r = SizeResult {
            rows: 10,
            input_bytes: 1 << 20,
            cow_write_rss: Some(2 << 20),
            ..SizeResult::default()
        };
        let t = write_memory_table(&[r]);
        assert!(t.contains("| 10 | 1.0 | 2.0 (2.00x) | - | - |"), "{t}");
    }
}
