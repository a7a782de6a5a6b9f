//! English signals of an instruction: imperatives at a clause start ("Run the tests", "ok, try
//! that"), directives addressed to "you" ("you must", "you should"), negations that prohibit
//! ("never", "don't", "you cannot"), conditions whose main clause is a directive ("When you
//! finish, run the tests"), rules for every reply ("End every reply with …"), preferences, goals
//! and safety objects. Words are matched whole, on the text outside quotes and inline code.

use super::Signals;

/// Verbs that start an imperative ("Run the tests.", "make the charts 20% less tall").
#[rustfmt::skip]
const VERBS: &[&str] = &[
    "add", "adjust", "align", "analyse", "analyze", "answer", "apply", "ask", "back", "bring",
    "build", "bump", "call", "change", "check", "clean", "close", "commit", "compare", "compile",
    "configure", "confirm", "continue", "convert", "copy", "create", "cut", "debug", "delete",
    "deploy", "describe", "disable", "do", "document", "double-check", "drop", "edit", "enable",
    "end", "explain", "extract", "fill", "find", "finish", "fix", "follow", "format", "generate",
    "get", "give", "go", "handle", "hide", "implement", "identify", "inspect", "examine", "locate",
    "improve", "include", "increase", "decrease", "insert", "install", "investigate", "keep",
    "label", "leave", "lint", "list", "load", "look", "make", "mark", "merge", "migrate",
    "minimize", "modify", "move", "open", "optimize", "paste", "pick", "pin", "plot", "prepare",
    "print", "proceed", "provide", "publish", "pull", "push", "put", "read", "rebase", "rebuild",
    "reduce", "refactor", "reformat", "reinstall", "remove", "rename", "reorder", "repeat",
    "rephrase", "replace", "reply", "report", "reproduce", "rerun", "re-run", "reset", "resolve",
    "respond", "restart", "restore", "retry", "revert", "review", "rewrite", "run", "save",
    "scroll", "search", "select", "send", "set", "ship", "shorten", "show", "simplify", "skip",
    "sort", "specify", "split", "squash", "stage", "start", "stash", "submit", "summarise",
    "summarize", "switch", "take", "tell", "test", "translate", "trim", "try", "turn", "undo",
    "update", "upgrade", "use", "validate", "verify", "wait", "walk", "wrap", "write",
];

/// Words after a verb that make it a noun or a report ("Make is a build tool", "Run 3 took").
const NOT_AFTER_VERB: &[&str] = &[
    "is", "are", "was", "were", "has", "had", "of", "took", "does", "did", "can", "could", "will",
    "would", "should", "seems", "looks", "passes", "passed", "fails", "failed", "works", "worked",
];

/// Words that may open a clause before its verb.
#[rustfmt::skip]
const FILLERS: &[&str] = &[
    "please", "kindly", "just", "also", "now", "then", "so", "and", "but", "ok", "okay", "first",
    "firstly", "finally", "next", "simply", "again", "instead", "note", "however", "important",
    "oh", "well",
];

/// Words that make a sentence a question when it opens with one (a "?" is checked before).
const QUESTION_STARTS: &[&str] = &[
    "why", "what", "how", "where", "which", "who", "whose", "whom", "is", "are", "was", "were",
    "does", "did", "can", "could", "would", "will", "should", "shall", "may", "might",
];

const SUBJECTS: &[&str] = &["i", "you", "we", "they", "he", "she", "it"];

/// Things whose loss or exposure a safety rule guards (data, money, credentials, production).
#[rustfmt::skip]
const SAFETY: &[&str] = &[
    "production", "prod", "database", "databases", "db", "data", "credential", "credentials",
    "password", "passwords", "secret", "secrets", "api key", "api keys", "private key", "api token",
    "access token", "money", "payment", "payments", "billing", "credit card", "credits", "spend",
    "bank", "backup", "back up", "customer", "customers", "customer's", "card", ".env", "pii",
];

/// One clause's words, lowercased, apostrophes normalised, edge punctuation trimmed.
struct Clause {
    words: Vec<String>,
}

