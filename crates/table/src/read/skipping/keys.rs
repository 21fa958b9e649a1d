//! The record keys a read's filters pin down: `_hoodie_record_key = K` / `IN (...)`, or
//! equality on the record key field of a single-field key, rendered by the table's key
//! generator exactly as writers render keys.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_format::meta;
use arbor_timeline::TableConfig;
use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema, SchemaRef};

use crate::keygen::KeyGenerator;
use crate::read::filter::compiled::Compiled;
use crate::read::filter::value::{Kind, Value};
use crate::read::filter::FilterOp;

/// Most keys looked up in the record index for one read; more (a long `IN` list) read the
/// index partition's groups for little gain, so the index is not used.
pub(crate) const MAX_LOOKUP_KEYS: usize = 4096;

/// The equality values of a filter (`=` one, `IN` several), `None` for other operators.
pub(crate) fn equality_values(f: &Compiled) -> Option<&[Value]> {
    match f.op {
        FilterOp::Eq | FilterOp::In => Some(f.values()),
        _ => None,
    }
}

/// The record keys every row matching `filters` must have, when the filters say: the
/// intersection over the filters that pin the key; `None` when no filter does (or the key
/// cannot be rendered for them).
pub(crate) fn wanted_keys(
    config: &TableConfig,
    schema: &SchemaRef,
    filters: &[Compiled],
) -> Option<BTreeSet<String>> {
    let key_fields = config.record_key_fields();
    let single = match key_fields.as_slice() {
        [one] => Some(one.as_str()),
        _ => None,
    };
    let generator = KeyGenerator::from_table_config(config).ok();
    let mut wanted: Option<BTreeSet<String>> = None;
    for f in filters {
        let Some(values) = equality_values(f) else {
            continue;
        };
        let keys: BTreeSet<String> = if f.name == meta::RECORD_KEY {
            values
                .iter()
                .filter_map(|v| match v {
                    Value::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect()
        } else if Some(f.name.as_str()) == single && matches!(f.kind, Kind::Str | Kind::Int) {
            let Some(generator) = &generator else {
                continue;
            };
            match render_keys(generator, schema, &f.name, values) {
                Some(keys) => keys,
                None => continue,
            }
        } else {
            continue;
        };
        wanted = Some(match wanted {
            None => keys,
            Some(prev) => prev.intersection(&keys).cloned().collect(),
        });
    }
    wanted
}

/// The keys the generator renders for rows whose field `name` holds each of `values`; `None`
/// when a value cannot be rendered (the index is then not used for this filter).
fn render_keys(
    generator: &KeyGenerator,
    schema: &SchemaRef,
    name: &str,
    values: &[Value],
) -> Option<BTreeSet<String>> {
    let field = schema.field_with_name(name).ok()?;
    let texts: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let text: ArrayRef = Arc::new(StringArray::from(texts));
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let typed = arrow::compute::cast_with_options(&text, field.data_type(), &options).ok()?;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            name,
            field.data_type().clone(),
            true,
        )])),
        vec![typed],
    )
    .ok()?;
    let keys = generator.record_keys_at(&batch, 0).ok()?;
    Some(keys.into_iter().collect())
}
