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