impl Clause {
    fn new(text: &str) -> Clause {
        let words = text
            .split_whitespace()
            .map(|w| {
                let edge = |c: char| !(c.is_alphanumeric() || c == '\'' || c == '$');
                if w.is_ascii() {
                    // The same word in one allocation (most words are ASCII: no `’`, and
                    // lowercasing keeps which characters are alphanumeric).
                    return w.trim_matches(edge).to_ascii_lowercase();
                }
                w.replace('’', "'")
                    .to_lowercase()
                    .trim_matches(edge)
                    .to_owned()
            })
            .filter(|w| !w.is_empty())
            .collect();
        Clause { words }
    }

    /// The words after the opening fillers and a list item's number ("1. Always start by …",
    /// "2) Run …": a numbered rule is a rule).
    fn core(&self) -> &[String] {
        let number = usize::from(
            self.words
                .first()
                .is_some_and(|w| w.len() <= 3 && w.chars().all(|c| c.is_ascii_digit())),
        );
        let skip = number
            + self.words[number..]
                .iter()
                .take_while(|w| FILLERS.contains(&w.as_str()))
                .count();
        &self.words[skip..]
    }

    fn starts(&self, phrase: &[&str]) -> bool {
        starts(self.core(), phrase)
    }
}

fn starts(words: &[String], phrase: &[&str]) -> bool {
    words.len() >= phrase.len() && words.iter().zip(phrase).all(|(w, p)| w == p)
}

/// Whether `words` holds `phrase` as whole words anywhere.
fn holds(words: &[String], phrase: &[&str]) -> bool {
    words
        .windows(phrase.len())
        .any(|w| w.iter().zip(phrase).all(|(a, b)| a == b))
}

/// Whether a clause's words are an imperative: a verb first (not a noun or a report), "git
/// \<subcommand>", "only/always/never" + verb, or a directive to "you".
fn imperative(words: &[String]) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    let second = words.get(1).map(String::as_str);
    if first == "git" {
        return second.is_some_and(|s| {
            [
                "add", "commit", "push", "pull", "checkout", "switch", "stash", "rebase", "merge",
                "reset", "fetch", "status", "diff", "log",
            ]
            .contains(&s)
        });
    }
    if ["only", "always", "must"].contains(&first.as_str()) {
        return words.len() > 1 && imperative(&words[1..]);
    }
    if first == "make" && second == Some("sure") || first == "be" && second == Some("sure") {
        return true;
    }
    if first == "ensure" || first == "remember" && second == Some("to") {
        return true;
    }
    if !VERBS.contains(&first.as_str()) || first.ends_with("'s") {
        return false;
    }
    if first == "do" && second.is_some_and(|s| SUBJECTS.contains(&s)) {
        return false;
    }
    match second {
        None => true,
        Some(s) => {
            !NOT_AFTER_VERB.contains(&s)
                && !s.starts_with(|c: char| c.is_ascii_digit())
                && !hash(s)
                && !words[1..words.len().min(4)]
                    .iter()
                    .any(|w| ["is", "are", "was", "were"].contains(&w.as_str()))
        }
    }
}

/// A commit hash (`cc79294`): seven or more hex digits with a digit among them.
fn hash(s: &str) -> bool {
    s.len() >= 7
        && s.chars().all(|c| c.is_ascii_hexdigit())
        && s.chars().any(|c| c.is_ascii_digit())
}

/// A directive addressed to the reader: "you must / should / need to / have to / are going to".
fn to_you(words: &[String]) -> bool {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let after_you = match w.as_slice() {
        ["you", rest @ ..] => rest,
        ["you're", rest @ ..] => return rest.first() == Some(&"going"),
        ["you'll", "need", ..] | ["you'll", "have", ..] => return true,
        _ => return false,
    };
    match after_you {
        ["must", "be", adj, ..] => ![
            "tired", "kidding", "joking", "busy", "right", "wrong", "mistaken", "confused",
        ]
        .contains(adj),
        ["must", ..] | ["should", ..] | ["need", "to", ..] | ["have", "to", ..] => true,
        ["are", "going", "to", ..]
        | ["will", "need", ..]
        | ["always", ..]
        | ["can", "only", ..] => true,
        _ => false,
    }
}

