//! A direct decoder of `files`-partition records: it walks the writer schema over the Avro
//! bytes, keeps `type`, `_hoodie_file_name` and `filesystemMetadata`, and passes over every
//! other field without building a value. A partition's record holds one map entry per file
//! (100,000 files: 100,000 entries), so the generic decoder's tree of values (a string and a
//! record of named fields per entry, then copied) was most of the cost of listing a large
//! partition through the metadata table.
//!
//! It answers exactly as the generic decoding in [`super::mdt::decode_files_record`] does
//! (which falls back to that decoding whenever this one refuses the input, so errors keep
//! their wording): only an `int` `type`, a `string` file name, a `long` `size` and a
//! `boolean` `isDeleted` are taken, as there; any other shape of those fields is read past.

use std::collections::{BTreeMap, HashMap};

use apache_avro::schema::{InnerDecimalSchema, UuidSchema};
use apache_avro::Schema;

use super::mdt_files_record::{FilesEntry, FilesRecord};

/// Nesting deeper than this is refused (recursive named types cannot overflow the stack).
const MAX_DEPTH: usize = 64;

type Refusal = String;

/// The named types of a schema, by full name and by simple name.
struct Names<'s>(HashMap<String, &'s Schema>);

impl<'s> Names<'s> {
    fn of(schema: &'s Schema) -> Self {
        let mut names = Names(HashMap::new());
        names.collect(schema, 0);
        names
    }

    fn add(&mut self, name: &apache_avro::schema::Name, schema: &'s Schema) {
        self.0.insert(name.fullname(None), schema);
        self.0.entry(name.name().to_string()).or_insert(schema);
    }

    fn collect(&mut self, s: &'s Schema, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match s {
            Schema::Record(r) => {
                self.add(&r.name, s);
                for f in &r.fields {
                    self.collect(&f.schema, depth + 1);
                }
            }
            Schema::Enum(e) => self.add(&e.name, s),
            Schema::Fixed(f) | Schema::Duration(f) | Schema::Uuid(UuidSchema::Fixed(f)) => {
                self.add(&f.name, s)
            }
            Schema::Decimal(d) => {
                if let InnerDecimalSchema::Fixed(f) = &d.inner {
                    self.add(&f.name, s);
                }
            }
            Schema::Array(a) => self.collect(&a.items, depth + 1),
            Schema::Map(m) => self.collect(&m.types, depth + 1),
            Schema::Union(u) => {
                for v in u.variants() {
                    self.collect(v, depth + 1);
                }
            }
            _ => {}
        }
    }

    fn get(&self, name: &apache_avro::schema::Name) -> Result<&'s Schema, Refusal> {
        self.0
            .get(&name.fullname(None))
            .or_else(|| self.0.get(name.name()))
            .copied()
            .ok_or_else(|| format!("unknown named type {}", name.fullname(None)))
    }
}

/// The undecoded rest of a datum.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Refusal> {
        if n > self.rest.len() {
            return Err(format!("{n} bytes wanted, {} left", self.rest.len()));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// A zig-zag varint `long`.
    fn long(&mut self) -> Result<i64, Refusal> {
        let mut value: u64 = 0;
        for i in 0..10u32 {
            let (&b, tail) = self
                .rest
                .split_first()
                .ok_or_else(|| "a long runs past the end".to_string())?;
            self.rest = tail;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err("a long is longer than 10 bytes".to_string())
    }

    fn count(&mut self) -> Result<usize, Refusal> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| format!("negative length {n}"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], Refusal> {
        let n = self.count()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, Refusal> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| "a string is not UTF-8".to_string())
    }

    fn boolean(&mut self) -> Result<bool, Refusal> {
        match self.take(1)? {
            [0] => Ok(false),
            [1] => Ok(true),
            other => Err(format!("boolean byte {other:?}")),
        }
    }

    /// The items of an array or map: `item` once per item, block by block.
    fn blocks(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        loop {
            let n = self.long()?;
            if n == 0 {
                return Ok(());
            }
            if n < 0 {
                self.long()?; // the block's size in bytes
            }
            // More items than bytes left can only be items of no bytes (nulls): refused, so a
            // forged count cannot spin; the generic decoding reads what is real.
            if n.unsigned_abs() > self.rest.len() as u64 {
                return Err(format!(
                    "{} items, {} bytes left",
                    n.unsigned_abs(),
                    self.rest.len()
                ));
            }
            for _ in 0..n.unsigned_abs() {
                item(self)?;
            }
        }
    }
}

/// The schema of the value that follows, unions (their branch index read) and named
/// references resolved.
fn concrete<'s>(
    c: &mut Cursor<'_>,
    s: &'s Schema,
    names: &Names<'s>,
    depth: usize,
) -> Result<&'s Schema, Refusal> {
    if depth > MAX_DEPTH {
        return Err("schema nested too deep".to_string());
    }
    match s {
        Schema::Union(u) => {
            let i = c.count()?;
            let v = u
                .variants()
                .get(i)
                .ok_or_else(|| format!("union branch {i} of {}", u.variants().len()))?;
            concrete(c, v, names, depth + 1)
        }
        Schema::Ref { name } => concrete(c, names.get(name)?, names, depth + 1),
        other => Ok(other),
    }
}

