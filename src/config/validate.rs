//! The configuration's rules: a [`Raw`] document in, a [`Config`] or the first
//! [`ConfigError`] out, in the order Python's `CompactionConfig` always checked its fields (so
//! a document with two bad values names the same one in both APIs).

use super::presets;
use super::raw::Raw;
use super::{
    Config, ConfigError, OnSummarizerError, SelectiveRule, SummaryRole, TargetRatio, TokenizerName,
    FIELDS, MAX_INT,
};
use crate::image::ImageModel;
use crate::validate::Profile;

/// Item types a selective rule may name.
pub const ITEMS: [&str; 5] = [
    "tool_results",
    "thinking",
    "images",
    "assistant_text",
    "user_text",
];
/// Actions a selective rule may take.
pub const ACTIONS: [&str; 4] = ["placeholder", "drop", "head_tail", "never"];

fn options_repr(options: &[&str], with_none: bool) -> String {
    let mut items: Vec<Raw> = Vec::new();
    if with_none {
        items.push(Raw::Null);
    }
    items.extend(options.iter().map(|o| Raw::Str((*o).into())));
    Raw::List(items, true).repr()
}

/// Resolve a document's keys: a `preset` key starts from that preset, unknown keys are errors;
/// the result holds the preset's fields overridden by the document's, in order. `allow_preset`:
/// false for a change of an existing config (`replace`), where `preset` is an unknown field.
pub fn resolve<T: Clone>(
    entries: Vec<(String, T)>,
    allow_preset: bool,
    preset_name: impl Fn(&T) -> Option<String>,
    preset_repr: impl Fn(&T) -> String,
    from_raw: impl Fn(Raw) -> T,
) -> Result<Vec<(String, T)>, ConfigError> {
    let mut base: Vec<(String, T)> = Vec::new();
    let mut rest: Vec<(String, T)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        if allow_preset && k == "preset" {
            let fields = preset_name(&v).and_then(|n| presets::fields(&n));
            let Some(fields) = fields else {
                return Err(presets::unknown(&preset_repr(&v)));
            };
            base = fields
                .into_iter()
                .map(|(k, r)| (k.to_owned(), from_raw(r)))
                .collect();
        } else {
            rest.push((k, v));
        }
    }
    for (k, _) in &rest {
        if !FIELDS.contains(&k.as_str()) {
            return Err(ConfigError::new(k, "unknown configuration field"));
        }
    }
    for (k, v) in rest {
        match base.iter_mut().find(|(b, _)| *b == k) {
            Some(slot) => slot.1 = v,
            None => base.push((k, v)),
        }
    }
    Ok(base)
}

/// A [`Config`] from a document (a mapping of field names to values; a `preset` key starts from
/// that preset).
pub fn from_raw(raw: &Raw) -> Result<Config, ConfigError> {
    let Raw::Map(entries) = raw else {
        return Err(not_a_mapping(raw.type_name()));
    };
    let resolved = resolve(
        entries.clone(),
        true,
        |v| match v {
            Raw::Str(s) => Some(s.clone()),
            _ => None,
        },
        Raw::repr,
        |r| r,
    )?;
    let fields: Vec<(&str, &Raw)> = resolved.iter().map(|(k, v)| (k.as_str(), v)).collect();
    check_fields(&fields)
}

struct Fields<'a> {
    given: &'a [(&'a str, &'a Raw)],
}

