//! Chinese signals of an instruction: a clause that opens with a verb ("修复这个 bug", "现在修复",
//! "带我阅读"; adverbs such as 请、先、再、现在 skipped), prohibitions (不要、别、禁止、不能 …, not
//! inside words that mean something else: 区别、别人、能不能), requirements (必须、务必、一定要、
//! 只/仅 + verb), conditions (如果…就…, 当…时, …之后/…前 + a directive, 先…再…), rules for every
//! reply (每次、每个、以后、总是 + a directive), preferences (请用, 我更喜欢, 用 X 代替 Y), goals
//! (目标是, 我希望, 我们需要) and safety objects. Descriptions that use the same words (每次运行都会
//! 报错, 总是出现这个警告, 恢复的位置会被保留) are not directives: a clause with 会/可以/可能/让/
//! 导致 after its verb, or a verb used as a modifier (…的), describes.

use super::Signals;

/// Verbs that open an imperative clause.
#[rustfmt::skip]
const VERBS: &[&str] = &[
    "修复", "修改", "改成", "改为", "改用", "改一下", "改", "提交", "推送", "拉取", "合并", "回到", "切到", "切回", "切换", "打开",
    "关闭", "运行", "跑", "执行", "查看", "看看", "看一下", "检查", "确认", "验证", "调查", "阅读", "读", "编写", "写", "添加",
    "加上", "新增", "增加", "删除", "删掉", "去掉", "移除", "保留", "保存", "保持", "恢复", "重复", "完成", "实现", "总结", "分析",
    "解释", "说明", "带我", "告诉我", "给我", "帮我", "使用", "用", "更新", "升级", "安装", "部署", "创建", "新建", "生成", "重构",
    "优化", "整理", "继续", "停止", "撤销", "回滚", "等待", "断言", "替换", "换成", "发布", "处理", "调整", "清理", "格式化", "回复",
    "输出", "列出", "找出", "搜索", "定位", "排查", "复现", "重现", "补充", "补上", "翻译", "拆分", "提取", "导出", "配置", "设置",
    "启动", "重启", "编译", "构建", "打包", "上传", "同步", "备份", "重置", "迁移", "标记", "记录", "对比", "审查", "遵循", "遵守",
    "参考", "按照", "跳过", "忽略", "注意", "监听", "拆成", "拆分成", "调低", "调高", "调成", "动",
];

/// Adverbs and politeness that may open a clause before its verb.
#[rustfmt::skip]
const ADVERBS: &[&str] = &[
    "请", "麻烦", "帮忙", "首先", "先", "再", "然后", "接着", "最后", "现在", "马上", "立即", "立刻", "仔细", "详细", "认真",
    "直接", "就", "也", "都", "还", "你", "您", "顺便", "重新", "尽快", "记得", "一定要", "务必", "必须", "需要", "要", "只需",
    "只", "仅仅", "仅", "全部", "统一", "一下",
];

/// Modal words that make a clause a description ("可覆盖", "会被保留", "可能已经过期").
const DESCRIPTIVE: &[&str] = &["可以", "可能", "会", "可", "能", "让", "导致", "使得"];

/// Prohibition words (checked with [`prohibition_at`]).
#[rustfmt::skip]
const PROHIBITIONS: &[&str] = &[
    "不要", "别", "禁止", "不能", "不许", "不准", "绝不", "永远不", "切勿", "不得", "严禁", "勿",
];

#[rustfmt::skip]
const SAFETY: &[&str] = &[
    "生产", "线上", "正式环境", "数据库", "数据", "密钥", "私钥", "密码", "凭证", "凭据", "令牌", "钱", "资金", "付款", "支付",
    "账单", "信用卡", "备份",
];

#[rustfmt::skip]
const QUESTION_WORDS: &[&str] = &[
    "什么", "怎么", "怎样", "为什么", "为啥", "哪", "能不能", "可不可以", "要不要", "有没有", "是不是", "是否", "会不会", "行不行",
    "对不对", "好不好", "多少",
];

pub(super) fn is_cjk(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c) || ('\u{3400}'..='\u{4dbf}').contains(&c)
}

/// `s` after its opening adverbs (and spaces).
fn skip_adverbs(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        match ADVERBS.iter().find(|a| s.starts_with(*a)) {
            // Keep a verb that starts like an adverb ("重复" is not "重" + "复").
            Some(a)
                if !VERBS
                    .iter()
                    .any(|v| v.len() > a.len() && s.starts_with(v) && !a.starts_with(v)) =>
            {
                s = &s[a.len()..]
            }
            _ => return s,
        }
    }
}

