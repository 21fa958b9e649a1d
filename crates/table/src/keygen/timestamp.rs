//! The timestamp-based key generator's partition values (Java's
//! `TimestampBasedAvroKeyGenerator`, configured by `hoodie.keygen.timebased.*`): the one
//! partition field's value read as a point in time and printed with the output date format.
//!
//! - `EPOCHMILLISECONDS`, `EPOCHMICROSECONDS`, `UNIX_TIMESTAMP` (seconds), `SCALAR` (the unit
//!   of `hoodie.keygen.timebased.timestamp.scalar.time.unit`, default seconds): integers,
//!   floats and decimals (truncated toward zero, as Java's `longValue`), dates (their epoch
//!   day, as Java), timestamps (their stored millisecond or microsecond count, as Java's Avro
//!   records hold them) and strings of an integer (what Spark's SQL writer stores in a
//!   timestamp-partitioned column) are counts of that unit.
//! - `DATE_STRING`: strings parsed with the input date format(s)
//!   (`hoodie.keygen.timebased.input.dateformat`, several separated by
//!   `...input.dateformat.list.delimiter.regex`, default `,`, taken literally).
//! - `MIXED`: strings as `DATE_STRING`; a number has no unit and is refused, as in Java.
//!
//! Zones: `hoodie.keygen.timebased.timezone` sets input and output zone; else
//! `...input.timezone` and `...output.timezone`. Without an output zone, a parsed string keeps
//! the offset it was written with, and numbers print in GMT (Java uses the JVM's default zone
//! there: Spark clusters run in UTC). An unknown zone is an error (Java silently uses GMT).
//! A null value is Java's default: 1 unit after the epoch (or, for strings, that instant
//! printed with the first input format and parsed back).

use arbor_timeline::TableConfig;
use arrow::datatypes::{DataType, Int16Type, Int32Type, Int64Type, Int8Type, TimeUnit};
use arrow_array::cast::AsArray;
use arrow_array::timezone::Tz;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, TimestampMicrosecondType,
    TimestampMillisecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::Array;
use chrono::{DateTime, FixedOffset, Offset, TimeZone, Utc};

use super::joda::JodaPattern;

/// How the partition field's value is read (`hoodie.keygen.timebased.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Milliseconds since the epoch.
    EpochMilliseconds,
    /// Microseconds since the epoch.
    EpochMicroseconds,
    /// Seconds since the epoch.
    UnixTimestamp,
    /// A count of the configured scalar unit.
    Scalar,
    /// A string in one of the input date formats.
    DateString,
    /// Strings as `DateString`; numbers are refused.
    Mixed,
}

/// A time zone as Java's `TimeZone.getTimeZone` names it (GMT, UTC, `GMT+08:00`, IANA names).
#[derive(Debug, Clone)]
pub struct Zone {
    name: String,
    /// `None`: GMT.
    tz: Option<Tz>,
}

/// Zones are equal when configured with the same name.
impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl Zone {
    /// Parses a zone name; unknown names are an error.
    pub fn parse(name: &str) -> Result<Zone, String> {
        let trimmed = name.trim();
        let offset_form = trimmed
            .strip_prefix("GMT")
            .or_else(|| trimmed.strip_prefix("UTC"))
            .filter(|rest| rest.starts_with('+') || rest.starts_with('-'));
        let spec = match (trimmed, offset_form) {
            ("GMT" | "UTC" | "Z", _) => return Ok(Zone::gmt()),
            (_, Some(rest)) if rest.contains(':') => rest.to_string(),
            (_, Some(rest)) if rest.len() <= 3 => format!("{rest}:00"),
            _ => trimmed.to_string(),
        };
        let tz: Tz = spec
            .parse()
            .map_err(|e| format!("time zone {name:?} is not known: {e}"))?;
        Ok(Zone {
            name: trimmed.to_string(),
            tz: Some(tz),
        })
    }

    fn gmt() -> Zone {
        Zone {
            name: "GMT".into(),
            tz: None,
        }
    }

    /// The zone's name as configured.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn at(&self, t: DateTime<Utc>) -> DateTime<FixedOffset> {
        let offset = match &self.tz {
            Some(tz) => tz.offset_from_utc_datetime(&t.naive_utc()).fix(),
            None => Utc.fix(),
        };
        t.with_timezone(&offset)
    }

    fn local(&self, local: &chrono::NaiveDateTime) -> Option<DateTime<Utc>> {
        match &self.tz {
            Some(tz) => tz
                .from_local_datetime(local)
                .earliest()
                .map(|t| t.with_timezone(&Utc)),
            None => Some(Utc.from_utc_datetime(local)),
        }
    }
}

