//! `arbor tag create|list|drop|expire <table>`: named, protected instants of one branch
//! (RFC-116 tags). `arbor read --tag T` reads a table as of its tag.

use arbor_branching::{create_tag, drop_tag, expire_tags, list_tags, TagFilter, TagInfo};
use arbor_storage::StorageOptions;
use arbor_timeline::metaroot::{normalize_branch_name, validate_branch_name};
use arbor_timeline::TimelineError;
use chrono::{DateTime, TimeDelta, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::context::{
    branching_error, open_table_at, open_table_storage, parse_instant, selected, MAIN,
};
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_table, print_text};

/// Arguments of `arbor tag`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    arbor tag create ./trips v1                        # main's latest completed write\n  \
    arbor tag create ./trips nightly --expires-in 7d   # also 12h, 30m, 90s\n  \
    arbor read ./trips --tag v1                        # the table as of the tag\n  \
    arbor tag list ./trips --all                       # expired tags too\n  \
    arbor tag expire ./trips                           # remove expired tags")]
pub struct TagArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TagCommand,
}

/// The `arbor tag` subcommands.
#[derive(Debug, Subcommand)]
pub enum TagCommand {
    /// Tag a completed write of a branch: a pair of savepoints keeps its snapshot readable
    /// (`arbor read --tag NAME`) until the tag is dropped or expires.
    Create {
        /// The table's base path or URL.
        table: String,
        /// The tag name (no `/`, no leading dot, not `main` or `publications`).
        name: String,
        /// The branch the tag belongs to.
        #[arg(long, value_name = "B", default_value = MAIN)]
        branch: String,
        /// The completed write to tag (default: the branch's latest).
        #[arg(long, value_name = "T")]
        instant: Option<String>,
        /// Expire the tag after this long: a whole number and d, h, m or s (`7d`, `12h`,
        /// `30m`, `90s`). Default: never.
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List a branch's tags (unexpired ones unless --all), by name.
    List {
        /// The table's base path or URL.
        table: String,
        /// The branch whose tags to list.
        #[arg(long, value_name = "B", default_value = MAIN)]
        branch: String,
        /// Also list expired tags that `arbor tag expire` has not removed yet.
        #[arg(long)]
        all: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Drop a tag and (unless --retain-savepoint) its savepoints; its files become cleanable.
    Drop {
        /// The table's base path or URL.
        table: String,
        /// The tag name.
        name: String,
        /// The branch the tag belongs to.
        #[arg(long, value_name = "B", default_value = MAIN)]
        branch: String,
        /// Keep the tag's savepoints (they go on protecting its snapshot).
        #[arg(long)]
        retain_savepoint: bool,
        /// A missing tag is not an error.
        #[arg(long)]
        if_exists: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove every expired tag of a branch, with its savepoints.
    Expire {
        /// The table's base path or URL.
        table: String,
        /// The branch whose expired tags to remove.
        #[arg(long, value_name = "B", default_value = MAIN)]
        branch: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Parses a `--expires-in` duration: a positive whole number followed by `d` (days), `h`
/// (hours), `m` (minutes) or `s` (seconds), e.g. `7d`, `12h`, `30m`, `90s`.
pub fn parse_duration(s: &str) -> CliResult<TimeDelta> {
    let bad = || {
        CliError::Usage(format!(
            "--expires-in expects a positive whole number followed by d, h, m or s \
             (7d, 12h, 30m, 90s), got {s:?}"
        ))
    };
    let t = s.trim();
    let unit = t.chars().last().ok_or_else(bad)?;
    let digits = t.strip_suffix(unit).ok_or_else(bad)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    let seconds_per_unit: i64 = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return Err(bad()),
    };
    n.checked_mul(seconds_per_unit)
        .and_then(TimeDelta::try_seconds)
        .ok_or_else(|| CliError::Usage(format!("--expires-in {s:?} is too long")))
}

/// Checks a tag name (the rules of branch names: no `/` or `\\`, no leading dot or `..`, no
/// whitespace or control characters, not `main` or `publications`, at most 128 bytes) before
/// anything is opened; the error calls it a tag. The rules apply to the name's Unicode NFC form,
/// the form the library stores and compares tags in; the name is passed on as typed (so that a
/// tag an older arbor stored under another spelling is still found by its exact spelling).
pub fn check_tag_name(name: &str) -> CliResult<()> {
    if validate_branch_name(name).is_ok() {
        return Ok(());
    }
    match normalize_branch_name(name) {
        Ok(_) => Ok(()),
        Err(TimelineError::InvalidBranchName { reason, .. }) => Err(CliError::Usage(format!(
            "invalid tag name {name:?}: {reason}"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// `now + --expires-in`.
fn expiry(expires_in: Option<&str>, now: DateTime<Utc>) -> CliResult<Option<DateTime<Utc>>> {
    expires_in
        .map(|s| {
            let d = parse_duration(s)?;
            now.checked_add_signed(d)
                .ok_or_else(|| CliError::Usage(format!("--expires-in {s:?} is too long")))
        })
        .transpose()
}

/// A time as `2025-01-01 12:00:00 UTC`.
fn when(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// One tag as `--json` prints it.
#[derive(Debug, Serialize)]
struct TagJson {
    name: String,
    branch: String,
    instant: String,
    created_at: String,
    expires_at: Option<String>,
    expired: bool,
}

impl TagJson {
    fn new(t: &TagInfo, branch: &str, now: DateTime<Utc>) -> Self {
        TagJson {
            name: t.name.clone(),
            branch: branch.to_string(),
            instant: t.instant.clone(),
            created_at: t.created_at.to_rfc3339(),
            expires_at: t.expires_at.map(|e| e.to_rfc3339()),
            expired: t.is_expired(now),
        }
    }
}

/// Runs the command.
pub async fn run(args: TagArgs, options: &StorageOptions) -> CliResult<()> {
    match args.command {
        TagCommand::Create {
            table,
            name,
            branch,
            instant,
            expires_in,
            json,
        } => {
            check_tag_name(&name).map_err(|e| CliError::at(&table, e))?;
            let time = instant
                .as_deref()
                .map(|t| parse_instant("--instant", t))
                .transpose()
                .map_err(|e| CliError::at(&table, e))?;
            let expires_at =
                expiry(expires_in.as_deref(), Utc::now()).map_err(|e| CliError::at(&table, e))?;
            let storage = open_table_storage(&table, options).await?;
            let t = open_table_at(&table, storage, &branch).await?;
            let tag = create_tag(&t, &name, time.as_ref(), expires_at)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&serde_json::json!({
                    "table": table,
                    "tag": TagJson::new(&tag, &branch, Utc::now()),
                }));
            }
            let expires = tag.expires_at.as_ref().map_or_else(
                || "never expires".to_string(),
                |e| format!("expires {}", when(e)),
            );
            print_text(&format!(
                "{table}: tag {} created on {branch} at instant {} ({expires})",
                tag.name, tag.instant
            ))
        }
        TagCommand::List {
            table,
            branch,
            all,
            json,
        } => {
            let storage = open_table_storage(&table, options).await?;
            let filter = if all {
                TagFilter::All
            } else {
                TagFilter::Unexpired
            };
            let tags = list_tags(&storage, selected(&branch), filter)
                .await
                .map_err(|e| branching_error(&table, e))?;
            let now = Utc::now();
            if json {
                return print_json(
                    &tags
                        .iter()
                        .map(|t| TagJson::new(t, &branch, now))
                        .collect::<Vec<_>>(),
                );
            }
            if tags.is_empty() {
                return print_text(&format!("{table}: no tags on {branch}"));
            }
            let mut header = vec!["NAME", "INSTANT", "CREATED", "EXPIRES"];
            if all {
                header.push("STATUS");
            }
            let rows = tags
                .iter()
                .map(|t| {
                    let mut row = vec![
                        t.name.clone(),
                        t.instant.clone(),
                        when(&t.created_at),
                        t.expires_at
                            .as_ref()
                            .map_or_else(|| "never".to_string(), when),
                    ];
                    if all {
                        row.push(if t.is_expired(now) { "expired" } else { "live" }.to_string());
                    }
                    row
                })
                .collect();
            print_table(&header, rows)
        }
        TagCommand::Drop {
            table,
            name,
            branch,
            retain_savepoint,
            if_exists,
            json,
        } => {
            check_tag_name(&name).map_err(|e| CliError::at(&table, e))?;
            let storage = open_table_storage(&table, options).await?;
            let t = open_table_at(&table, storage, &branch).await?;
            let dropped = drop_tag(&t, &name, retain_savepoint, if_exists)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&serde_json::json!({
                    "table": table,
                    "branch": branch,
                    "tag": name,
                    "dropped": dropped,
                    "savepoint_retained": retain_savepoint,
                }));
            }
            if !dropped {
                return print_text(&format!(
                    "{table}: no tag {name} on {branch}; nothing to do"
                ));
            }
            let savepoint = if retain_savepoint {
                "its savepoint is kept"
            } else {
                "its savepoint is deleted"
            };
            print_text(&format!(
                "{table}: tag {name} dropped from {branch} ({savepoint})"
            ))
        }
        TagCommand::Expire {
            table,
            branch,
            json,
        } => {
            let storage = open_table_storage(&table, options).await?;
            let t = open_table_at(&table, storage, &branch).await?;
            let removed = expire_tags(&t)
                .await
                .map_err(|e| branching_error(&table, e))?;
            if json {
                return print_json(&serde_json::json!({
                    "table": table,
                    "branch": branch,
                    "expired": removed,
                }));
            }
            if removed.is_empty() {
                return print_text(&format!("{table}: no expired tags on {branch}"));
            }
            print_text(&format!(
                "{table}: removed {} expired tag(s) from {branch}: {}",
                removed.len(),
                removed.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_parse_duration_units_convert_to_seconds() {
        assert_eq!(parse_duration("7d").unwrap(), TimeDelta::days(7));
        assert_eq!(parse_duration("12h").unwrap(), TimeDelta::hours(12));
        assert_eq!(parse_duration("30m").unwrap(), TimeDelta::minutes(30));
        assert_eq!(parse_duration("90s").unwrap(), TimeDelta::seconds(90));
        assert_eq!(parse_duration(" 1d ").unwrap(), TimeDelta::seconds(86_400));
    }

    #[test]
    fn test_parse_duration_bad_input_is_an_error() {
        for bad in [
            "", "d", "7", "7w", "-7d", "+7d", "0s", "1.5h", "7 d", "7D", "é", "1dd",
        ] {
            let err = parse_duration(bad).unwrap_err().to_string();
            assert!(err.contains("--expires-in"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn test_parse_duration_overflow_is_an_error() {
        let err = parse_duration("9223372036854775807d")
            .unwrap_err()
            .to_string();
        assert!(err.contains("too long"), "{err}");
        assert!(parse_duration("99999999999999999999999s").is_err());
    }

    #[test]
    fn test_check_tag_name_hostile_names_are_refused_as_tags() {
        check_tag_name("v1").unwrap();
        for bad in ["../x", "a/b", ".hidden", "", "main", "a b"] {
            let err = check_tag_name(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid tag name"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn test_expiry_adds_the_duration() {
        let now: DateTime<Utc> = "2025-01-01T00:00:00Z".parse().unwrap();
        let e = expiry(Some("12h"), now).unwrap().unwrap();
        assert_eq!(e, "2025-01-01T12:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert!(expiry(None, now).unwrap().is_none());
        assert!(expiry(Some("106751991167d"), now).is_err());
    }
}