/// The verb `s` opens with, if it is used as one (not "恢复的", not "用户", not "通过" alone).
fn verb_at(s: &str) -> Option<&'static str> {
    let v = VERBS
        .iter()
        .copied()
        .filter(|v| s.starts_with(v))
        .max_by_key(|v| v.len())?;
    let after = &s[v.len()..];
    let next = after.chars().next();
    if next == Some('的') || (v == "用" && next.is_some_and(|c| "户于来途法".contains(c))) {
        return None;
    }
    if (v == "写" && next == Some('法'))
        || (v == "动" && next.is_some_and(|c| "态画作".contains(c)))
    {
        return None;
    }
    Some(v)
}

/// Whether a clause is a directive: it opens (after adverbs) with a verb, or with 在/通过/把/将 +
/// a verb later, or with 只/仅 + a verb, and no descriptive modal follows the verb.
pub(super) fn directive(clause: &str) -> bool {
    let raw = clause.trim_start();
    let s = skip_adverbs(raw);
    if s.is_empty() {
        // "拉取" is a verb; a clause of adverbs only ("现在") is not.
        return false;
    }
    let descriptive = |rest: &str| DESCRIPTIVE.iter().any(|d| rest.contains(d));
    if let Some(v) = verb_at(s) {
        // A heading names a thing: "修改方案", "验证方式", "修改文件".
        let heading = [
            "方案", "内容", "文件", "方式", "步骤", "结果", "背景", "计划",
        ]
        .iter()
        .any(|n| s[v.len()..].trim_end() == *n);
        return !heading && !descriptive(&s[v.len()..]);
    }
    for prep in ["在", "通过", "把", "将"] {
        if let Some(rest) = s.strip_prefix(prep) {
            for (i, _) in rest.char_indices() {
                if let Some(v) = verb_at(&rest[i..]) {
                    return !descriptive(&rest[i + v.len()..]);
                }
            }
        }
    }
    // A Latin verb after Chinese adverbs: "先stash掉这个修改".
    if s.len() < raw.len() && s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        let word: String = s.chars().take_while(char::is_ascii_alphabetic).collect();
        return super::english_verb(&word.to_lowercase());
    }
    false
}

/// Whether the prohibition word at byte `at` of `s` prohibits (not 区别, 别人, 能不能, 要不要, …).
fn prohibition_at(s: &str, at: usize, w: &str) -> bool {
    let before = s[..at].chars().next_back();
    let after = s[at + w.len()..].chars().next();
    match w {
        "别" => {
            !before.is_some_and(|c| "区特分识类级个告派差性离辨鉴甄".contains(c))
                && !after.is_some_and(|c| "的人处名".contains(c))
        }
        "不能" => {
            before != Some('能')
                && after != Some('不')
                && before.is_none_or(|c| !is_cjk(c) || "你您请也都绝万们就还并".contains(c))
        }
        "不要" => before != Some('要'),
        "勿" => before.is_none_or(|c| "请切".contains(c) || !is_cjk(c)),
        _ => true,
    }
}

fn any_at(s: &str, words: &[&str], mut ok: impl FnMut(usize, &str) -> bool) -> bool {
    words
        .iter()
        .any(|w| s.match_indices(w).any(|(at, _)| ok(at, w)))
}

