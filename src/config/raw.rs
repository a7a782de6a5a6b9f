//! [`Raw`]: a configuration value as the user wrote it, before validation.
//!
//! Both APIs validate the same thing: a TOML/JSON document read by serde (the Rust API) and the
//! fields of Python's `CompactionConfig` (read by the binding in `src/python/config.rs`) become a
//! `Raw` tree, and one validator (`validate.rs`) turns it into a [`super::Config`] or a
//! [`super::ConfigError`]. Error messages show values as Python's `repr` does (`'x'`, `None`,
//! `True`, `1e-05`), so both APIs give the same message for the same bad value.

use crate::json::py_float_repr as float_repr;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A configuration value before validation.
#[derive(Clone, Debug, PartialEq)]
pub enum Raw {
    /// `null` / `None`.
    Null,
    Bool(bool),
    /// An integer (Python ints beyond `i128` are [`Raw::BigInt`]).
    Int(i128),
    /// An integer too large for `i128`, as its decimal text.
    BigInt(String),
    Float(f64),
    Str(String),
    /// A sequence; `tuple` says it shows as a Python tuple.
    List(Vec<Raw>, bool),
    /// A mapping, its keys in the order given.
    Map(Vec<(String, Raw)>),
    /// Anything else a Python caller may put in a field (an object, a callable), as its `repr`.
    Other {
        /// The object's `repr`.
        repr: String,
        /// Whether it is callable (a `tokenizer` may be).
        callable: bool,
    },
}

impl Raw {
    /// The value as Python's `repr` shows it.
    pub fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    fn write_repr(&self, out: &mut String) {
        match self {
            Raw::Null => out.push_str("None"),
            Raw::Bool(true) => out.push_str("True"),
            Raw::Bool(false) => out.push_str("False"),
            Raw::Int(i) => out.push_str(&i.to_string()),
            Raw::BigInt(s) => out.push_str(s),
            Raw::Float(f) => out.push_str(&float_repr(*f)),
            Raw::Str(s) => out.push_str(&str_repr(s)),
            Raw::List(items, tuple) => {
                out.push(if *tuple { '(' } else { '[' });
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write_repr(out);
                }
                if *tuple && items.len() == 1 {
                    out.push(',');
                }
                out.push(if *tuple { ')' } else { ']' });
            }
            Raw::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&str_repr(k));
                    out.push_str(": ");
                    v.write_repr(out);
                }
                out.push('}');
            }
            Raw::Other { repr, .. } => out.push_str(repr),
        }
    }

    /// The value as Python's `str` shows it (a string as itself, anything else as its repr).
    pub fn show(&self) -> String {
        match self {
            Raw::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    /// The name of the value's type as Python would give it (`type(v).__name__`).
    pub fn type_name(&self) -> &str {
        match self {
            Raw::Null => "NoneType",
            Raw::Bool(_) => "bool",
            Raw::Int(_) | Raw::BigInt(_) => "int",
            Raw::Float(_) => "float",
            Raw::Str(_) => "str",
            Raw::List(_, true) => "tuple",
            Raw::List(_, false) => "list",
            Raw::Map(_) => "dict",
            Raw::Other { .. } => "object",
        }
    }
}

/// A string as Python's `repr` writes it.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

impl From<&serde_json::Value> for Raw {
    fn from(v: &serde_json::Value) -> Raw {
        use serde_json::Value;
        match v {
            Value::Null => Raw::Null,
            Value::Bool(b) => Raw::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Raw::Int(i.into())
                } else if let Some(u) = n.as_u64() {
                    Raw::Int(u.into())
                } else {
                    Raw::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => Raw::Str(s.clone()),
            Value::Array(a) => Raw::List(a.iter().map(Raw::from).collect(), false),
            Value::Object(m) => Raw::Map(m.iter().map(|(k, v)| (k.clone(), v.into())).collect()),
        }
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Raw, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a configuration value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Raw, E> {
        Ok(i128::try_from(v).map_or_else(|_| Raw::BigInt(v.to_string()), Raw::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element::<Raw>()? {
            items.push(v);
        }
        Ok(Raw::List(items, false))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Raw>()? {
            entries.push((k, v));
        }
        Ok(Raw::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_show_as_python_repr_does() {
        for (f, want) in [
            (0.5, "0.5"),
            (1.0, "1.0"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (123456789.0, "123456789.0"),
            (-2.25, "-2.25"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (1e22, "1e+22"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(float_repr(f), want);
        }
    }

    #[test]
    fn strings_and_containers_show_as_python_repr_does() {
        assert_eq!(str_repr("big"), "'big'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("a\nb\\"), "'a\\nb\\\\'");
        assert_eq!(str_repr("压缩"), "'压缩'");
        let t = Raw::List(vec![Raw::Str("a".into()), Raw::Int(3)], true);
        assert_eq!(t.repr(), "('a', 3)");
        assert_eq!(Raw::List(vec![Raw::Null], true).repr(), "(None,)");
        let m = Raw::Map(vec![("k".into(), Raw::Bool(true))]);
        assert_eq!(m.repr(), "{'k': True}");
    }
}