impl<'a> Fields<'a> {
    /// The value given for `name` (the last one when a document repeats a key).
    fn get(&self, name: &str) -> Option<&'a Raw> {
        self.given
            .iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }

    fn integer(
        &self,
        name: &str,
        minimum: i128,
        optional: bool,
    ) -> Result<Option<Option<usize>>, ConfigError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        integer_value(name, v, minimum, optional).map(Some)
    }

    fn ratio(&self, name: &str, low_open: bool) -> Result<Option<f64>, ConfigError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        ratio_value(name, v, low_open).map(Some)
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(Raw::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(ConfigError::new(
                name,
                format!("expected a bool, got {}", v.repr()),
            )),
        }
    }

    fn choice(
        &self,
        name: &str,
        options: &[&str],
        with_none: bool,
    ) -> Result<Option<Option<String>>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(Raw::Null) if with_none => Ok(Some(None)),
            Some(Raw::Str(s)) if options.contains(&s.as_str()) => Ok(Some(Some(s.clone()))),
            Some(v) => Err(ConfigError::new(
                name,
                format!(
                    "expected one of {}, got {}",
                    options_repr(options, with_none),
                    v.repr()
                ),
            )),
        }
    }
}

/// An integer field's value: an int (not a bool) in `[minimum, MAX_INT]`; `None` allowed when
/// `optional`.
fn integer_value(
    name: &str,
    v: &Raw,
    minimum: i128,
    optional: bool,
) -> Result<Option<usize>, ConfigError> {
    let n = match v {
        Raw::Null if optional => return Ok(None),
        Raw::Int(n) => *n,
        Raw::BigInt(s) => {
            let what = if s.starts_with('-') {
                format!("must be >= {minimum}, got {s}")
            } else {
                format!("must be <= {MAX_INT}, got {s}")
            };
            return Err(ConfigError::new(name, what));
        }
        _ => {
            return Err(ConfigError::new(
                name,
                format!("expected an int, got {}", v.repr()),
            ))
        }
    };
    if n < minimum {
        return Err(ConfigError::new(
            name,
            format!("must be >= {minimum}, got {n}"),
        ));
    }
    if n > MAX_INT as i128 {
        return Err(ConfigError::new(
            name,
            format!("must be <= {MAX_INT}, got {n}"),
        ));
    }
    Ok(Some(n as usize))
}

/// A number (int or float, not a bool), finite.
fn number(v: &Raw) -> Option<f64> {
    match v {
        Raw::Int(n) => Some(*n as f64),
        Raw::BigInt(s) => Some(if s.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }),
        Raw::Float(f) => Some(*f),
        _ => None,
    }
}

fn ratio_value(name: &str, v: &Raw, low_open: bool) -> Result<f64, ConfigError> {
    let f = match (v, number(v)) {
        (Raw::BigInt(_), Some(f)) => f, // finite for Python, out of range here
        (_, Some(f)) if f.is_finite() => f,
        _ => {
            return Err(ConfigError::new(
                name,
                format!("expected a number, got {}", v.repr()),
            ))
        }
    };
    let low_ok = if low_open { f > 0.0 } else { f >= 0.0 };
    if !low_ok || f > 1.0 {
        return Err(ConfigError::new(
            name,
            format!(
                "must be in {}, 1], got {}",
                if low_open { "(0" } else { "[0" },
                v.repr()
            ),
        ));
    }
    Ok(f)
}

/// The prices of `target_ratio = "auto"`: four numbers (not bools), finite, each >= 0.
fn prices_value(v: &Raw) -> Result<[f64; 4], ConfigError> {
    let parsed = match v {
        Raw::List(items, _) if items.len() == 4 => items
            .iter()
            .map(|x| match (x, number(x)) {
                (Raw::BigInt(_), _) => None,
                (_, Some(f)) if f.is_finite() && f >= 0.0 => Some(f),
                _ => None,
            })
            .collect::<Option<Vec<f64>>>(),
        _ => None,
    };
    match parsed {
        Some(p) => Ok([p[0], p[1], p[2], p[3]]),
        None => {
            // Python makes a list a tuple before it checks it: the message shows a tuple.
            let shown = match v {
                Raw::List(items, _) => Raw::List(items.clone(), true),
                other => other.clone(),
            };
            Err(ConfigError::new(
                "prices",
                format!(
                    "expected (input, cached_read, cache_write, output) in dollars per million \
                     tokens, each >= 0, got {}",
                    shown.repr()
                ),
            ))
        }
    }
}

