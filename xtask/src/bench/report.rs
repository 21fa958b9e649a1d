//! The benchmark's figures: medians, the machine they were measured on, and the Markdown
//! tables `cargo xtask bench data-path` prints (pasted as-is into README's Performance
//! section).

use std::fmt::Write as _;

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => v.get(mid).copied(),
        _ => Some((v.get(mid - 1)? + v.get(mid)?) / 2.0),
    }
}

/// The machine a run measured: CPU model, logical CPUs, memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// `model name` of `/proc/cpuinfo` (`unknown` elsewhere).
    pub cpu: String,
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// `MemTotal` of `/proc/meminfo` in bytes (0 when unknown).
    pub memory: u64,
}

impl Machine {
    /// Reads the machine's description from `/proc` and the standard library.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            cpu: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".to_string()),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory: mem_total(&meminfo).unwrap_or(0),
        }
    }

    /// One line: `CPU model, N logical CPUs, M GiB memory`.
    pub fn describe(&self) -> String {
        format!(
            "{}, {} logical CPUs (nproc), {:.1} GiB memory",
            self.cpu,
            self.cpus,
            self.memory as f64 / (1u64 << 30) as f64
        )
    }
}

/// The first three fields of `/proc/loadavg` (`unknown` elsewhere): how busy the machine
/// was, since other processes share the CPUs with the bench.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What one table size measured (seconds are medians over the runs unless noted).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SizeResult {
    /// Rows of the table.
    pub rows: u64,
    /// Rows the MOR upsert updated.
    pub updated_rows: u64,
    /// In-memory size of the input batches.
    pub input_bytes: u64,
    /// Base files of the COW table.
    pub cow_bytes: u64,
    /// Base files of the COW table.
    pub cow_files: usize,
    /// The plain parquet file of the raw write.
    pub raw_bytes: u64,
    /// Base files of the MOR table.
    pub mor_base_bytes: u64,
    /// Log files of the MOR table.
    pub mor_log_bytes: u64,
    /// Log files of the MOR table.
    pub mor_log_files: usize,
    /// arbor bulk insert into a new COW table.
    pub cow_write: f64,
    /// arrow-rs writing the same batches to one parquet file.
    pub raw_write: f64,
    /// arrow-rs writing the same batches with the five meta columns prepended.
    pub raw_meta_write: f64,
    /// The plain parquet file with meta columns.
    pub raw_meta_bytes: u64,
    /// Peak resident memory arbor's COW bulk insert added, largest over the runs
    /// ([`super::peak_memory::peak_of`]; `None`: not measurable here).
    pub cow_write_rss: Option<u64>,
    /// Peak resident memory the plain arrow-rs write added.
    pub raw_write_rss: Option<u64>,
    /// Peak resident memory the arrow-rs write with meta columns added.
    pub raw_meta_write_rss: Option<u64>,
    /// arbor `TableReader::open` + `snapshot` of the COW table.
    pub cow_read: f64,
    /// hudi-rs reading the COW table (`None`: not measured).
    pub cow_read_peer: Option<f64>,
    /// arrow-rs reading the COW table's base files.
    pub cow_read_raw: f64,
    /// arbor bulk insert into a new MOR table (one run).
    pub mor_write: f64,
    /// arbor upsert of 10% of the keys into the MOR table (one run).
    pub mor_upsert: f64,
    /// arbor snapshot of the MOR table.
    pub mor_read: f64,
    /// hudi-rs snapshot of the MOR table (`None`: not measured).
    pub mor_read_peer: Option<f64>,
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1u64 << 20) as f64)
}

fn secs(s: f64) -> String {
    format!("{s:.3}")
}

fn ratio(a: f64, b: Option<f64>) -> String {
    match b {
        Some(b) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_string(),
    }
}

fn ns_per_row(s: f64, rows: u64) -> String {
    if rows == 0 {
        return "-".to_string();
    }
    format!("{:.0}", s * 1e9 / rows as f64)
}

/// The sizes table: rows, input and on-disk sizes per table.
pub fn sizes_table(results: &[SizeResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "| rows | input (Arrow, MiB) | COW base files (MiB, files) | plain parquet (MiB) | plain parquet with meta columns (MiB) | MOR base + logs after 10% upsert (MiB, log files) |\n\
         |---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {} | {} + {} ({}) |",
            r.rows,
            mib(r.input_bytes),
            mib(r.cow_bytes),
            r.cow_files,
            mib(r.raw_bytes),
            mib(r.raw_meta_bytes),
            mib(r.mor_base_bytes),
            mib(r.mor_log_bytes),
            r.mor_log_files
        );
    }
    out
}

/// The timings table: one line per (size, operation), arbor's seconds, its baseline's, the
/// ratio arbor / baseline and arbor's nanoseconds per row.
pub fn timings_table(results: &[SizeResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "| rows | operation | arbor (s) | arbor (ns/row) | baseline | baseline (s) | arbor / baseline |\n\
         |---:|---|---:|---:|---|---:|---:|\n",
    );
    for r in results {
        let n = r.rows;
        let mut line = |op: &str, arbor: f64, base: &str, base_s: Option<f64>| {
            let _ = writeln!(
                out,
                "| {n} | {op} | {} | {} | {base} | {} | {} |",
                secs(arbor),
                ns_per_row(arbor, n),
                base_s.map_or("-".to_string(), secs),
                ratio(arbor, base_s)
            );
        };
        line(
            "COW bulk insert",
            r.cow_write,
            "arrow-rs parquet write",
            Some(r.raw_write),
        );
        line(
            "COW bulk insert",
            r.cow_write,
            "arrow-rs parquet write, meta columns added",
            Some(r.raw_meta_write),
        );
        line(
            "COW snapshot read",
            r.cow_read,
            "arrow-rs parquet read of the base files",
            Some(r.cow_read_raw),
        );
        line(
            "COW snapshot read",
            r.cow_read,
            "hudi-rs 0.5.0 snapshot",
            r.cow_read_peer,
        );
        line("MOR bulk insert (1 run)", r.mor_write, "-", None);
        line(
            &format!("MOR upsert of {} rows (1 run)", r.updated_rows),
            r.mor_upsert,
            "-",
            None,
        );
        line(
            "MOR snapshot read, 10% updated in logs",
            r.mor_read,
            "hudi-rs 0.5.0 snapshot",
            r.mor_read_peer,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn test_cpu_model_and_mem_total_parsed() {
        let cpu = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n";
        assert_eq!(cpu_model(cpu).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(
            mem_total("MemTotal:       2048 kB\nMemFree: 1 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(mem_total("nothing"), None);
    }

    #[test]
    fn test_timings_table_ratio_against_baseline() {
        let r = SizeResult {
            rows: 1000,
            cow_write: 2.0,
            raw_write: 1.0,
            cow_read: 1.0,
            cow_read_raw: 0.5,
            cow_read_peer: None,
            ..SizeResult::default()
        };
        let t = timings_table(&[r]);
        assert!(t.contains("| 1000 | COW bulk insert | 2.000 | 2000000 | arrow-rs parquet write | 1.000 | 2.00 |"), "{t}");
        assert!(t.contains("| hudi-rs 0.5.0 snapshot | - | - |"), "{t}");
    }
}
