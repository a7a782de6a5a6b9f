//! `CompactionConfig`'s defaults, presets and rules, from the core's [`Config`]: Python's
//! dataclass keeps its fields and types, and asks here for everything else (one copy of each
//! rule, shared with the Rust API).

use super::errors::config_error_of;
use crate::config::raw::Raw;
use crate::config::{presets, validate, Config, ConfigError, FIELDS};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};

/// A Python value as a [`Raw`] one (what the rules read). Objects the rules have no case for
/// keep their `repr` (for the message).
pub fn to_raw(v: &Bound<'_, PyAny>) -> PyResult<Raw> {
    Ok(if v.is_none() {
        Raw::Null
    } else if let Ok(b) = v.cast::<PyBool>() {
        Raw::Bool(b.is_true())
    } else if v.is_instance_of::<PyInt>() {
        match v.extract::<i128>() {
            Ok(n) => Raw::Int(n),
            Err(_) => Raw::BigInt(v.str()?.to_string()),
        }
    } else if let Ok(f) = v.cast::<PyFloat>() {
        Raw::Float(f.value())
    } else if let Ok(s) = v.cast::<PyString>() {
        Raw::Str(s.to_str()?.to_owned())
    } else if let Ok(t) = v.cast::<PyTuple>() {
        Raw::List(t.iter().map(|x| to_raw(&x)).collect::<PyResult<_>>()?, true)
    } else if let Ok(l) = v.cast::<PyList>() {
        Raw::List(
            l.iter().map(|x| to_raw(&x)).collect::<PyResult<_>>()?,
            false,
        )
    } else if let Ok(d) = v.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, x) in d.iter() {
            entries.push((k.str()?.to_string(), to_raw(&x)?));
        }
        Raw::Map(entries)
    } else {
        Raw::Other {
            repr: v.repr()?.to_string(),
            callable: v.is_callable(),
        }
    })
}

