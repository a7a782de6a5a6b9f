use super::*;

#[test]
fn round_trip_is_byte_stable() {
    let mut l = Ledger::default();
    l.add_user_text("Fix the bug. Don't change the public API of invoice.render().\nThanks!");
    l.add_user_text("Fix the bug. 不要修改数据库。请用中文回答。");
    l.add_detail("docs/spec.md");
    l.trail.push("src/a.py: created → edited".to_owned());
    let text = format!("Narrative.\n\n{}", l.render(Language::En));
    let (narrative, back) = split(&text);
    assert_eq!(narrative, "Narrative.");
    assert_eq!(back.lang, Some(Language::En));
    assert_eq!(
        (&back.words, &back.details, &back.trail),
        (&l.words, &l.details, &l.trail)
    );
    assert_eq!(back.render(Language::En), l.render(Language::En));
    let zh = l.render(Language::Zh);
    let back = split(&zh).1;
    assert_eq!(
        (&back.words, &back.details, &back.trail),
        (&l.words, &l.details, &l.trail)
    );
    // Read back, it keeps its language whatever the conversation's vote says next time.
    assert_eq!(back.render(Language::En), zh);
}

#[test]
fn a_fact_another_entry_shows_is_not_repeated_and_is_lost_with_it() {
    let mut l = Ledger::default();
    l.trail.push("/work/app/printenv.pl: edited".to_owned());
    // Carried: the first is shown by a new, longer fact below (folded into it).
    l.add_detail("https://h.example/a");
    l.add_detail("https://h.example/a?b");
    let facts = [
        "https://h.example",
        "/cgi-bin/x.pl",
        "https://h.example/cgi-bin/x.pl",
        "printenv.pl",
        "https://h.example/a?b",
        "/usr/bin/perl",
        "docs/spec.md",
    ];
    let hidden = l.add_details(&facts);
    // Each fact's text is in the ledger once: the longer entry (new or carried) or the trail.
    assert_eq!(
        l.details,
        [
            "https://h.example/a?b",
            "https://h.example/cgi-bin/x.pl",
            "/usr/bin/perl",
            "docs/spec.md"
        ]
    );
    assert_eq!(
        hidden,
        [
            "https://h.example/a",
            "https://h.example",
            "/cgi-bin/x.pl",
            "printenv.pl"
        ]
    );
    let text = l.render(Language::En);
    assert!(facts.iter().all(|f| text.contains(f)));
    assert!(l.lost(&hidden).is_empty());
    // Nothing new: nothing changes.
    let again = l.clone();
    assert!(l.add_details(&[]).is_empty());
    assert_eq!(l, again);
    // The longer fact evicted: the ones it showed are lost with it (the host is still shown).
    let count = |s: &str| s.chars().count();
    let (_, details) = l.costs(&count);
    let ev = l.fit(usize::MAX, details - 1, 2, &count);
    assert_eq!(ev.facts, ["https://h.example/a?b"]);
    assert_eq!(l.lost(&hidden), ["https://h.example/a"]);
    let ev = l.fit(usize::MAX, details - 40, 2, &count);
    assert_eq!(ev.facts, ["https://h.example/cgi-bin/x.pl"]);
    assert_eq!(
        l.lost(&hidden),
        ["https://h.example/a", "https://h.example", "/cgi-bin/x.pl"]
    );
}