/// Reads past one value of schema `s`.
fn skip<'s>(
    c: &mut Cursor<'_>,
    s: &'s Schema,
    names: &Names<'s>,
    depth: usize,
) -> Result<(), Refusal> {
    match concrete(c, s, names, depth)? {
        Schema::Null => {}
        Schema::Boolean => {
            c.boolean()?;
        }
        Schema::Int
        | Schema::Long
        | Schema::Enum(_)
        | Schema::Date
        | Schema::TimeMillis
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => {
            c.long()?;
        }
        Schema::Float => {
            c.take(4)?;
        }
        Schema::Double => {
            c.take(8)?;
        }
        Schema::Bytes
        | Schema::String
        | Schema::BigDecimal
        | Schema::Uuid(UuidSchema::Bytes | UuidSchema::String) => {
            c.bytes()?;
        }
        Schema::Decimal(d) => match &d.inner {
            InnerDecimalSchema::Bytes => {
                c.bytes()?;
            }
            InnerDecimalSchema::Fixed(f) => {
                c.take(f.size)?;
            }
        },
        Schema::Fixed(f) | Schema::Duration(f) | Schema::Uuid(UuidSchema::Fixed(f)) => {
            c.take(f.size)?;
        }
        Schema::Array(a) => c.blocks(|c| skip(c, &a.items, names, depth + 1))?,
        Schema::Map(m) => c.blocks(|c| {
            c.bytes()?;
            skip(c, &m.types, names, depth + 1)
        })?,
        Schema::Record(r) => {
            for f in &r.fields {
                skip(c, &f.schema, names, depth + 1)?;
            }
        }
        Schema::Union(_) | Schema::Ref { .. } => return Err("unresolved schema".to_string()),
    }
    Ok(())
}

/// One `HoodieMetadataFileInfo` (its `size` and `isDeleted`).
fn file_info<'s>(
    c: &mut Cursor<'_>,
    s: &'s Schema,
    names: &Names<'s>,
) -> Result<FilesEntry, Refusal> {
    let Schema::Record(r) = concrete(c, s, names, 0)? else {
        return Err("a file's info is not a record".to_string());
    };
    let mut entry = FilesEntry {
        size: 0,
        is_deleted: false,
    };
    for f in &r.fields {
        match (f.name.as_str(), concrete(c, &f.schema, names, 1)?) {
            ("size", Schema::Long) => entry.size = c.long()?,
            ("isDeleted", Schema::Boolean) => entry.is_deleted = c.boolean()?,
            (_, other) => skip(c, other, names, 1)?,
        }
    }
    Ok(entry)
}