/// The Chinese signals of `outside` (the sentence with quotes and inline code replaced).
pub(super) fn signals(outside: &str, s: &mut Signals) {
    if !outside.chars().any(is_cjk) {
        return;
    }
    let clauses: Vec<&str> = outside
        .split([
            '，', ',', '。', '；', ';', '：', ':', '！', '!', '→', '—', '、', '（', '）', '(', ')',
        ])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let body = outside.trim_end_matches(|c: char| c.is_whitespace() || "。.！!".contains(c));
    if body.ends_with(['吗', '嘛', '呢', '么']) || any_at(outside, QUESTION_WORDS, |_, _| true)
    {
        s.question = true;
    }
    if clauses.iter().any(|c| directive(c)) {
        s.directive = true;
    }
    if any_at(outside, PROHIBITIONS, |at, w| {
        prohibition_at(outside, at, w)
    }) {
        s.prohibition = true;
    }
    if ["必须", "务必", "一定要", "一定得", "确保", "记得"]
        .iter()
        .any(|w| outside.contains(w))
    {
        s.requirement = true;
    }
    for c in &clauses {
        for only in ["只", "仅"] {
            if let Some(rest) = c.strip_prefix(only) {
                let rest = rest.trim_start_matches(['仅', '需', '能', '要']);
                if verb_at(rest.trim_start()).is_some() {
                    s.requirement = true;
                }
            }
        }
    }
    condition(outside, &clauses, s);
    every_rule(&clauses, s);
    for c in &clauses {
        let c = skip_adverbs(c);
        // 让 + what it should become ("让这个脚本支持 Windows"), not "让我想想".
        if let Some(rest) = c.strip_prefix('让') {
            if !rest.trim_start().is_empty()
                && !["我", "咱", "人", "你久"]
                    .iter()
                    .any(|w| rest.trim_start().starts_with(w))
            {
                s.goal = true;
            }
        }
    }
    should(&clauses, s);
    // An action that waits for the user's approval: "都需要我批准", "要先经过我确认".
    if ["需要", "要", "须", "得"].iter().any(|m| {
        outside.match_indices(m).any(|(at, _)| {
            let after = &outside[at + m.len()..];
            let after = after
                .trim_start_matches(['先', '经', '过', '得', '到', '获'])
                .trim_start();
            ["我", "我们"].iter().any(|who| {
                after.strip_prefix(who).is_some_and(|a| {
                    [
                        "批准",
                        "同意",
                        "确认",
                        "审批",
                        "审核",
                        "签字",
                        "的批准",
                        "的同意",
                        "的确认",
                    ]
                    .iter()
                    .any(|w| a.starts_with(w))
                })
            })
        })
    }) {
        s.requirement = true;
    }
    // Preferences.
    let pref = [
        "我更喜欢",
        "我喜欢",
        "我比较喜欢",
        "我倾向",
        "我更倾向",
        "我偏好",
        "我更愿意",
        "请用",
        "请使用",
        "尽量用",
        "优先用",
        "优先使用",
    ];
    if pref.iter().any(|p| outside.contains(p))
        || clauses.iter().any(|c| {
            let c = skip_adverbs(c);
            (c.starts_with('用') || c.starts_with("使用") || c.starts_with("改用"))
                && ["代替", "替代", "取代", "而不是", "而非"]
                    .iter()
                    .any(|w| c.contains(w))
        })
    {
        s.preference = true;
    }
    // Goals.
    let goal_words = [
        "我想要",
        "我希望",
        "我们希望",
        "我需要",
        "我们需要",
        "我要的是",
    ];
    if goal_words.iter().any(|g| outside.contains(g))
        || clauses.iter().any(|c| {
            ["目标是", "目的是"].iter().any(|g| {
                c.match_indices(g).any(|(at, _)| {
                    let before = &c[..at];
                    before.is_empty()
                        || [
                            "我的",
                            "我们的",
                            "你的",
                            "最终",
                            "主要",
                            "本次",
                            "这次的",
                            "唯一的",
                        ]
                        .iter()
                        .any(|p| before.ends_with(p))
                })
            })
        })
    {
        s.goal = true;
    }
    if SAFETY.iter().any(|w| outside.contains(w)) {
        s.safety_object = true;
    }
}

/// 应该/应当 stating what must hold: "你应该先读 README" (a requirement; 你不应该 … prohibits),
/// "接口应该返回 JSON" (a goal), not a guess ("这应该是缓存的问题", "应该没问题", "应该会…"), not
/// about the speaker ("我应该早点说") and not what was supposed to be ("按理说…应该通过的").
fn should(clauses: &[&str], s: &mut Signals) {
    for c in clauses {
        for m in ["应该", "应当"] {
            for (at, _) in c.match_indices(m) {
                let before = c[..at].trim();
                let after = c[at + m.len()..].trim();
                let guess = [
                    "是", "没", "不会", "会", "可以", "能", "已经", "就", "还", "有", "也是", "的",
                    "吧",
                ]
                .iter()
                .any(|w| after.starts_with(w))
                    || after.is_empty()
                    || after.ends_with(['的', '吧'])
                    || [
                        "本来",
                        "原本",
                        "按理",
                        "照理",
                        "理论上",
                        "按说",
                        "估计",
                        "大概",
                    ]
                    .iter()
                    .any(|w| c.contains(w));
                let (subject, negated) = match before.strip_suffix('不') {
                    Some(b) => (b.trim(), true),
                    None => (before, false),
                };
                if guess || subject.ends_with('我') || subject == "这" || subject == "那" {
                    continue;
                }
                if ["", "你", "您", "你们"].contains(&subject) {
                    s.directive = true;
                    if negated {
                        s.prohibition = true;
                    } else {
                        s.requirement = true;
                    }
                } else {
                    s.goal = true;
                }
            }
        }
    }
}

