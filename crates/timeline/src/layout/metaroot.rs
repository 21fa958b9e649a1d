//! Where the metadata of main, a publication or a working branch lives (RFC-116 section 2), and
//! main resolution.
//!
//! Main starts in the root `.hoodie/` (data side) and `.hoodie/metadata/.hoodie/` (MDT side).
//! Working branch `b` lives in `.hoodie/branches/b/` and `.hoodie/metadata/.hoodie/branches/b/`;
//! publication `p<N>` in `.hoodie/branches/publications/p<N>/` on both sides. Main is the root
//! until a publication completes; then the greatest numeric `p<N>` whose **data-side `_SUCCESS`**
//! exists. Preparations without `_SUCCESS` never change the selection, and missing or
//! unreadable selected metadata is an error, never a fallback to an older main.

use std::borrow::Cow;
use std::fmt;

use arbor_storage::{Storage, StorageExt};
use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use super::paths::{BRANCHES_SUBDIR, DEFAULT_META_DIR};
use crate::config::TableConfig;
use crate::error::{Result, TimelineError};

pub use super::paths::{BRANCHES_DIR, MDT_ROOT_META_DIR, PUBLICATIONS, SUCCESS_FILE, TAGS_DIR};
/// The longest branch name accepted.
pub const MAX_BRANCH_NAME_LEN: usize = 128;
/// The name of the main branch (never a working branch).
pub const MAIN: &str = "main";

/// A metadata root: main's initial root, a publication, or a working branch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MetaRoot {
    /// The root `.hoodie/` (main before any publication).
    Root,
    /// Publication `p<N>`.
    Publication(u64),
    /// A working branch (a validated name).
    Branch(String),
}

impl fmt::Display for MetaRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaRoot::Root => write!(f, "main (root)"),
            MetaRoot::Publication(n) => write!(f, "main (publication p{n})"),
            MetaRoot::Branch(b) => write!(f, "branch {b}"),
        }
    }
}

impl MetaRoot {
    /// The data-side meta directory (relative to the table base, no trailing `/`).
    pub fn data_meta_dir(&self) -> String {
        match self {
            MetaRoot::Root => DEFAULT_META_DIR.to_string(),
            MetaRoot::Publication(n) => format!("{BRANCHES_DIR}/{PUBLICATIONS}/p{n}"),
            MetaRoot::Branch(b) => format!("{BRANCHES_DIR}/{b}"),
        }
    }

    /// The MDT-side meta directory paired with [`MetaRoot::data_meta_dir`].
    pub fn mdt_meta_dir(&self) -> String {
        match self {
            MetaRoot::Root => MDT_ROOT_META_DIR.to_string(),
            MetaRoot::Publication(n) => {
                format!("{MDT_ROOT_META_DIR}/{BRANCHES_SUBDIR}/{PUBLICATIONS}/p{n}")
            }
            MetaRoot::Branch(b) => format!("{MDT_ROOT_META_DIR}/{BRANCHES_SUBDIR}/{b}"),
        }
    }

    /// The root of working branch `name` as a new branch is stored: `name` in Unicode NFC,
    /// validated ([`normalize_branch_name`]). A branch stored under a name that is not NFC (made
    /// by an arbor before names were normalised) is found by
    /// [`super::branches::find_branch`], which returns its stored name.
    pub fn branch(name: &str) -> Result<MetaRoot> {
        Ok(MetaRoot::Branch(normalize_branch_name(name)?))
    }
}

/// `name` in Unicode Normalization Form C: the form every branch and tag name is stored and
/// compared in, so that spellings that look the same (`é` as U+00E9, or `e` + U+0301) name the
/// same branch or tag. Borrows `name` when it is already NFC.
pub fn nfc_name(name: &str) -> Cow<'_, str> {
    match is_nfc_quick(name.chars()) {
        IsNormalized::Yes => Cow::Borrowed(name),
        _ => {
            let nfc: String = name.nfc().collect();
            if nfc == name {
                Cow::Borrowed(name)
            } else {
                Cow::Owned(nfc)
            }
        }
    }
}

/// True when `a` and `b` are the same name once normalised ([`nfc_name`]).
pub fn same_name(a: &str, b: &str) -> bool {
    a == b || nfc_name(a) == nfc_name(b)
}

/// The name a branch or tag spelled `name` is created under: its NFC form ([`nfc_name`]),
/// which must pass [`validate_branch_name`]. An invalid name is reported as given.
pub fn normalize_branch_name(name: &str) -> Result<String> {
    let nfc = nfc_name(name);
    check_name(name, &nfc)?;
    Ok(nfc.into_owned())
}