/// Decodes one `files`-partition record written with `schema`; `Err` (a reason) on anything
/// it does not read as the generic decoding would.
pub(super) fn decode(value: &[u8], schema: &Schema) -> Result<FilesRecord, Refusal> {
    let names = Names::of(schema);
    let mut c = Cursor { rest: value };
    let Schema::Record(top) = concrete(&mut c, schema, &names, 0)? else {
        return Err("not a record schema".to_string());
    };
    let mut out = FilesRecord::default();
    for f in &top.fields {
        match (f.name.as_str(), concrete(&mut c, &f.schema, &names, 1)?) {
            ("type", Schema::Int) => {
                let t = c.long()?;
                out.record_type = i32::try_from(t).map_err(|_| format!("int {t}"))?;
            }
            ("_hoodie_file_name", Schema::String) => out.file_name = Some(c.string()?),
            ("filesystemMetadata", Schema::Map(m)) => {
                let mut files: BTreeMap<String, FilesEntry> = BTreeMap::new();
                c.blocks(|c| {
                    let name = c.string()?;
                    let entry = file_info(c, &m.types, &names)?;
                    files.insert(name, entry);
                    Ok(())
                })?;
                out.files = files;
            }
            (_, other) => skip(&mut c, other, &names, 1)?,
        }
    }
    if !c.rest.is_empty() {
        return Err(format!("{} trailing bytes", c.rest.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hfile::mdt::{
        decode_files_record_generic, encode_files_record, metadata_record_schema, RECORD_TYPE_FILES,
    };
    use proptest::prelude::*;

    fn record(files: Vec<(String, i64, bool)>, file_name: Option<String>) -> FilesRecord {
        FilesRecord {
            record_type: RECORD_TYPE_FILES,
            file_name,
            files: files
                .into_iter()
                .map(|(n, size, is_deleted)| (n, FilesEntry { size, is_deleted }))
                .collect(),
        }
    }

    proptest! {
        #[test]
        fn test_decode_equals_generic_decoding(
            files in prop::collection::vec(("[a-z0-9_.-]{1,40}", any::<i64>(), any::<bool>()), 0..300),
            file_name in prop::option::of("[a-z0-9_.-]{1,30}"),
        ) {
            let schema = metadata_record_schema().unwrap();
            let rec = record(files, file_name);
            let bytes = encode_files_record(&rec).unwrap();
            let direct = decode(&bytes, schema).unwrap();
            prop_assert_eq!(&direct, &rec);
            prop_assert_eq!(direct, decode_files_record_generic(&bytes, schema, "t").unwrap());
        }

        #[test]
        fn test_decode_of_cut_or_flipped_bytes_never_panics_and_never_differs(
            n in 1usize..50, cut in 1usize..64, pos in any::<prop::sample::Index>(), bit in 0u8..8,
        ) {
            let schema = metadata_record_schema().unwrap();
            let files = (0..n).map(|i| (format!("f{i}.parquet"), i as i64, i % 3 == 0)).collect();
            let bytes = encode_files_record(&record(files, None)).unwrap();
            let short = &bytes[..bytes.len().saturating_sub(cut)];
            prop_assert!(decode(short, schema).is_err());
            let mut flipped = bytes.clone();
            let i = pos.index(flipped.len());
            flipped[i] ^= 1 << bit;
            // Whatever the direct decoder accepts, the generic decoding reads the same way.
            if let Ok(direct) = decode(&flipped, schema) {
                prop_assert_eq!(Some(direct), decode_files_record_generic(&flipped, schema, "t").ok());
            }
        }
    }

    #[test]
    fn test_a_forged_item_count_is_refused_not_spun_on() {
        let json = r#"{"type":"record","name":"R","fields":[
            {"name":"nulls","type":{"type":"array","items":"null"}},{"name":"type","type":"int"}]}"#;
        let schema = Schema::parse_str(json).unwrap();
        // Count i64::MAX (zig-zag varint), then nothing.
        let mut bytes = vec![0xfe; 9];
        bytes.push(0x01);
        assert!(decode(&bytes, &schema).unwrap_err().contains("items"));
    }

    #[test]
    fn test_decode_v8_schema_and_named_references() {
        // The table-version-8 schema (fewer payload fields, in another order) through the
        // generic writer, and a schema whose file info is a reference to a named record.
        let v8 = Schema::parse_str(include_str!("HoodieMetadataRecord_v8.avsc")).unwrap();
        let rec = record(
            vec![("a.parquet".into(), 7, false), ("b.log".into(), 9, true)],
            None,
        );
        let bytes = encode_with(&v8, &rec, false);
        assert_eq!(decode(&bytes, &v8).unwrap(), rec);
        assert_eq!(
            decode(&bytes, &v8).unwrap(),
            decode_files_record_generic(&bytes, &v8, "t").unwrap()
        );

        let json = r#"{"type":"record","name":"R","namespace":"n","fields":[
            {"name":"first","type":{"type":"record","name":"Info","fields":[
                {"name":"size","type":"long"},{"name":"isDeleted","type":"boolean"},
                {"name":"extra","type":["null",{"type":"array","items":"double"}],"default":null}]}},
            {"name":"type","type":"int"},
            {"name":"filesystemMetadata","type":["null",{"type":"map","values":["null","n.Info"]}]}]}"#;
        let schema = Schema::parse_str(json).unwrap();
        let bytes = encode_with(&schema, &rec, true);
        assert_eq!(
            decode(&bytes, &schema).unwrap(),
            decode_files_record_generic(&bytes, &schema, "t").unwrap()
        );
        assert_eq!(decode(&bytes, &schema).unwrap().files, rec.files);
    }

    /// `rec` encoded with `schema` through apache-avro's generic values: every field not of
    /// the files record null, as Java writes them. `custom`: the file info has the field
    /// `extra` and is a union branch (the second schema of the test), else as in Hudi's.
    fn encode_with(schema: &Schema, rec: &FilesRecord, custom: bool) -> Vec<u8> {
        use apache_avro::types::Value;
        let info = |e: &FilesEntry| {
            let mut fields = vec![
                ("size".into(), Value::Long(e.size)),
                ("isDeleted".into(), Value::Boolean(e.is_deleted)),
            ];
            if custom {
                fields.push(("extra".into(), Value::Union(0, Box::new(Value::Null))));
            }
            Value::Record(fields)
        };
        let entry = |e: &FilesEntry| match custom {
            true => Value::Union(1, Box::new(info(e))),
            false => info(e),
        };
        let Schema::Record(top) = schema else {
            panic!("record schema")
        };
        let mut fields = Vec::new();
        for f in &top.fields {
            let v = match f.name.as_str() {
                "key" => Value::String(String::new()),
                "type" => Value::Int(rec.record_type),
                "first" => info(&FilesEntry {
                    size: 1,
                    is_deleted: false,
                }),
                "filesystemMetadata" => Value::Union(
                    1,
                    Box::new(Value::Map(
                        rec.files
                            .iter()
                            .map(|(k, e)| (k.clone(), entry(e)))
                            .collect(),
                    )),
                ),
                _ => Value::Union(0, Box::new(Value::Null)),
            };
            fields.push((f.name.clone(), v));
        }
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(schema)
            .build()
            .unwrap();
        let mut out = Vec::new();
        writer
            .write_value_ref(&mut out, &Value::Record(fields))
            .unwrap();
        out
    }
}