/// The error of a selective rule that cannot be one.
fn rule_error(what: String) -> ConfigError {
    ConfigError::new("selective_rules", what)
}

/// One selective rule's values checked (Python's `SelectiveRule(item, action, priority)`).
pub fn check_rule(item: &Raw, action: &Raw, priority: &Raw) -> Result<SelectiveRule, ConfigError> {
    let item = match item {
        Raw::Str(s) if ITEMS.contains(&s.as_str()) => s.clone(),
        other => {
            return Err(rule_error(format!(
                "unknown item {}; expected one of {}",
                other.repr(),
                options_repr(&ITEMS, false)
            )))
        }
    };
    let action = match action {
        Raw::Str(s) if ACTIONS.contains(&s.as_str()) => s.clone(),
        other => {
            return Err(rule_error(format!(
                "unknown action {}; expected one of {}",
                other.repr(),
                options_repr(&ACTIONS, false)
            )))
        }
    };
    let priority = match priority {
        Raw::Int(n) if i64::try_from(*n).is_ok() => *n as i64,
        other => {
            return Err(rule_error(format!(
                "priority must be an int, got {}",
                other.repr()
            )))
        }
    };
    Ok(SelectiveRule {
        item,
        action,
        priority,
    })
}

/// A selective rule given as a mapping `{item, action, priority}`.
fn rule_of_map(entries: &[(String, Raw)]) -> Result<SelectiveRule, ConfigError> {
    const KEYS: [&str; 3] = ["item", "action", "priority"];
    if let Some((k, _)) = entries.iter().find(|(k, _)| !KEYS.contains(&k.as_str())) {
        return Err(rule_error(format!(
            "SelectiveRule.__init__() got an unexpected keyword argument {}",
            Raw::Str(k.clone()).repr()
        )));
    }
    let get = |k: &str| entries.iter().rev().find(|(e, _)| e == k).map(|(_, v)| v);
    let missing: Vec<String> = KEYS
        .iter()
        .filter(|k| get(k).is_none())
        .map(|k| Raw::Str((*k).into()).repr())
        .collect();
    if !missing.is_empty() {
        let names = match missing.len() {
            1 => missing[0].clone(),
            2 => format!("{} and {}", missing[0], missing[1]),
            _ => format!("{}, {} and {}", missing[0], missing[1], missing[2]),
        };
        let s = if missing.len() == 1 { "" } else { "s" };
        return Err(rule_error(format!(
            "SelectiveRule.__init__() missing {} required positional argument{s}: {names}",
            missing.len()
        )));
    }
    check_rule(
        get("item").unwrap_or(&Raw::Null),
        get("action").unwrap_or(&Raw::Null),
        get("priority").unwrap_or(&Raw::Null),
    )
}

/// A selective rule given as a mapping `{item, action, priority}` (anything else is an error).
pub fn rule_of_raw(r: &Raw) -> Result<SelectiveRule, ConfigError> {
    match r {
        Raw::Map(entries) => rule_of_map(entries),
        other => Err(rule_error(format!(
            "expected a rule or a mapping, got {}",
            other.repr()
        ))),
    }
}

/// The selective rules of a document: a list of mappings.
fn rules_value(v: &Raw) -> Result<Vec<SelectiveRule>, ConfigError> {
    let Raw::List(items, _) = v else {
        return Err(rule_error("expected a list of rules".into()));
    };
    items.iter().map(rule_of_raw).collect()
}

/// The error of a document that is not a mapping (`type_name`: what it is).
pub fn not_a_mapping(type_name: &str) -> ConfigError {
    ConfigError::new("config", format!("expected a mapping, got {type_name}"))
}

