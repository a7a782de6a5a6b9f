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
        "/usr/bin/perlprint",
        "docs/spec.md",
    ];
    let hidden = l.add_details(&facts);
    // Each fact's text is in the ledger once: the longer entry (new or carried) or the trail
    // shows it as a part (a host, a path, a file name); `/usr/bin/perl` is no part of
    // `/usr/bin/perlprint`.
    assert_eq!(
        l.details,
        [
            "https://h.example/a?b",
            "https://h.example/cgi-bin/x.pl",
            "/usr/bin/perl",
            "/usr/bin/perlprint",
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
    let none = |_: &str| false;
    assert!(l.lost(&hidden, &[], &none).is_empty());
    // Nothing new: nothing changes.
    let again = l.clone();
    assert!(l.add_details(&[]).is_empty());
    assert_eq!(l, again);
    // The longer fact evicted: the ones it showed are lost with it (the host is still shown).
    let count = |s: &str| s.chars().count();
    let (_, details) = l.costs(&count);
    let ev = l.fit(usize::MAX, details - 1, 2, &count);
    assert_eq!(ev.facts, ["https://h.example/a?b"]);
    assert_eq!(l.lost(&hidden, &ev.facts, &none), ["https://h.example/a"]);
    let ev = l.fit(usize::MAX, details - 40, 2, &count);
    assert_eq!(ev.facts, ["https://h.example/cgi-bin/x.pl"]);
    assert_eq!(
        l.lost(&hidden, &ev.facts, &none),
        ["https://h.example/a", "https://h.example", "/cgi-bin/x.pl"]
    );
    // A later compaction knows only the entry: its parts that are facts are listed with it.
    let later = Ledger::default();
    let lost = later.lost(&[], &["https://h.example/cgi-bin/x.pl".to_owned()], &none);
    assert!(lost.contains(&"https://h.example".to_owned()), "{lost:?}");
    assert!(lost.contains(&"/cgi-bin/x.pl".to_owned()), "{lost:?}");
    let shown = |f: &str| f == "https://h.example";
    let lost = later.lost(&[], &["https://h.example/cgi-bin/x.pl".to_owned()], &shown);
    assert!(!lost.contains(&"https://h.example".to_owned()), "{lost:?}");
    assert!(is_part("/w/src/match.c", "match.c") && is_part("/w/src/match.c", "/w/src"));
    assert!(!is_part("/usr/bin/perlprint", "/usr/bin/perl"));
    assert!(!is_part("http://h/f.pl?/root/flag", "/root"));
    assert!(is_part("http://h/f.pl?/etc/passwd", "/etc/passwd"));
    assert!(is_part("http://h/f.pl?/etc/passwd", "http://h/f.pl"));
    // A path's directories, its tails (the same file named from a nearer directory) and the
    // path without its extension: each a name an earlier compaction may have folded into it.
    let lost = later.lost(&[], &["/w/p/src/expr/match.c".to_owned()], &none);
    for part in [
        "/w/p/src",
        "src/expr/match.c",
        "match.c",
        "/w/p/src/expr/match",
    ] {
        assert!(lost.contains(&part.to_owned()), "{part} {lost:?}");
    }
    assert!(lost.iter().all(|p| is_part("/w/p/src/expr/match.c", p)));
}

#[test]
fn pasted_output_goes_before_the_users_stated_facts() {
    let mut l = Ledger::default();
    l.add_user_text("Each service in this repository sits behind the gateway gw-7.");
    l.add_user_text("这个仓库的每个服务都在网关 gw-7 后面。");
    l.add_user_text("at Object.current (http://localhost:5173/src/hooks/use.ts:1744:40)");
    l.add_user_text("count\n:\n17\n<task-id>by8u2b8ha</task-id>");
    l.add_user_text("Never delete the backups.");
    let count = |s: &str| s.chars().count().div_ceil(4);
    let (words, _) = l.costs(&count);
    // Room for all but the pasted lines: they go, newer though they are; the facts stay.
    let pasted = [
        "at Object.current (http://localhost:5173/src/hooks/use.ts:1744:40)",
        "count",
        ":",
        "17",
        "<task-id>by8u2b8ha</task-id>",
    ];
    let freed: usize = pasted.iter().map(|p| count(p) + 1).sum();
    let ev = l.fit(words - freed, usize::MAX, 0, &count);
    assert_eq!(ev.words, pasted);
    assert_eq!(l.words.len(), 3);
    // Then the stated facts, oldest first; the prohibition stays (rank 0 only).
    let ev = l.fit(0, usize::MAX, 0, &count);
    assert_eq!(
        ev.words,
        [
            "Each service in this repository sits behind the gateway gw-7.",
            "这个仓库的每个服务都在网关 gw-7 后面。"
        ]
    );
    assert_eq!(l.words[0].text, "Never delete the backups.");
}