/// Whether `words` prohibit: "never/don't/do not/avoid/stop …" at the clause start, "you
/// cannot / must not / should not …", "I don't want …".
fn prohibits(words: &[String]) -> bool {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["don't", "forget", ..] | ["do", "not", "forget", ..] => false,
        ["never", ..] | ["don't", ..] | ["dont", ..] | ["do", "not", ..] | ["avoid", ..] => true,
        ["stop", next, ..] => next.ends_with("ing"),
        ["you", "must", "not", ..] | ["you", "mustn't", ..] | ["you", "should", "not", ..] => true,
        ["you", "shouldn't", ..] | ["you", "cannot", ..] | ["you", "can't", ..] => true,
        ["you", "may", "not", ..] | ["you", "never", ..] | ["you", "are", "not", "allowed", ..] => {
            true
        }
        ["i", "don't", "want", ..]
        | ["we", "don't", "want", ..]
        | ["i", "do", "not", "want", ..] => true,
        _ => false,
    }
}

/// A rule stated of a thing: "\<subject> must / must not / has to / needs to / shall / is required
/// to …" ("The patch must only contain …", "Your response MUST include …"), not a guess ("This
/// must be a caching issue", "that must have worked") and not about the speaker ("I must say").
/// `Some(true)` when it is negated ("must not", "shall not").
fn rule_of_a_thing(words: &[String]) -> Option<bool> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let first = *w.first()?;
    if ["i", "we", "you", "it", "that", "there", "he", "she", "they"].contains(&first) {
        return None;
    }
    for (i, pair) in w.windows(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        let next = w.get(i + 2).copied().unwrap_or("");
        let modal = match (a, b) {
            ("must", "have") => continue,
            ("must", "be") => {
                if [
                    "a", "an", "the", "because", "why", "that", "tired", "kidding", "joking",
                    "wrong", "right",
                ]
                .contains(&next)
                {
                    return None;
                }
                Some(false)
            }
            ("must", "not") | ("mustn't", _) | ("shall", "not") | ("shan't", _) => Some(true),
            ("must", _) | ("shall", _) => Some(false),
            // "you don't have to …" permits.
            ("has", "to") | ("have", "to") | ("needs", "to") => {
                let before = if i > 0 { w[i - 1] } else { "" };
                if ["don't", "doesn't", "not", "never", "dont"].contains(&before) {
                    return None;
                }
                Some(false)
            }
            ("is", "required") | ("are", "required") => Some(false),
            _ => None,
        };
        if modal.is_some() {
            return modal;
        }
    }
    None
}

/// A rule that an action waits for the user's approval: "any schema change needs my approval",
/// "deploys require sign-off", "… need a go-ahead from me" (needs / requires + an approval
/// word, owned by the speaker or a sign-off / go-ahead; not "needed", not "does … need").
fn needs_approval(words: &[String]) -> bool {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    w.iter().enumerate().any(|(i, a)| {
        if !["needs", "need", "requires", "require"].contains(a) {
            return false;
        }
        let before = if i > 0 { w[i - 1] } else { "" };
        if ["don't", "doesn't", "not", "never", "dont", "does", "do"].contains(&before) {
            return false;
        }
        let window = &w[i + 1..w.len().min(i + 6)];
        let personal = ["sign-off", "signoff", "go-ahead"];
        let approval = [
            "approval",
            "approve",
            "confirmation",
            "permission",
            "ok",
            "okay",
            "consent",
        ];
        window.iter().any(|x| personal.contains(x))
            || window.windows(2).any(|p| p == ["sign", "off"])
            || (window.iter().any(|x| approval.contains(x))
                && window.iter().any(|x| {
                    [
                        "my", "our", "me", "us", "explicit", "prior", "written", "manual",
                    ]
                    .contains(x)
                }))
    })
}