/// The timestamp-based key generator's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampConfig {
    /// How values are read.
    pub kind: TimestampType,
    /// The unit of numbers, in microseconds per unit (`None` for DATE_STRING and MIXED).
    pub micros_per_unit: Option<i64>,
    /// Input patterns (DATE_STRING, MIXED).
    pub input_formats: Vec<JodaPattern>,
    /// The output pattern.
    pub output_format: JodaPattern,
    /// The input zone, if configured.
    pub input_zone: Option<Zone>,
    /// The output zone, if configured.
    pub output_zone: Option<Zone>,
}

const PREFIXES: [&str; 2] = [
    "hoodie.keygen.timebased.",
    "hoodie.deltastreamer.keygen.timebased.",
];

fn get<'a>(config: &'a TableConfig, suffix: &str) -> Option<&'a str> {
    PREFIXES
        .iter()
        .find_map(|p| config.get(&format!("{p}{suffix}")))
}

impl TimestampConfig {
    /// Reads `hoodie.keygen.timebased.*` (and the older `hoodie.deltastreamer.` spellings)
    /// from the table's properties. A missing type or output format, an unknown type, unit or
    /// zone, or a bad pattern is an error naming the property.
    pub fn from_table_config(config: &TableConfig) -> Result<TimestampConfig, String> {
        let kind_name = get(config, "timestamp.type").ok_or_else(|| {
            "the table's hoodie.properties has no hoodie.keygen.timebased.timestamp.type \
             (the timestamp-based key generator cannot be reproduced without it; Hudi 0.x did \
             not persist it: add the value the table was written with by \
             `arbor upgrade <table> --set hoodie.keygen.timebased.timestamp.type=<TYPE>`)"
                .to_string()
        })?;
        let kind = match kind_name.trim().to_ascii_uppercase().as_str() {
            "EPOCHMILLISECONDS" => TimestampType::EpochMilliseconds,
            "EPOCHMICROSECONDS" => TimestampType::EpochMicroseconds,
            "UNIX_TIMESTAMP" => TimestampType::UnixTimestamp,
            "SCALAR" => TimestampType::Scalar,
            "DATE_STRING" => TimestampType::DateString,
            "MIXED" => TimestampType::Mixed,
            other => {
                return Err(format!(
                    "hoodie.keygen.timebased.timestamp.type {other:?} is not a timestamp type"
                ))
            }
        };
        let micros_per_unit = match kind {
            TimestampType::EpochMilliseconds => Some(1_000),
            TimestampType::EpochMicroseconds => Some(1),
            TimestampType::UnixTimestamp => Some(1_000_000),
            TimestampType::Scalar => {
                let unit = get(config, "timestamp.scalar.time.unit").unwrap_or("SECONDS");
                Some(match unit.trim().to_ascii_uppercase().as_str() {
                    "NANOSECONDS" => {
                        return Err("hoodie.keygen.timebased.timestamp.scalar.time.unit \
                                    NANOSECONDS is not supported by arbor"
                            .into())
                    }
                    "MICROSECONDS" => 1,
                    "MILLISECONDS" => 1_000,
                    "SECONDS" => 1_000_000,
                    "MINUTES" => 60_000_000,
                    "HOURS" => 3_600_000_000,
                    "DAYS" => 86_400_000_000,
                    other => {
                        return Err(format!(
                            "hoodie.keygen.timebased.timestamp.scalar.time.unit {other:?} is \
                             not a time unit"
                        ))
                    }
                })
            }
            TimestampType::DateString | TimestampType::Mixed => None,
        };
        let output = get(config, "output.dateformat").ok_or_else(|| {
            "the table's hoodie.properties has no hoodie.keygen.timebased.output.dateformat"
                .to_string()
        })?;
        let output_format = JodaPattern::new(output)?;
        let input_formats = match kind {
            TimestampType::DateString | TimestampType::Mixed => {
                let list = get(config, "input.dateformat").unwrap_or_default();
                let delimiter = get(config, "input.dateformat.list.delimiter.regex")
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .unwrap_or(",");
                let formats = list
                    .split(delimiter)
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(JodaPattern::new)
                    .collect::<Result<Vec<_>, _>>()?;
                if formats.is_empty() {
                    return Err(format!(
                        "hoodie.keygen.timebased.input.dateformat is required for {kind_name}"
                    ));
                }
                formats
            }
            _ => Vec::new(),
        };
        let zone = |suffix: &str| -> Result<Option<Zone>, String> {
            match get(config, suffix).map(str::trim).filter(|z| !z.is_empty()) {
                Some(z) => Zone::parse(z).map(Some),
                None => Ok(None),
            }
        };
        let (input_zone, output_zone) = if get(config, "timezone").is_some() {
            let z = zone("timezone")?;
            (z.clone(), z)
        } else {
            (zone("input.timezone")?, zone("output.timezone")?)
        };
        Ok(TimestampConfig {
            kind,
            micros_per_unit,
            input_formats,
            output_format,
            input_zone,
            output_zone,
        })
    }

