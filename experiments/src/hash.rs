//! `config_hash`: the identity of a run across sweeps. FNV-1a (64-bit) over
//! the run's configuration as canonical JSON (object keys sorted, no spaces),
//! written as 16 lower-case hex digits. Unlike `std`'s `DefaultHasher`, whose
//! algorithm may change between Rust releases, this is fixed, so a sweep
//! resumed with another toolchain still recognises its finished rows.

use serde::Serialize;
use serde_json::Value;

use crate::config::RunConfig;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// Canonical JSON: keys sorted at every level, no whitespace.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let v = serde_json::to_value(value)?;
    let mut out = String::new();
    write_canonical(&v, &mut out)?;
    Ok(out)
}

fn write_canonical(v: &Value, out: &mut String) -> Result<(), serde_json::Error> {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k)?);
                out.push(':');
                write_canonical(&map[k], out)?;
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        scalar => out.push_str(&serde_json::to_string(scalar)?),
    }
    Ok(())
}

/// The `config_hash` of a run configuration.
pub fn config_hash(config: &RunConfig) -> String {
    // A RunConfig is strings, numbers, booleans and lists: serialising it
    // cannot fail, but fall back to its Debug form rather than panic.
    let text = canonical_json(config).unwrap_or_else(|_| format!("{config:?}"));
    format!("{:016x}", fnv1a(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_known_values() {
        // Reference values of the FNV-1a 64-bit specification.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v = serde_json::json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": null}});
        assert_eq!(
            canonical_json(&v).unwrap(),
            r#"{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }
}