/// A goal stated of a thing: "\<thing> should \<verb> …" ("The CLI should exit with code 2",
/// "the dashboard should load in under two seconds"), not a guess ("it should work now", "that
/// should be enough", "the tests should pass now, I think"), not "should have". `Some(true)` when
/// negated ("… should not / should never …").
fn should_goal(words: &[String], all: &[String]) -> Option<bool> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let first = *w.first()?;
    #[rustfmt::skip]
    let pronouns = [
        "i", "we", "you", "it", "this", "that", "there", "he", "she", "they", "these", "those",
        "which", "what", "who", "everything", "something", "nothing", "anything", "should",
    ];
    if pronouns.contains(&first) {
        return None;
    }
    #[rustfmt::skip]
    let hedges = [
        "probably", "hopefully", "now", "think", "guess", "believe", "suppose", "maybe", "perhaps",
        "theory", "likely", "fine", "expected", "supposedly",
    ];
    if all.iter().any(|x| hedges.contains(&x.as_str())) {
        return None;
    }
    let i = w
        .iter()
        .take(10)
        .position(|x| *x == "should" || *x == "shouldn't")?;
    if i == 0
        || w[..i]
            .iter()
            .any(|x| ["said", "says", "think", "thought"].contains(x))
    {
        return None;
    }
    let next = w.get(i + 1).copied().unwrap_or("");
    if ["have", "'ve", "i", "we", "you", "it", "they"].contains(&next) || next.is_empty() {
        return None;
    }
    Some(w[i] == "shouldn't" || next == "not" || next == "never")
}