    /// The formatted partition value of `array[row]` (before hive-style naming and URL
    /// encoding); `Err(reason)` for a value Java would also fail on, or one arbor cannot
    /// reproduce exactly.
    pub fn format_value(&self, array: &dyn Array, row: usize) -> Result<String, String> {
        if row >= array.len() {
            return Err(format!(
                "row {row} beyond the column's {} rows",
                array.len()
            ));
        }
        if array.is_null(row) {
            return self.default_value();
        }
        let number = |v: i64| self.print_count(v);
        match array.data_type() {
            DataType::Utf8 => self.print_string(array.as_string::<i32>().value(row)),
            DataType::LargeUtf8 => self.print_string(array.as_string::<i64>().value(row)),
            DataType::Utf8View => self.print_string(array.as_string_view().value(row)),
            DataType::Int8 => number(i64::from(array.as_primitive::<Int8Type>().value(row))),
            DataType::Int16 => number(i64::from(array.as_primitive::<Int16Type>().value(row))),
            DataType::Int32 => number(i64::from(array.as_primitive::<Int32Type>().value(row))),
            DataType::Int64 => number(array.as_primitive::<Int64Type>().value(row)),
            DataType::UInt8 => number(i64::from(array.as_primitive::<UInt8Type>().value(row))),
            DataType::UInt16 => number(i64::from(array.as_primitive::<UInt16Type>().value(row))),
            DataType::UInt32 => number(i64::from(array.as_primitive::<UInt32Type>().value(row))),
            DataType::UInt64 => number(
                i64::try_from(array.as_primitive::<UInt64Type>().value(row))
                    .map_err(|_| "value beyond a Java long".to_string())?,
            ),
            DataType::Float32 => number(truncate(f64::from(
                array.as_primitive::<Float32Type>().value(row),
            ))?),
            DataType::Float64 => number(truncate(array.as_primitive::<Float64Type>().value(row))?),
            DataType::Decimal128(_, scale) => {
                let raw = array.as_primitive::<Decimal128Type>().value(row);
                let divisor = 10i128
                    .checked_pow(u32::try_from(*scale).unwrap_or(0))
                    .ok_or_else(|| "decimal scale too large".to_string())?;
                let whole = if *scale >= 0 { raw / divisor } else { raw };
                number(i64::try_from(whole).map_err(|_| "decimal beyond a Java long".to_string())?)
            }
            DataType::Date32 => number(i64::from(array.as_primitive::<Date32Type>().value(row))),
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                number(array.as_primitive::<TimestampMicrosecondType>().value(row))
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                number(array.as_primitive::<TimestampMillisecondType>().value(row))
            }
            other => Err(format!(
                "a {other} value cannot be a timestamp-based partition value"
            )),
        }
    }

    fn print_count(&self, v: i64) -> Result<String, String> {
        let per = self.micros_per_unit.ok_or_else(|| {
            "hoodie.keygen.timebased.timestamp.scalar.time.unit is not specified but a number \
             was supplied (timestamp type DATE_STRING or MIXED takes strings)"
                .to_string()
        })?;
        // As Java's MILLISECONDS.convert: truncation toward zero, to milliseconds.
        let millis = if per >= 1_000 {
            v.checked_mul(per / 1_000)
                .ok_or_else(|| format!("{v} is beyond the representable time range"))?
        } else {
            v / (1_000 / per)
        };
        let t = DateTime::<Utc>::from_timestamp_millis(millis)
            .ok_or_else(|| format!("{v} is beyond the representable time range"))?;
        let zone = self.output_zone.clone().unwrap_or_else(Zone::gmt);
        Ok(self.output_format.format(&zone.at(t)))
    }

    fn print_string(&self, s: &str) -> Result<String, String> {
        if self.input_formats.is_empty() {
            // A numeric type: Spark's SQL writer stores the partition column as a string of
            // the number.
            let v: i64 = s
                .trim()
                .parse()
                .map_err(|_| format!("{s:?} is not a number of the timestamp unit"))?;
            return self.print_count(v);
        }
        let mut last_error = String::new();
        for format in &self.input_formats {
            match format.parse(s) {
                Ok(parsed) => {
                    let (instant, written_zone) = match (&self.input_zone, parsed.offset) {
                        (_, Some(offset)) => (
                            offset
                                .from_local_datetime(&parsed.local)
                                .single()
                                .map(|t| t.with_timezone(&Utc)),
                            self.input_zone
                                .as_ref()
                                .map(|z| ZoneOrOffset::Zone(z.clone()))
                                .unwrap_or(ZoneOrOffset::Offset(offset)),
                        ),
                        (Some(z), None) => (z.local(&parsed.local), ZoneOrOffset::Zone(z.clone())),
                        (None, None) => (
                            Some(Utc.from_utc_datetime(&parsed.local)),
                            ZoneOrOffset::Zone(Zone::gmt()),
                        ),
                    };
                    let instant =
                        instant.ok_or_else(|| format!("{s:?} is not a valid local time"))?;
                    let out = match (&self.output_zone, written_zone) {
                        (Some(z), _) => z.at(instant),
                        (None, ZoneOrOffset::Zone(z)) => z.at(instant),
                        (None, ZoneOrOffset::Offset(o)) => instant.with_timezone(&o),
                    };
                    return Ok(self.output_format.format(&out));
                }
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    fn default_value(&self) -> Result<String, String> {
        match self.input_formats.first() {
            None => self.print_count(1),
            Some(first) => {
                let zone = self
                    .input_zone
                    .clone()
                    .or_else(|| self.output_zone.clone())
                    .unwrap_or_else(Zone::gmt);
                let t = DateTime::<Utc>::from_timestamp_millis(1)
                    .ok_or_else(|| "the epoch is not representable".to_string())?;
                self.print_string(&first.format(&zone.at(t)))
            }
        }
    }
}

enum ZoneOrOffset {
    Zone(Zone),
    Offset(FixedOffset),
}

fn truncate(v: f64) -> Result<i64, String> {
    if !v.is_finite() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v) {
        return Err(format!("{v} is not a count of the timestamp unit"));
    }
    // Truncation toward zero, as Java's Double.longValue; the range is checked above.
    #[allow(clippy::cast_possible_truncation)]
    Ok(v.trunc() as i64)
}
