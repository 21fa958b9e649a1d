//! What the commands share, so that no command imports another (only `demo`, which runs the
//! others in sequence, uses them): opening storage, a table or a branch (the one place the CLI
//! opens tables), creating a table where a command may, the table definition flags, library
//! errors as CLI errors, time parsing, what a write prints, and the table lock the process
//! uses (`--lock`, released on SIGINT/SIGTERM).

mod errors;
pub mod lock;
mod merge;
mod open;
mod report;
mod spec;
mod target;
mod time;

pub use errors::{branching_error, cleaner_error, from_cleaner};
pub use merge::{merge_json, merge_text, rebase_json, rebase_text, StrategyArg};
pub use open::{
    label, open_reader_at, open_table_at, open_table_on, open_table_storage, open_working_branch,
    selected, storage_options, MAIN,
};
pub use report::{warn_storage_notes, CommitReport, Progress};
pub use spec::{TableSpec, TypeArg};
pub use target::{create_table, open_target, remove_made_dir};
pub use time::{parse_instant, parse_time};