/// A [`Raw`] value as a Python one.
pub fn from_raw<'py>(py: Python<'py>, raw: &Raw) -> PyResult<Bound<'py, PyAny>> {
    Ok(match raw {
        Raw::Null | Raw::Other { .. } => py.None().into_bound(py),
        Raw::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Raw::Int(n) => n.into_pyobject(py)?.into_any(),
        Raw::BigInt(s) => py.get_type::<PyInt>().call1((s.as_str(),))?.into_any(),
        Raw::Float(f) => PyFloat::new(py, *f).into_any(),
        Raw::Str(s) => PyString::new(py, s).into_any(),
        Raw::List(items, tuple) => {
            let items = items
                .iter()
                .map(|x| from_raw(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            if *tuple {
                PyTuple::new(py, items)?.into_any()
            } else {
                PyList::new(py, items)?.into_any()
            }
        }
        Raw::Map(entries) => {
            let d = PyDict::new(py);
            for (k, v) in entries {
                d.set_item(k, from_raw(py, v)?)?;
            }
            d.into_any()
        }
    })
}

fn raise(py: Python<'_>) -> impl Fn(ConfigError) -> PyErr + '_ {
    move |e| config_error_of(py, &e)
}

/// The fields of a `CompactionConfig` object as a document (its selective rules as mappings).
fn fields_of(cfg: &Bound<'_, PyAny>) -> PyResult<Vec<(&'static str, Raw)>> {
    let py = cfg.py();
    let mut out = Vec::with_capacity(FIELDS.len());
    for name in FIELDS {
        let v = cfg.getattr(name)?;
        let raw = if name == "selective_rules" && !v.is_instance_of::<PyString>() {
            match v.try_iter() {
                Ok(items) => {
                    let mut rules = Vec::new();
                    for r in items {
                        rules.push(rule_of(py, &r?)?);
                    }
                    Raw::List(rules, true)
                }
                Err(_) => to_raw(&v)?,
            }
        } else {
            to_raw(&v)?
        };
        out.push((name, raw));
    }
    Ok(out)
}

/// A `SelectiveRule` object as a mapping (anything else as it is, for the message).
fn rule_of(py: Python<'_>, r: &Bound<'_, PyAny>) -> PyResult<Raw> {
    let _ = py;
    if r.is_instance_of::<PyDict>() {
        return to_raw(r);
    }
    let (Ok(item), Ok(action), Ok(priority)) = (
        r.getattr("item"),
        r.getattr("action"),
        r.getattr("priority"),
    ) else {
        return to_raw(r);
    };
    Ok(Raw::Map(vec![
        ("item".into(), to_raw(&item)?),
        ("action".into(), to_raw(&action)?),
        ("priority".into(), to_raw(&priority)?),
    ]))
}

/// The core's [`Config`] of a Python `CompactionConfig` (checked again: a config is immutable in
/// Python, so this only fails for an object built around its checks).
pub fn config_of(cfg: &Bound<'_, PyAny>) -> PyResult<Config> {
    let fields = fields_of(cfg)?;
    let given: Vec<(&str, &Raw)> = fields.iter().map(|(k, v)| (*k, v)).collect();
    validate::check_fields(&given).map_err(raise(cfg.py()))
}

/// Check a `CompactionConfig`'s fields; its derived values: reserve, budget, soft and hard
/// thresholds, target, task, user words, details, summary and micro limits.
#[pyfunction]
fn config_check(cfg: &Bound<'_, PyAny>) -> PyResult<[usize; 11]> {
    let c = config_of(cfg)?;
    Ok([
        c.reserve(),
        c.budget(),
        c.soft_threshold(),
        c.hard_threshold(),
        c.target_tokens(),
        c.task_token_limit(),
        c.user_words_token_limit(),
        c.details_token_limit(),
        c.summary_token_limit(),
        c.micro_threshold(),
        c.retry_growth(),
    ])
}

/// The default prices of ``target_ratio="auto"`` by format family: ``openai``, ``anthropic``.
#[pyfunction]
fn config_default_prices(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("openai", PyTuple::new(py, crate::config::OPENAI_PRICES)?)?;
    out.set_item(
        "anthropic",
        PyTuple::new(py, crate::config::ANTHROPIC_PRICES)?,
    )?;
    Ok(out)
}

/// Every field's default (selective rules as mappings).
#[pyfunction]
fn config_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    from_raw(py, &Config::default().to_raw())
}

/// The presets: name -> the fields it sets.
#[pyfunction]
fn config_presets(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for name in presets::NAMES {
        let fields = PyDict::new(py);
        for (k, v) in presets::fields(name).unwrap_or_default() {
            fields.set_item(k, from_raw(py, &v)?)?;
        }
        out.set_item(name, fields)?;
    }
    Ok(out)
}

/// The reserve a window gets when ``reserve_tokens`` is not given.
#[pyfunction]
fn default_reserve(max_context_tokens: usize) -> usize {
    crate::config::default_reserve(max_context_tokens)
}

/// A mapping's keys resolved: a ``preset`` key (when ``allow_preset``) starts from that preset,
/// unknown keys raise ``ConfigError``. The values are returned as they were given.
#[pyfunction]
#[pyo3(signature = (data, *, allow_preset))]
fn config_resolve<'py>(
    data: &Bound<'py, PyAny>,
    allow_preset: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let py = data.py();
    let Ok(mapping) = data.cast::<PyMapping>() else {
        let name = data.get_type().name()?.to_string();
        return Err(config_error_of(py, &validate::not_a_mapping(&name)));
    };
    let mut entries = Vec::new();
    for k in mapping.keys()?.iter() {
        let v = mapping.get_item(&k)?;
        entries.push((k.str()?.to_string(), v));
    }
    let resolved = validate::resolve(
        entries,
        allow_preset,
        |v| v.cast::<PyString>().ok().map(|s| s.to_string()),
        |v| v.repr().map(|r| r.to_string()).unwrap_or_default(),
        |r| from_raw(py, &r).unwrap_or_else(|_| py.None().into_bound(py)),
    )
    .map_err(raise(py))?;
    let out = PyDict::new(py);
    for (k, v) in resolved {
        out.set_item(k, v)?;
    }
    Ok(out)
}

/// Check one selective rule's values (``SelectiveRule(item, action, priority)``).
#[pyfunction]
fn selective_rule_check(
    item: &Bound<'_, PyAny>,
    action: &Bound<'_, PyAny>,
    priority: &Bound<'_, PyAny>,
) -> PyResult<()> {
    validate::check_rule(&to_raw(item)?, &to_raw(action)?, &to_raw(priority)?)
        .map(|_| ())
        .map_err(raise(item.py()))
}

/// A selective rule given as a mapping, checked: ``(item, action, priority)``.
#[pyfunction]
fn selective_rule_of(rule: &Bound<'_, PyAny>) -> PyResult<(String, String, i64)> {
    let r = validate::rule_of_raw(&to_raw(rule)?).map_err(raise(rule.py()))?;
    Ok((r.item, r.action, r.priority))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(config_check, m)?)?;
    m.add_function(wrap_pyfunction!(config_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(config_default_prices, m)?)?;
    m.add_function(wrap_pyfunction!(config_presets, m)?)?;
    m.add_function(wrap_pyfunction!(config_resolve, m)?)?;
    m.add_function(wrap_pyfunction!(default_reserve, m)?)?;
    m.add_function(wrap_pyfunction!(selective_rule_check, m)?)?;
    m.add_function(wrap_pyfunction!(selective_rule_of, m)?)?;
    m.add("CONFIG_FIELDS", PyTuple::new(m.py(), FIELDS)?)?;
    Ok(())
}
