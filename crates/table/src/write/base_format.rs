//! The format a table's new base files are written in (`hoodie.table.base.file.format`).

use arbor_format::base::BaseFormat;
use arbor_timeline::config::{BaseFileFormat, TableConfig};

use crate::error::{Result, TableError};

/// The format of `config`'s new base files: parquet (the default) or Lance (Hudi 1.2, with
/// the `lance` feature). ORC and HFile tables, and Lance ones in a build without the
/// feature, are [`TableError::Unsupported`] naming the table and the format.
pub(crate) fn of_table(config: &TableConfig) -> Result<BaseFormat> {
    match config.base_file_format() {
        BaseFileFormat::Parquet => Ok(BaseFormat::Parquet),
        BaseFileFormat::Lance if BaseFormat::Lance.supported() => Ok(BaseFormat::Lance),
        BaseFileFormat::Lance => Err(TableError::Unsupported {
            reason: format!(
                "table {} keeps its base files in Lance (hoodie.table.base.file.format=LANCE): \
                 this build of arbor left out the `lance` feature",
                config.name()
            ),
        }),
        other => Err(TableError::Unsupported {
            reason: format!(
                "table {} keeps its base files in {} (hoodie.table.base.file.format): arbor \
                 writes parquet and Lance base files only",
                config.name(),
                other.name()
            ),
        }),
    }
}