/// The fields of a configuration checked in order. `given`: the fields set (absent ones take
/// their defaults, which are valid).
pub fn check_fields(given: &[(&str, &Raw)]) -> Result<Config, ConfigError> {
    let f = Fields { given };
    let mut c = Config::default();
    macro_rules! int {
        ($name:ident, $min:expr) => {
            if let Some(v) = f.integer(stringify!($name), $min, false)? {
                c.$name = v.unwrap_or_default();
            }
        };
        ($name:ident, $min:expr, optional) => {
            if let Some(v) = f.integer(stringify!($name), $min, true)? {
                c.$name = v;
            }
        };
    }
    int!(max_context_tokens, 1);
    int!(reserve_tokens, 0, optional);
    if let Some(r) = c.reserve_tokens {
        if r >= c.max_context_tokens {
            return Err(ConfigError::new(
                "reserve_tokens",
                format!(
                    "must be below max_context_tokens ({}), got {r}",
                    c.max_context_tokens
                ),
            ));
        }
    }
    if let Some(v) = f.ratio("trigger_ratio", true)? {
        c.trigger_ratio = v;
    }
    match f.get("target_ratio") {
        None => {}
        Some(Raw::Str(s)) if s == "auto" => c.target_ratio = TargetRatio::Auto,
        Some(v) => c.target_ratio = TargetRatio::Ratio(ratio_value("target_ratio", v, true)?),
    }
    match f.get("prices") {
        None | Some(Raw::Null) => {}
        Some(v) => c.prices = Some(prices_value(v)?),
    }
    if let Some(v) = f.ratio("micro_trigger_ratio", false)? {
        c.micro_trigger_ratio = v;
    }
    if let Some(v) = f.ratio("min_savings_ratio", false)? {
        c.min_savings_ratio = v;
    }
    match f.get("summary_target_share") {
        None => {}
        Some(Raw::Null) => c.summary_target_share = None,
        Some(v) => c.summary_target_share = Some(ratio_value("summary_target_share", v, false)?),
    }
    int!(soft_threshold_tokens, 1, optional);
    int!(hard_threshold_tokens, 1, optional);
    if c.soft_threshold() > c.hard_threshold() {
        let name = if c.soft_threshold_tokens.is_some() {
            "soft_threshold_tokens"
        } else {
            "trigger_ratio"
        };
        return Err(ConfigError::new(
            name,
            format!(
                "the soft threshold ({}) is above the hard threshold ({})",
                c.soft_threshold(),
                c.hard_threshold()
            ),
        ));
    }
    if c.hard_threshold() > c.max_context_tokens {
        return Err(ConfigError::new(
            "hard_threshold_tokens",
            format!(
                "{} is above max_context_tokens ({})",
                c.hard_threshold(),
                c.max_context_tokens
            ),
        ));
    }
    int!(keep_first_messages, 0);
    int!(keep_recent_messages, 0);
    int!(keep_recent_tool_results, 0);
    int!(clear_at_least_tokens, 0);
    int!(cooldown_calls, 0);
    int!(message_overhead_tokens, 0);
    int!(image_tokens, 0);
    match f.get("image_model") {
        None | Some(Raw::Null) => {}
        Some(Raw::Str(name)) => {
            image_model(Some(name))?;
            c.image_model = Some(name.clone());
        }
        Some(v) => {
            return Err(ConfigError::new(
                "image_model",
                format!("expected a model name or None, got {}", v.repr()),
            ))
        }
    }
    int!(keep_recent_tokens, 0, optional);
    int!(retry_growth_tokens, 0, optional);
    int!(user_messages_budget_tokens, 0, optional);
    int!(details_budget_tokens, 0, optional);
    int!(task_max_tokens, 16, optional);
    int!(max_tool_arg_chars, 16);
    int!(summary_max_tokens, 16);
    int!(summarizer_max_input_tokens, 256, optional);
    int!(transcript_item_max_chars, 16);
    if let Some(v) = f.get("summarizer_timeout_s") {
        match number(v) {
            Some(t) if t > 0.0 && t.is_finite() => c.summarizer_timeout_s = t,
            _ => {
                return Err(ConfigError::new(
                    "summarizer_timeout_s",
                    format!("expected a number > 0, got {}", v.repr()),
                ))
            }
        }
    }
    if let Some(Some(v)) = f.choice("summary_role", &SummaryRole::NAMES, false)? {
        c.summary_role = SummaryRole::parse(&v).unwrap_or_default();
    }
    if let Some(Some(v)) = f.choice("on_summarizer_error", &OnSummarizerError::NAMES, false)? {
        c.on_summarizer_error = OnSummarizerError::parse(&v).unwrap_or_default();
    }
    if let Some(v) = f.choice("profile", &Profile::names(), true)? {
        c.profile = v.as_deref().and_then(Profile::parse);
    }
    if let Some(v) = f.boolean("repair")? {
        c.repair = v;
    }
    if let Some(v) = f.boolean("supersede_reads")? {
        c.supersede_reads = v;
    }
    if let Some(v) = f.boolean("cache_aware_cuts")? {
        c.cache_aware_cuts = v;
    }
    if let Some(v) = f.get("micro_min_gain_ratio") {
        match number(v) {
            Some(g) if (0.0..=1.0).contains(&g) => c.micro_min_gain_ratio = g,
            _ => {
                return Err(ConfigError::new(
                    "micro_min_gain_ratio",
                    format!("expected a number in [0, 1], got {}", v.repr()),
                ))
            }
        }
    }
    if let Some(v) = f.boolean("background")? {
        c.background = v;
    }
    if let Some(v) = f.boolean("log_content")? {
        c.log_content = v;
    }
    if let Some(v) = f.get("protected_tools") {
        let names = match v {
            Raw::List(items, _) => items
                .iter()
                .map(|n| match n {
                    Raw::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect::<Option<Vec<String>>>(),
            _ => None,
        };
        match names {
            Some(names) => c.protected_tools = names,
            None => {
                return Err(ConfigError::new(
                    "protected_tools",
                    format!("expected a sequence of tool names, got {}", v.repr()),
                ))
            }
        }
    }
    if let Some(v) = f.get("selective_rules") {
        c.selective_rules = rules_value(v)?;
    }
    if let Some(v) = f.boolean("recall")? {
        c.recall = v;
    }
    match f.get("offload_dir") {
        None | Some(Raw::Null) => {}
        Some(Raw::Str(s)) => c.offload_dir = Some(s.clone()),
        Some(v) => {
            return Err(ConfigError::new(
                "offload_dir",
                format!("expected a path, got {}", v.repr()),
            ))
        }
    }
    match f.get("tokenizer") {
        None => {}
        Some(Raw::Other { callable: true, .. }) => c.tokenizer = TokenizerName::Approx,
        Some(v) => match v {
            Raw::Str(s) if TokenizerName::parse(s).is_some() => {
                c.tokenizer = TokenizerName::parse(s).unwrap_or_default();
            }
            _ => {
                return Err(ConfigError::new(
                    "tokenizer",
                    format!(
                        "expected 'approx', 'o200k_base', 'cl100k_base' or a callable, got {}",
                        v.repr()
                    ),
                ))
            }
        },
    }
    Ok(c)
}

/// The image model an `image_model` value names (`None`: the highest documented count), or the
/// error naming the field.
pub fn image_model(name: Option<&str>) -> Result<ImageModel, ConfigError> {
    match name {
        None => Ok(ImageModel::Highest),
        Some(n) => ImageModel::parse(n).ok_or_else(|| {
            ConfigError::new(
                "image_model",
                format!(
                    "no documented image formula for {n:?}; expected an OpenAI (gpt-4o, gpt-4.1*, gpt-5*, o1, o3, o4-mini), \
                     Claude (claude-*) or Gemini (gemini-*) model, or None for the highest documented count"
                ),
            )
        }),
    }
}
