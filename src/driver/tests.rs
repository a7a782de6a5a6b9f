use super::*;

fn setup() -> Setup {
    Setup {
        has_request: true,
        summarizer: true,
        before_hook: false,
        after_hook: false,
        has_state: true,
    }
}

fn driver(policy: OnSummarizerError, setup: Setup) -> Driver {
    Driver::with_policy(policy, 3, setup)
}

fn apply(summary: Option<&str>) -> Step {
    Step::Apply {
        summary: summary.map(str::to_owned),
        truncated: false,
        fallback: None,
    }
}

fn failure(kind: FailureKind) -> Failure {
    Failure {
        kind,
        reason: "RateLimitError: slow down".into(),
    }
}

#[test]
fn one_chunk_asks_once_and_applies_the_reply() {
    let mut d = driver(OnSummarizerError::Fallback, setup());
    assert_eq!(d.resume(), Ok(Step::Summarize { chunk: 0 }));
    assert_eq!(
        d.reply("<summary>did X</summary>", false, 0),
        Ok(apply(Some("<summary>did X</summary>")))
    );
    assert_eq!(d.applied(true), Ok(Step::Done));
    assert_eq!(d.chunks_done(), 1);
}

#[test]
fn a_failure_in_chunk_k_keeps_chunks_before_it() {
    let mut d = driver(OnSummarizerError::Fallback, setup());
    assert_eq!(d.resume(), Ok(Step::Summarize { chunk: 0 }));
    assert_eq!(
        d.reply("first part", false, 2),
        Ok(Step::Advance {
            text: "first part".into()
        })
    );
    assert_eq!(d.resume(), Ok(Step::Summarize { chunk: 1 }));
    assert_eq!(
        d.reply("first and second", true, 1),
        Ok(Step::Advance {
            text: "first and second".into()
        })
    );
    assert_eq!(d.resume(), Ok(Step::Summarize { chunk: 2 }));
    // The third chunk fails: the host applies the rule summary to its current plan (advanced
    // twice), so chunks 1 and 2 keep their LLM summary.
    let step = d.fail(failure(FailureKind::Transient)).unwrap();
    assert_eq!(
        step,
        Step::Apply {
            summary: None,
            truncated: false,
            fallback: Some(Fallback {
                kind: FailureKind::Transient,
                reason: "RateLimitError: slow down".into(),
                cooldown_calls: 3
            })
        }
    );
    assert_eq!(d.chunks_done(), 2);
    assert_eq!(d.applied(true), Ok(Step::Done));
}

#[test]
fn transient_falls_back_and_permanent_raises_under_fallback() {
    for (policy, kind, falls) in [
        (OnSummarizerError::Fallback, FailureKind::Transient, true),
        (OnSummarizerError::Fallback, FailureKind::Timeout, true),
        (OnSummarizerError::Fallback, FailureKind::Unknown, true),
        (OnSummarizerError::Fallback, FailureKind::Permanent, false),
        (OnSummarizerError::FallbackAll, FailureKind::Permanent, true),
        (OnSummarizerError::Raise, FailureKind::Transient, false),
        (OnSummarizerError::Raise, FailureKind::Timeout, false),
    ] {
        let mut d = driver(policy, setup());
        d.resume().unwrap();
        let step = d.fail(failure(kind)).unwrap();
        assert_eq!(
            matches!(step, Step::Apply { .. }),
            falls,
            "{policy:?} {kind:?}"
        );
        if !falls {
            assert_eq!(
                step,
                Step::Raise {
                    kind,
                    message: format!(
                        "the summarizer failed ({}): RateLimitError: slow down",
                        kind.name()
                    )
                }
            );
            assert!(d.applied(true).is_err(), "nothing follows an error");
        }
    }
}

#[test]
fn the_cool_down_starts_only_with_a_state() {
    for (has_state, want) in [(true, 3), (false, 0)] {
        let mut d = driver(
            OnSummarizerError::Fallback,
            Setup {
                has_state,
                ..setup()
            },
        );
        d.resume().unwrap();
        let Ok(Step::Apply {
            fallback: Some(f), ..
        }) = d.fail(failure(FailureKind::Timeout))
        else {
            panic!("a fallback")
        };
        assert_eq!(f.cooldown_calls, want);
    }
    let mut d = Driver::with_policy(OnSummarizerError::Fallback, 0, setup());
    d.resume().unwrap();
    let Ok(Step::Apply {
        fallback: Some(f), ..
    }) = d.fail(failure(FailureKind::Transient))
    else {
        panic!("a fallback")
    };
    assert_eq!(f.cooldown_calls, 0, "cooldown_calls=0: no cool-down");
}

#[test]
fn empty_and_error_like_replies_are_transient_failures() {
    for (text, why) in [
        (
            "   \n\u{1c}",
            "BadReply: the summarizer returned empty text",
        ),
        (
            "Traceback (most recent call last):\n  File \"x.py\", line 1",
            "BadReply: the reply looks like an error or a refusal, not a summary",
        ),
    ] {
        let mut d = driver(OnSummarizerError::Fallback, setup());
        d.resume().unwrap();
        let Ok(Step::Apply {
            summary: None,
            fallback: Some(f),
            ..
        }) = d.reply(text, false, 0)
        else {
            panic!("a fallback for {text:?}")
        };
        assert_eq!((f.kind, f.reason.as_str()), (FailureKind::Transient, why));
        let mut d = driver(OnSummarizerError::Raise, setup());
        d.resume().unwrap();
        assert!(matches!(d.reply(text, false, 0), Ok(Step::Raise { .. })));
    }
    // Tags make it a summary, whatever it says.
    let mut d = driver(OnSummarizerError::Fallback, setup());
    d.resume().unwrap();
    assert!(matches!(
        d.reply("<summary>Error: the build failed</summary>", false, 0),
        Ok(Step::Apply {
            summary: Some(_),
            ..
        })
    ));
}