/// 如果/要是/假如/一旦/当 … (就 | ， | 时 | 的话) + directive; X时：/X前/X之后 + directive (X with a
/// verb for 前/后); 先 + verb … 再 + verb.
fn condition(outside: &str, clauses: &[&str], s: &mut Signals) {
    let t = outside.trim_start();
    let rest_directive = |rest: &str| {
        let rest =
            rest.trim_start_matches(|c: char| c.is_whitespace() || "，,：:的话就".contains(c));
        directive(rest) || super::english_directive(rest)
    };
    for opener in ["如果", "要是", "假如", "若是", "一旦", "当", "每当", "等到"] {
        if let Some(rest) = t.strip_prefix(opener) {
            let split = ["就", "，", ",", "时", "的话", "后"]
                .iter()
                .filter_map(|m| rest.find(m).map(|i| (i, m.len())))
                .min();
            if let Some((i, n)) = split {
                if rest_directive(&rest[i + n..]) {
                    s.condition = true;
                    return;
                }
            }
        }
    }
    for c in clauses.iter().copied().chain([t]) {
        for mark in ["之后", "以后", "之前", "以前", "时", "后", "前"] {
            for (at, _) in c.match_indices(mark) {
                let before = &c[..at];
                if before.trim().is_empty() {
                    continue;
                }
                let needs_verb = mark != "时";
                let has_verb = before
                    .char_indices()
                    .any(|(i, _)| verb_at(&before[i..]).is_some())
                    || before.contains('完');
                let after = &c[at + mark.len()..];
                let after = if after.trim().is_empty() && mark == "时" {
                    // "标签页隐藏时：保存 …": the directive is the next clause.
                    let i = clauses.iter().position(|x| std::ptr::eq(*x, c));
                    i.and_then(|i| clauses.get(i + 1)).copied().unwrap_or("")
                } else {
                    after
                };
                if (!needs_verb || has_verb) && rest_directive(after) {
                    s.condition = true;
                    return;
                }
            }
        }
    }
    if let (Some(a), Some(b)) = (t.find('先'), t.rfind('再')) {
        if a < b
            && !t[..a].ends_with('首')
            && verb_at(skip_adverbs(&t[a + '先'.len_utf8()..])).is_some()
        {
            let after = skip_adverbs(&t[b + '再'.len_utf8()..]);
            if verb_at(after).is_some() {
                s.condition = true;
            }
        }
    }
}

/// 每次/每个/以后/今后/总是/始终/一律 … + a directive (都要, 都用, 要, 必须, or a verb), with no
/// descriptive modal (每次运行都会报错 describes).
fn every_rule(clauses: &[&str], s: &mut Signals) {
    for c in clauses {
        let starts_rule = [
            "以后",
            "今后",
            "从现在起",
            "从现在开始",
            "总是",
            "始终",
            "一律",
            "永远",
        ]
        .iter()
        .any(|m| skip_adverbs(c).starts_with(m) || c.starts_with(m));
        let each = [
            "每次", "每个", "每一", "每条", "每篇", "每份", "每当", "所有",
        ]
        .iter()
        .any(|m| c.contains(m));
        if !(starts_rule || each) {
            continue;
        }
        if DESCRIPTIVE.iter().any(|d| c.contains(d)) {
            continue;
        }
        // 要 + a number is "takes" (每个请求大概要 200 毫秒), not "must".
        let modal = [
            "都要",
            "都用",
            "都以",
            "应该",
            "应当",
            "都得",
            "都必须",
            "都需要",
            "必须",
            "要",
            "请用",
            "请使用",
        ]
        .iter()
        .any(|m| {
            c.match_indices(m).any(|(at, _)| {
                !c[at + m.len()..]
                    .trim_start()
                    .starts_with(|d: char| d.is_ascii_digit())
            })
        });
        let verb = c.char_indices().any(|(i, _)| {
            let rest = &c[i..];
            ["总是", "始终", "一律", "以后", "今后"]
                .iter()
                .any(|m| rest.starts_with(m))
                && verb_at(skip_adverbs(&rest[m_len(rest)..])).is_some()
        });
        if modal || verb {
            s.every_rule = true;
            s.directive = true;
        }
    }
}

fn m_len(rest: &str) -> usize {
    rest.chars().take(2).map(char::len_utf8).sum()
}