/// The English signals of `outside` (the sentence with quotes and inline code replaced).
pub(super) fn signals(outside: &str, s: &mut Signals) {
    // A parenthesis is an aside, not a clause: "… plan mode (like exact code snippets, …), read …".
    let mut depth = 0usize;
    let plain: String = outside
        .chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect();
    let clauses: Vec<Clause> = plain.split([',', ';']).map(Clause::new).collect();
    let all = Clause::new(&plain);
    let first = match clauses.first() {
        Some(c) => c,
        None => return,
    };
    let words = &all.words;
    if first
        .words
        .first()
        .is_some_and(|w| QUESTION_STARTS.contains(&w.as_str()))
        || (first.starts(&["do"])
            && first
                .core()
                .get(1)
                .is_some_and(|w| SUBJECTS.contains(&w.as_str())))
    {
        s.question = true;
    }
    // Negations: at a clause start, or after "you" / "and" / "but" / "please" inside one.
    for c in &clauses {
        let core = c.core();
        if prohibits(core) {
            s.prohibition = true;
        }
        for (i, w) in core.iter().enumerate() {
            if ["and", "but", "please", "so", "then", "that"].contains(&w.as_str())
                && prohibits(&core[i + 1..])
            {
                s.prohibition = true;
            }
        }
        if c.starts(&["don't", "forget"]) || c.starts(&["do", "not", "forget"]) {
            s.requirement = true;
        }
        if imperative(core) || to_you(core) {
            s.directive = true;
        }
        match rule_of_a_thing(core) {
            Some(true) => s.prohibition = true,
            Some(false) => s.requirement = true,
            None => {}
        }
        if needs_approval(core) {
            s.requirement = true;
        }
        match should_goal(core, &all.words) {
            Some(true) => s.prohibition = true,
            Some(false) => s.goal = true,
            None => {}
        }
        let w: Vec<&str> = core.iter().map(String::as_str).collect();
        if let ["that", "you", ..] = w.as_slice() {
            if prohibits(&core[1..]) || to_you(&core[1..]) {
                s.directive = true;
            }
        }
    }
    // Conditions: "when / before / after / if / once / until …, <directive>".
    const OPENERS: &[&str] = &[
        "when", "whenever", "before", "after", "if", "once", "until", "unless",
    ];
    if first
        .core()
        .first()
        .is_some_and(|w| OPENERS.contains(&w.as_str()))
    {
        let rest_directive = clauses[1..].iter().any(|c| {
            let core = c.core();
            imperative(core)
                || to_you(core)
                || prohibits(core)
                || starts(core, &["you", "can"])
                || should_goal(core, &all.words).is_some()
        });
        if rest_directive {
            s.condition = true;
        }
    }
    // A trailing condition after an imperative: "Fix it before committing."
    if imperative(first.core()) {
        for (i, w) in words.iter().enumerate() {
            if ["before", "after", "when", "once", "until", "whenever"].contains(&w.as_str()) {
                if let Some(next) = words.get(i + 1) {
                    if ["you", "we", "it", "they"].contains(&next.as_str())
                        || (next.ends_with("ing") && next.len() > 4)
                    {
                        s.condition = true;
                    }
                }
            }
        }
    }
    // Rules for every reply or action.
    let every = ["every", "each", "always", "whenever"]
        .iter()
        .any(|w| words.iter().any(|x| x == w))
        || holds(words, &["from", "now", "on"])
        || holds(words, &["going", "forward"])
        || holds(words, &["at", "all", "times"])
        || words.windows(2).any(|p| {
            p[0] == "per"
                && [
                    "reply", "response", "answer", "message", "commit", "file", "change", "turn",
                    "step",
                ]
                .contains(&p[1].as_str())
        });
    let rule_subject = |c: &Clause| {
        let core = c.core();
        ["every", "each", "all"].contains(&core.first().map_or("", String::as_str))
            && core.iter().skip(1).take(8).any(|w| {
                [
                    "must", "should", "needs", "need", "has", "have", "goes", "go", "belongs",
                    "belong", "lives", "live", "gets", "get",
                ]
                .contains(&w.as_str())
            })
    };
    if (every && s.directive) || clauses.iter().any(rule_subject) {
        s.every_rule = true;
    }
    if clauses.iter().any(rule_subject) {
        s.directive = true;
    }
    // Preferences, in any clause ("For new tests, I prefer …"); "I prefer not to say" is not one.
    let prefers = |core: &[String]| {
        [
            &["i", "prefer"][..],
            &["i'd", "prefer"],
            &["i", "would", "prefer"],
            &["we", "prefer"],
            &["i'd", "rather"],
            &["i", "would", "rather"],
            &["we'd", "rather"],
            &["prefer"],
            &["i", "recommend"],
            &["we", "recommend"],
            &["i'd", "recommend"],
            &["we'd", "recommend"],
        ]
        .iter()
        .any(|p| starts(core, p))
            && !["say", "answer", "comment"]
                .iter()
                .any(|v| holds(core, &["not", "to", v]))
    };
    let core = first.core();
    if clauses.iter().any(|c| prefers(c.core()))
        || (first.words.first().is_some_and(|w| w == "please")
            && core.first().is_some_and(|w| w == "use"))
        || (s.directive && (holds(words, &["instead", "of"]) || holds(words, &["rather", "than"])))
    {
        s.preference = true;
    }
    // Goals.
    for c in &clauses {
        let core = c.core();
        let goal = [
            &["i", "want"][..],
            &["we", "want"],
            &["i", "need"],
            &["we", "need"],
            &["i'd", "like"],
            &["i", "would", "like"],
            &["we'd", "like"],
            &["we", "would", "like"],
            &["your", "task", "is"],
            &["the", "task", "is", "to"],
            &["the", "point", "is", "to"],
            &["the", "idea", "is", "to"],
        ]
        .iter()
        .any(|p| starts(core, p));
        let aim = core.len() >= 3
            && ["the", "our", "my", "main", "final"].contains(&core[0].as_str())
            && core
                .iter()
                .skip(1)
                .take(2)
                .any(|w| ["goal", "aim", "objective"].contains(&w.as_str()))
            && core.iter().skip(2).take(2).any(|w| w == "is");
        if goal || aim {
            s.goal = true;
        }
    }
    // Keyword requirements: "must" opening a clause, "make sure", "only" + verb.
    if clauses.iter().any(|c| {
        let core = c.core();
        starts(core, &["must"])
            || starts(core, &["make", "sure"])
            || (starts(core, &["only"]) && imperative(core))
    }) {
        s.requirement = true;
    }
    // Safety objects.
    if SAFETY.iter().any(|p| match p.split_once(' ') {
        // Phrases are one or two words.
        None => words.iter().any(|w| w == p),
        Some((a, b)) => holds(words, &[a, b]),
    }) || outside.contains('$')
        // `to_lowercase().contains(".env")`: no other character lowercases to `.`, `e`, `n`
        // or `v`.
        || outside
            .as_bytes()
            .windows(4)
            .any(|w| w.eq_ignore_ascii_case(b".env"))
    {
        s.safety_object = true;
    }
}

/// Whether `word` (lowercase) is a verb that opens an English imperative.
pub(super) fn is_verb(word: &str) -> bool {
    VERBS.contains(&word)
}