#[test]
fn a_veto_returns_the_conversation_unchanged_and_calls_nothing_else() {
    let hooks = Setup {
        before_hook: true,
        after_hook: true,
        ..setup()
    };
    let mut d = driver(OnSummarizerError::Fallback, hooks);
    assert_eq!(d.resume(), Ok(Step::BeforeHook));
    let veto = HookOutcome {
        veto: Some("not now".into()),
        summary: None,
    };
    assert_eq!(
        d.hook_done(veto),
        Ok(Step::Unchanged {
            reason: "not now".into()
        })
    );
    assert!(d.resume().is_err());
}

#[test]
fn a_hook_may_supply_the_summary_and_the_after_hook_sees_the_result() {
    let hooks = Setup {
        before_hook: true,
        after_hook: true,
        ..setup()
    };
    let mut d = driver(OnSummarizerError::Fallback, hooks);
    assert_eq!(d.resume(), Ok(Step::BeforeHook));
    let given = HookOutcome {
        veto: None,
        summary: Some("from the hook".into()),
    };
    assert_eq!(d.hook_done(given), Ok(apply(Some("from the hook"))));
    assert_eq!(d.applied(true), Ok(Step::AfterHook));
    assert_eq!(d.resume(), Ok(Step::Done));
}

#[test]
fn without_a_request_the_plan_is_applied_first_and_hooks_run_only_when_it_compacted() {
    let hooks = Setup {
        has_request: false,
        before_hook: true,
        after_hook: true,
        ..setup()
    };
    let mut d = driver(OnSummarizerError::Fallback, hooks);
    assert_eq!(d.resume(), Ok(apply(None)));
    assert_eq!(
        d.applied(false),
        Ok(Step::Done),
        "nothing compacted: no hooks"
    );
    let mut d = driver(OnSummarizerError::Fallback, hooks);
    assert_eq!(d.resume(), Ok(apply(None)));
    assert_eq!(d.applied(true), Ok(Step::BeforeHook));
    assert_eq!(
        d.hook_done(HookOutcome::default()),
        Ok(Step::AfterHook),
        "the result stands"
    );
    assert_eq!(d.resume(), Ok(Step::Done));
}

#[test]
fn without_a_summarizer_the_rule_summary_applies() {
    let mut d = driver(
        OnSummarizerError::Raise,
        Setup {
            summarizer: false,
            ..setup()
        },
    );
    assert_eq!(d.resume(), Ok(apply(None)));
    assert_eq!(d.applied(true), Ok(Step::Done));
}

#[test]
fn provider_items_finish_the_compaction() {
    let mut d = driver(
        OnSummarizerError::Fallback,
        Setup {
            after_hook: true,
            ..setup()
        },
    );
    d.resume().unwrap();
    assert_eq!(d.items_placed(), Ok(Step::AfterHook));
}

#[test]
fn calls_out_of_order_are_errors_not_panics() {
    let mut d = driver(OnSummarizerError::Fallback, setup());
    assert!(d.reply("x", false, 0).is_err());
    assert!(d.applied(true).is_err());
    assert!(d.hook_done(HookOutcome::default()).is_err());
    assert!(d.fail(failure(FailureKind::Unknown)).is_err());
    assert_eq!(
        d.items_placed().unwrap_err().to_string(),
        "driver: items_placed() called while waiting for the start"
    );
}

#[test]
fn failures_are_classed_as_before() {
    assert_eq!(classify(true, &[], false, None), FailureKind::Transient);
    assert_eq!(
        classify(
            false,
            &["RateLimitError", "APIStatusError"],
            false,
            Some(429)
        ),
        FailureKind::Transient
    );
    assert_eq!(
        classify(false, &["AuthenticationError"], false, Some(401)),
        FailureKind::Permanent
    );
    assert_eq!(
        classify(false, &["TypeError"], true, None),
        FailureKind::Permanent
    );
    assert_eq!(
        classify(false, &["X"], false, Some(503)),
        FailureKind::Transient
    );
    assert_eq!(
        classify(false, &["X"], false, Some(599)),
        FailureKind::Transient
    );
    assert_eq!(
        classify(false, &["X"], false, Some(404)),
        FailureKind::Permanent
    );
    assert_eq!(
        classify(false, &["X"], false, Some(418)),
        FailureKind::Unknown
    );
    assert_eq!(
        classify(false, &["ValueError"], false, None),
        FailureKind::Unknown
    );
}

#[test]
fn a_failure_advancing_or_applying_a_reply_falls_back_too() {
    let mut d = driver(OnSummarizerError::Fallback, setup());
    d.resume().unwrap();
    assert!(matches!(
        d.reply("part", false, 1),
        Ok(Step::Advance { .. })
    ));
    let step = d.fail(failure(FailureKind::Unknown)).unwrap();
    assert!(matches!(
        step,
        Step::Apply {
            summary: None,
            fallback: Some(_),
            ..
        }
    ));
    assert_eq!(d.chunks_done(), 0);
    let mut d = driver(OnSummarizerError::Fallback, setup());
    d.resume().unwrap();
    assert!(matches!(
        d.reply("all", false, 0),
        Ok(Step::Apply {
            summary: Some(_),
            ..
        })
    ));
    assert!(matches!(
        d.fail(failure(FailureKind::Unknown)),
        Ok(Step::Apply {
            fallback: Some(_),
            ..
        })
    ));
    // The fallback's own apply cannot fail into another fallback.
    assert!(d.fail(failure(FailureKind::Unknown)).is_err());
    assert_eq!(d.applied(true), Ok(Step::Done));
}
