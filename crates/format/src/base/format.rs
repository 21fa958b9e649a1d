//! Which file format a base file is in: Parquet (Hudi's default) or Lance (Hudi 1.2's
//! `hoodie.table.base.file.format=LANCE`), told by its extension.

use crate::error::{FormatError, Result};

/// The format of a base file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BaseFormat {
    /// Apache Parquet (`.parquet`).
    #[default]
    Parquet,
    /// Lance file format 2.0 (`.lance`), read and written only with the `lance` feature.
    Lance,
}

impl BaseFormat {
    /// The file name extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            BaseFormat::Parquet => "parquet",
            BaseFormat::Lance => "lance",
        }
    }

    /// Whether this build reads and writes the format (Lance needs the `lance` feature).
    pub fn supported(self) -> bool {
        match self {
            BaseFormat::Parquet => true,
            BaseFormat::Lance => cfg!(feature = "lance"),
        }
    }

    /// The format of the base file `key`, by its extension. ORC, HFile, unknown extensions,
    /// and Lance in a build without the `lance` feature are
    /// [`FormatError::UnsupportedFormat`] naming `key`.
    pub fn of_key(key: &str) -> Result<BaseFormat> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let unsupported = |reason: String| FormatError::UnsupportedFormat {
            path: key.to_string(),
            reason,
        };
        match ext.as_deref() {
            Some("parquet") => Ok(BaseFormat::Parquet),
            Some("lance") if BaseFormat::Lance.supported() => Ok(BaseFormat::Lance),
            Some("lance") => Err(unsupported(
                "lance base files need arbor built with the `lance` feature (this build left \
                 it out)"
                    .to_string(),
            )),
            Some(other @ ("orc" | "hfile")) => Err(unsupported(format!(
                "{other} base files are not read by arbor (only parquet and lance)"
            ))),
            _ => Err(unsupported(
                "not a base file (expected the .parquet or .lance extension)".to_string(),
            )),
        }
    }
}

/// Whether `data_type` is or holds (in a struct or list) a map, which a Lance base file cannot
/// store (Lance formats 2.0 and 2.1, those Hudi 1.2 writes and reads, have no map type).
pub fn holds_map(data_type: &arrow_schema::DataType) -> bool {
    use arrow_schema::DataType;
    match data_type {
        DataType::Map(_, _) => true,
        DataType::Struct(fields) => fields.iter().any(|f| holds_map(f.data_type())),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => holds_map(f.data_type()),
        _ => false,
    }
}

impl std::fmt::Display for BaseFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.extension())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn test_of_key_by_extension_case_insensitive() {
        assert_eq!(
            BaseFormat::of_key("p/a_1-2-3_1.parquet").unwrap(),
            BaseFormat::Parquet
        );
        assert_eq!(
            BaseFormat::of_key("A.PARQUET").unwrap(),
            BaseFormat::Parquet
        );
        let lance = BaseFormat::of_key("p=1/a_1-2-3_1.lance");
        if cfg!(feature = "lance") {
            assert_eq!(lance.unwrap(), BaseFormat::Lance);
        } else {
            assert!(lance.unwrap_err().to_string().contains("`lance` feature"));
        }
        for key in ["a/x.orc", "a/x.hfile", "a/x.txt", "a/noext"] {
            let err = BaseFormat::of_key(key).unwrap_err();
            assert!(matches!(err, FormatError::UnsupportedFormat { ref path, .. } if path == key));
        }
    }
}