/// Checks a working-branch (or tag) name as stored: non-empty, at most [`MAX_BRANCH_NAME_LEN`]
/// bytes, no `/` or `\`, not `.` / `..` or anything with a leading dot, no control characters
/// or whitespace, and not the reserved `main` or `publications`. It does not normalise: a
/// stored name that is not NFC (made by an older arbor) still passes, so that it stays
/// readable; names given by users go through [`normalize_branch_name`].
pub fn validate_branch_name(name: &str) -> Result<()> {
    check_name(name, name)
}

/// [`validate_branch_name`] of `name`, reporting `given` (the spelling a caller passed).
fn check_name(given: &str, name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(TimelineError::InvalidBranchName {
            name: given.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_BRANCH_NAME_LEN {
        return bad("longer than 128 bytes");
    }
    if name.contains('/') || name.contains('\\') {
        return bad("contains a path separator");
    }
    if name.starts_with('.') || name.contains("..") {
        return bad("starts with a dot or contains '..'");
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad("contains a control or whitespace character");
    }
    if name == MAIN || name == PUBLICATIONS {
        return bad("reserved");
    }
    Ok(())
}

/// Parses a publication directory name `p<N>` (decimal, no sign, no leading zeros except `p0`).
pub fn parse_publication_id(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('p')?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// Every publication id found under `base` (the directories `<base>/p<N>/`), ascending; one
/// delimiter listing, all pages.
async fn publications_under(storage: &dyn Storage, base: &str) -> Result<Vec<u64>> {
    let (_, dirs) = storage.list_dir(base).await?;
    let prefix = format!("{base}/");
    let mut out: Vec<u64> = dirs
        .iter()
        .filter_map(|d| d.strip_prefix(&prefix))
        .filter_map(parse_publication_id)
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// The data-side publications directory.
pub fn publications_dir() -> String {
    format!("{BRANCHES_DIR}/{PUBLICATIONS}")
}

/// Resolves main: [`MetaRoot::Root`] until a publication completed, then the greatest numeric
/// `p<N>` with a data-side `_SUCCESS`, whose `hoodie.properties` must load
/// ([`TimelineError::MainUnresolvable`] otherwise). Costs one delimiter listing of the
/// publications directory plus one `head` per unfinished preparation above the selected one.
pub async fn resolve_main(storage: &dyn Storage) -> Result<MetaRoot> {
    let base = publications_dir();
    let ids = publications_under(storage, &base).await?;
    let mut selected = None;
    for n in ids.into_iter().rev() {
        if storage
            .exists(&format!("{base}/p{n}/{SUCCESS_FILE}"))
            .await?
        {
            selected = Some(n);
            break;
        }
    }
    let Some(n) = selected else {
        return Ok(MetaRoot::Root);
    };
    let root = MetaRoot::Publication(n);
    let dir = root.data_meta_dir();
    match TableConfig::load(storage, &dir).await {
        Ok(_) => Ok(root),
        Err(e) => Err(TimelineError::MainUnresolvable {
            path: dir,
            reason: format!("publication p{n} is complete but its metadata is unusable: {e}"),
        }),
    }
}

/// The id the next publication reserves: one more than the greatest `p<N>` on either side,
/// finished or not (`1` when there is none).
pub async fn next_publication_id(storage: &dyn Storage) -> Result<u64> {
    let data = publications_under(storage, &publications_dir()).await?;
    let mdt = publications_under(
        storage,
        &format!("{MDT_ROOT_META_DIR}/{BRANCHES_SUBDIR}/{PUBLICATIONS}"),
    )
    .await?;
    Ok(data
        .into_iter()
        .chain(mdt)
        .max()
        .map_or(1, |n| n.saturating_add(1)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arbor_storage::ObjectStoreStorage;
    use bytes::Bytes;

    use super::*;

    #[test]
    fn test_validate_branch_name_hostile_names_refused() {
        for bad in [
            "",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "..",
            "a..b",
            "tab\tname",
            "new\nline",
            "main",
            "publications",
            "sp ace",
        ] {
            assert!(validate_branch_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_branch_name(&"x".repeat(129)).is_err());
        for good in ["audit", "feature-1", "x_y.z", &"x".repeat(128)] {
            assert!(validate_branch_name(good).is_ok(), "{good:?}");
        }
        let err = validate_branch_name("../x").unwrap_err().to_string();
        assert!(err.contains("\"../x\""), "{err}");
    }

    #[test]
    fn test_normalize_branch_name_nfc_spellings_become_one() {
        let composed = "caf\u{e9}";
        let decomposed = "cafe\u{301}";
        assert_ne!(composed, decomposed);
        assert_eq!(normalize_branch_name(decomposed).unwrap(), composed);
        assert_eq!(normalize_branch_name(composed).unwrap(), composed);
        assert!(matches!(nfc_name(composed), Cow::Borrowed(_)));
        assert!(same_name(composed, decomposed));
        assert!(!same_name(composed, "cafe"));
        assert_eq!(
            MetaRoot::branch(decomposed).unwrap(),
            MetaRoot::Branch(composed.to_string())
        );
        // Angstrom sign (U+212B) is a singleton: NFC maps it to U+00C5.
        assert_eq!(normalize_branch_name("\u{212b}").unwrap(), "\u{c5}");
        // Validation runs on the NFC form, and the error names the spelling given.
        let err = normalize_branch_name("a/e\u{301}").unwrap_err();
        assert!(
            matches!(&err, TimelineError::InvalidBranchName { name, .. } if name == "a/e\u{301}"),
            "{err}"
        );
        // A stored legacy (non-NFC) name stays valid.
        assert!(validate_branch_name(decomposed).is_ok());
    }

    #[test]
    fn test_parse_publication_id_numeric_only() {
        assert_eq!(parse_publication_id("p1"), Some(1));
        assert_eq!(parse_publication_id("p10"), Some(10));
        assert_eq!(parse_publication_id("p0"), Some(0));
        for bad in ["p", "p01", "px", "1", "p-1", "p1a", "q1"] {
            assert_eq!(parse_publication_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn test_meta_dirs_are_paired() {
        assert_eq!(MetaRoot::Root.data_meta_dir(), ".hoodie");
        assert_eq!(MetaRoot::Root.mdt_meta_dir(), ".hoodie/metadata/.hoodie");
        assert_eq!(
            MetaRoot::Publication(3).data_meta_dir(),
            ".hoodie/branches/publications/p3"
        );
        assert_eq!(
            MetaRoot::Publication(3).mdt_meta_dir(),
            ".hoodie/metadata/.hoodie/branches/publications/p3"
        );
        let b = MetaRoot::branch("audit").unwrap();
        assert_eq!(b.data_meta_dir(), ".hoodie/branches/audit");
        assert_eq!(b.mdt_meta_dir(), ".hoodie/metadata/.hoodie/branches/audit");
        assert!(MetaRoot::branch("../x").is_err());
    }

    async fn put(s: &dyn Storage, key: &str, data: &str) {
        s.put(key, Bytes::from(data.to_string())).await.unwrap();
    }

    async fn props(s: &dyn Storage, dir: &str) {
        let config = TableConfig::new_v8("t", crate::config::TableType::CopyOnWrite).unwrap();
        TableConfig::create(s, dir, &config).await.unwrap();
    }

    #[tokio::test]
    async fn test_resolve_main_follows_greatest_successful_publication() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let s = s.as_ref();
        props(s, ".hoodie").await;
        assert_eq!(resolve_main(s).await.unwrap(), MetaRoot::Root);
        assert_eq!(next_publication_id(s).await.unwrap(), 1);
        // A preparation without _SUCCESS changes nothing, but reserves its number.
        props(s, ".hoodie/branches/publications/p1").await;
        assert_eq!(resolve_main(s).await.unwrap(), MetaRoot::Root);
        assert_eq!(next_publication_id(s).await.unwrap(), 2);
        put(s, ".hoodie/branches/publications/p1/_SUCCESS", "").await;
        assert_eq!(resolve_main(s).await.unwrap(), MetaRoot::Publication(1));
        // p10 sorts before p2 as text; numerically it is greater.
        props(s, ".hoodie/branches/publications/p2").await;
        put(s, ".hoodie/branches/publications/p2/_SUCCESS", "").await;
        props(s, ".hoodie/branches/publications/p10").await;
        put(s, ".hoodie/branches/publications/p10/_SUCCESS", "").await;
        assert_eq!(resolve_main(s).await.unwrap(), MetaRoot::Publication(10));
        // An MDT-side leftover with a greater number reserves it too.
        put(
            s,
            ".hoodie/metadata/.hoodie/branches/publications/p12/hoodie.properties",
            "x",
        )
        .await;
        assert_eq!(next_publication_id(s).await.unwrap(), 13);
        // Non-numeric directories are ignored.
        put(s, ".hoodie/branches/publications/pX/_SUCCESS", "").await;
        assert_eq!(resolve_main(s).await.unwrap(), MetaRoot::Publication(10));
    }

    #[tokio::test]
    async fn test_resolve_main_selected_metadata_unreadable_is_an_error() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let s = s.as_ref();
        props(s, ".hoodie").await;
        props(s, ".hoodie/branches/publications/p1").await;
        put(s, ".hoodie/branches/publications/p1/_SUCCESS", "").await;
        // p2 completed but its properties are garbage: no fallback to p1.
        put(
            s,
            ".hoodie/branches/publications/p2/hoodie.properties",
            "garbage",
        )
        .await;
        put(s, ".hoodie/branches/publications/p2/_SUCCESS", "").await;
        let err = resolve_main(s).await.unwrap_err();
        assert!(
            matches!(err, TimelineError::MainUnresolvable { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("p2"), "{err}");
    }
}
