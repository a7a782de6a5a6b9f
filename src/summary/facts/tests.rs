use super::scan::is_delim;
use super::*;
use crate::message::{Block, Message, Role};

fn facts(text: &str) -> Vec<String> {
    let mut s = FactSet::new();
    s.scan(text, FactKinds::ALL);
    s.finish().into_iter().map(|(_, f)| f).collect()
}

fn paths(text: &str) -> Vec<String> {
    let mut s = FactSet::new();
    s.scan(text, FactKinds::PATHS);
    s.finish().into_iter().map(|(_, f)| f).collect()
}

#[test]
fn ascii_delimiters_table() {
    let listed = "\"'`<>|;,()[]{}=&!";
    for b in 0u8..128 {
        let c = b as char;
        let expected = c.is_ascii_whitespace() || c.is_ascii_control() || listed.contains(c);
        assert_eq!(is_delim(c), expected, "{c:?}");
    }
    // A token runs through non-ASCII letters; CJK characters end it.
    assert_eq!(paths("see src/café/main.rs, then"), ["src/café/main.rs"]);
    assert_eq!(paths("改了src/main.rs文件"), ["src/main.rs"]);
}

#[test]
fn absolute_home_relative_windows() {
    assert_eq!(paths("edit /srv/app/x.py now"), ["/srv/app/x.py"]);
    assert_eq!(paths("see ~/.config/x and ~ alone"), ["~/.config/x"]);
    assert_eq!(
        paths("run ./tests/test_x.py then ../lib/a.rs"),
        ["./tests/test_x.py", "../lib/a.rs"]
    );
    assert_eq!(
        paths("in src/lib.rs and billing/tax.py"),
        ["src/lib.rs", "billing/tax.py"]
    );
    assert_eq!(
        paths(r"open C:\Users\me\file.txt or C:/x/y"),
        [r"C:\Users\me\file.txt", "C:/x/y"]
    );
    assert_eq!(
        paths(r"share \\server\share\x.doc"),
        [r"\\server\share\x.doc"]
    );
    assert_eq!(
        paths(r"got 'src\\project\\__init__.py' and src\b\c.rs"),
        [r"src\\project\\__init__.py", r"src\b\c.rs"]
    );
    assert!(paths(r"print('a\nb') and \d+\.py").is_empty());
    assert_eq!(paths("cd /testbed && ls /tmp"), ["/testbed", "/tmp"]);
    assert_eq!(
        paths("the .github/workflows/ci.yml and @.agent/skills/ dir"),
        [".github/workflows/ci.yml", ".agent/skills"]
    );
    assert_eq!(paths("astropy/modeling/ holds them"), ["astropy/modeling"]);
    // A dot-directory alone names a directory, not a file; a file in it is a path.
    assert!(paths("pip installed it into .venv and .git").is_empty());
    assert_eq!(paths("source .venv/bin/activate"), [".venv/bin/activate"]);
}

#[test]
fn cleaning() {
    assert_eq!(paths("at src/lib.rs:12:5, then"), ["src/lib.rs"]);
    assert_eq!(
        paths("pytest tests/test_x.py::TestA::test_b -q"),
        ["tests/test_x.py"]
    );
    assert_eq!(paths("(see `src/main.rs`)."), ["src/main.rs"]);
    assert_eq!(
        paths("**README.md** and docs/index.md#usage"),
        ["README.md", "docs/index.md"]
    );
    assert_eq!(
        paths("--config=conf/app.toml PATH=/usr/local/bin:/bin"),
        ["conf/app.toml", "/usr/local/bin", "/bin"]
    );
    assert_eq!(paths("--- a/src/x.py\n+++ b/src/x.py"), ["src/x.py"]);
    assert_eq!(paths("\"file_path\": \"/a/b/c.tsx\","), ["/a/b/c.tsx"]);
    // Chinese prose and full-width punctuation around paths.
    assert_eq!(
        paths("修改了src/lib.rs文件，然后运行tests/a_test.py。"),
        ["src/lib.rs", "tests/a_test.py"]
    );
    assert_eq!(
        paths("文件：`web/src/features/chat/x.tsx`（已更新）"),
        ["web/src/features/chat/x.tsx"]
    );
}

#[test]
fn bare_names() {
    assert_eq!(
        paths("Fix tax.py, Cargo.toml and README.md."),
        ["tax.py", "Cargo.toml", "README.md"]
    );
    assert_eq!(
        paths("app.tsx, data.csv and config.yaml"),
        ["app.tsx", "data.csv", "config.yaml"]
    );
    assert_eq!(paths("add a Makefile and .env"), ["Makefile", ".env"]);
    for junk in [
        "e.g. this",
        "i.e. that",
        "v1.2.3",
        "version 1.5",
        "console.log(x)",
        "response.json()",
        "self.lock",
        "Node.js rocks",
        "example.com",
        "3.14",
        "files ending in .py",
        "U.S.A",
        "obj.data",
        "np.array",
    ] {
        assert!(paths(junk).is_empty(), "{junk}: {:?}", paths(junk));
    }
}

#[test]
fn rejected_junk() {
    for junk in [
        "1/2 of it",
        "on 2024/08/13",
        "and/or",
        "text/html",
        "fix/web-websocket-reconnect-storm",
        "origin/main",
        "/compact",
        "/clear",
        "//comment",
        "src/**/*.ts",
        "$HOME/x/y",
        "a//b",
        "-Isrc/include",
        "km/h",
        "@/hooks/types",
        "</div>",
        "x.shape/y",
        "input/output",
        "/",
        "./",
        "..",
        "~",
        "done/in_progress/pending",
        "Auth/CORS/GZip",
        "s/old_string/new_string/g",
        "s/a/b/",
        "10s/old/new/",
        "path/to/file1",
        "astropy/modeling/tests",
        "echo x 2>/dev/null",
        "cat > /dev/stdout",
    ] {
        assert!(paths(junk).is_empty(), "{junk}: {:?}", paths(junk));
    }
}

#[test]
fn urls() {
    assert_eq!(
        facts("see https://example.com/a_(b)."),
        ["https://example.com/a_(b)"]
    );
    assert_eq!(
        facts("[docs](https://x.io/p?q=1&r=2), more"),
        ["https://x.io/p?q=1&r=2"]
    );
    assert_eq!(
        facts("访问https://github.com/a/b获取。"),
        ["https://github.com/a/b"]
    );
    assert_eq!(
        facts("<http://localhost:5173/src/hooks/x.ts>"),
        ["http://localhost:5173/src/hooks/x.ts"]
    );
    assert_eq!(
        facts("file:///tmp/x.txt and ftp://h/f"),
        ["file:///tmp/x.txt", "ftp://h/f"]
    );
    // No double counting as paths; a bare scheme is nothing.
    assert_eq!(facts("https:// and mailto:x@y.z"), Vec::<String>::new());
    assert_eq!(
        facts("'https://a.b/c' \"http://d.e\""),
        ["https://a.b/c", "http://d.e"]
    );
}

#[test]
fn error_names_found() {
    assert_eq!(
        facts("raised ZeroDivisionError: division by zero; then KeyError('x')"),
        ["ZeroDivisionError", "KeyError"]
    );
    assert_eq!(
        facts("java.lang.NullPointerException at Foo"),
        ["java.lang.NullPointerException"]
    );
    // The bare name is contained in the qualified one.
    assert_eq!(
        facts("HTTPError, then requests.exceptions.HTTPError"),
        ["requests.exceptions.HTTPError"]
    );
    assert_eq!(facts("error[E0425]: cannot find value"), ["E0425"]);
    assert_eq!(facts("Error: ENOENT: no such file"), ["ENOENT"]);
    assert_eq!(
        facts("DeprecationWarning and KeyboardInterrupt"),
        ["DeprecationWarning", "KeyboardInterrupt"]
    );
    for junk in [
        "Error alone",
        "isError onError",
        "CONNECTION_ERROR",
        "std::io::Error",
        "errors",
    ] {
        assert!(facts(junk).is_empty(), "{junk}: {:?}", facts(junk));
    }
    // Chinese prose around names.
    assert_eq!(
        facts("出现了KeyError错误，以及“ValueError”。"),
        ["KeyError", "ValueError"]
    );
}

#[test]
fn sources_and_dedup() {
    let msgs = vec![
        Message::text(
            Role::User,
            "Fix billing/tax.py, it raises ZeroDivisionError. See https://x.org/i/1.",
        ),
        Message::new(
            Role::Assistant,
            vec![
                Block::thinking("maybe /secret/thinking.py"),
                Block::text("Reading tax.py."),
                Block::tool_call(
                    Some("c1"),
                    "bash",
                    "{\"command\": \"cat /srv/billing/tax.py\\nls src/\"}",
                ),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![Block::tool_result(
                Some("c1"),
                "/from/tool/output.py KeyError",
            )],
        ),
        Message::text(Role::System, "/etc/system.conf"),
        Message::text(Role::User, "修改 src/lib.rs，谢谢"),
    ];
    assert_eq!(
        must_keep_facts(&msgs),
        [
            "ZeroDivisionError",
            "https://x.org/i/1",
            "/srv/billing/tax.py",
            "src/lib.rs"
        ]
    );
    assert!(must_keep_facts(&[]).is_empty());
}

#[test]
fn args_not_json_and_keys() {
    let mut s = FactSet::new();
    s.scan_args("{\"/not/a/fact.py\": \"value src/a.rs\"}", FactKinds::ALL);
    s.scan_args("cat /raw/args.txt", FactKinds::ALL);
    let f: Vec<String> = s.finish().into_iter().map(|(_, f)| f).collect();
    assert_eq!(f, ["src/a.rs", "/raw/args.txt"]);
}

#[test]
fn presence() {
    let summary = "Edited `src/lib.rs` (see https://x.org/a) and C:/w/x.txt; KeyError fixed.";
    assert!(fact_present(summary, "src/lib.rs"));
    assert!(fact_present(summary, "./src/lib.rs"));
    // A single name without its `./` is only a word of other paths.
    assert!(!fact_present("see /w/src/Viewer.tsx", "./Viewer"));
    assert!(fact_present("see ./Viewer", "./Viewer"));
    assert!(fact_present(
        "见 /testbed/src/marshmallow/fields.py",
        "./src/marshmallow"
    ));
    assert!(fact_present(summary, "https://x.org/a/"));
    assert!(fact_present(summary, r"C:\w\x.txt"));
    assert!(fact_present(summary, "KeyError"));
    assert!(!fact_present(summary, "ValueError"));
    assert!(!fact_present(summary, "/srv/lib.rs"));
    assert!(fact_present(r"path C:\\w\\y.txt", r"C:\w\y.txt"));
    assert!(fact_present(r"see src/p/m.py", r"src\\p\\m.py"));
    assert!(fact_present(r"see src\p\m.py", r"src\\p\\m.py"));
}

#[test]
fn wide_text_sources() {
    let s = "见 /srv/app/中文.py 🙂 和 KeyError";
    let ucs4: Vec<u32> = s.chars().map(|c| c as u32).collect();
    let m = [Message::new(
        Role::User,
        vec![Block::text(crate::message::Piece::Borrowed(
            crate::text::Text::Ucs4(&ucs4),
        ))],
    )];
    // A path segment in Chinese is a boundary: the ASCII part before it is kept.
    assert_eq!(must_keep_facts(&m), ["/srv/app", "KeyError"]);
}

#[test]
fn placeholders_and_devices() {
    // A placeholder the text names is a path like any other: the task's instructions say it.
    assert_eq!(
        paths("cd /path/to/working/dir && cat <<'EOF' > newfile.py"),
        ["/path/to/working/dir", "newfile.py"]
    );
    assert_eq!(paths("gcc <filename.c> -o out"), ["filename.c"]);
    assert_eq!(
        paths("在 /path/to/working/dir 目录下运行"),
        ["/path/to/working/dir"]
    );
    // Pseudo-devices of shell redirections are not; a real device is.
    assert!(paths("ls src 2>/dev/null; cat /dev/urandom").is_empty());
    assert_eq!(
        paths("mount /dev/sda1 /mnt/data"),
        ["/dev/sda1", "/mnt/data"]
    );
}

#[test]
fn brace_expansions() {
    // The written form is the fact: the expansions are not in the text.
    assert_eq!(
        paths("edit docs/{zh,en}/reference/kimi-info.md now"),
        ["docs/{zh,en}/reference/kimi-info.md"]
    );
    assert_eq!(
        paths("touch src/{lib,main}.rs and {src,tests}/x.py"),
        ["src/{lib,main}.rs", "{src,tests}/x.py"]
    );
    assert_eq!(
        paths("更新了docs/{zh,en}/guide.md文件。"),
        ["docs/{zh,en}/guide.md"]
    );
    assert_eq!(
        paths("同步：`docs/{zh,en}/reference/`（两种语言）"),
        ["docs/{zh,en}/reference"]
    );
    // Not brace expansions: code, format strings, a single alternative, a variable.
    for junk in [
        "f(x) {a, b}",
        "{x}/y",
        "fmt!(\"{}/{}\", a, b)",
        "{a,b}",
        "${ROOT}/build/build_$(c)",
    ] {
        assert!(paths(junk).is_empty(), "{junk}: {:?}", paths(junk));
    }
}

#[test]
fn glued_flags_dashes_globs_and_colons() {
    assert_eq!(
        paths("gcc -I/opt/miniconda3/include/python3.11 -L/usr/lib main.c"),
        ["/opt/miniconda3/include/python3.11", "/usr/lib", "main.c"]
    );
    assert_eq!(paths("|--src/\n|------file.py # empty"), ["file.py"]);
    assert_eq!(paths(".../astropy/io/fits.py"), ["astropy/io/fits.py"]);
    assert_eq!(
        paths("Glob /Users/me/.claude/projects/-Users-me-app/**/*"),
        ["/Users/me/.claude/projects/-Users-me-app"]
    );
    assert_eq!(
        paths("git show main:web/src/hooks/useSessionStream.ts | head"),
        ["web/src/hooks/useSessionStream.ts"]
    );
    assert_eq!(paths("scp host:/srv/app/x.py ."), ["/srv/app/x.py"]);
    assert_eq!(
        paths(r"C:\w\x.py:12:3 and C:/w/y.txt"),
        [r"C:\w\x.py", "C:/w/y.txt"]
    );
    assert_eq!(
        paths("用 -I/opt/include 编译，再看 main:src/lib.rs。"),
        ["/opt/include", "src/lib.rs"]
    );
    // Still not paths: a flag glued to a relative word, `-Isrc/include`.
    assert!(paths("-Isrc/include").is_empty());
}

#[test]
fn routes_of_four_segments() {
    assert_eq!(
        paths("gh api repos/MoonshotAI/kimi-cli/pulls/1290/comments --jq ."),
        ["repos/MoonshotAI/kimi-cli/pulls/1290/comments"]
    );
    assert_eq!(paths("调用repos/a/b/issues/7接口"), ["repos/a/b/issues/7"]);
    for junk in [
        "2024/08/13/01",
        "s/a/b/c/",
        "1/2/3/4",
        "done/in_progress/pending",
    ] {
        assert!(paths(junk).is_empty(), "{junk}: {:?}", paths(junk));
    }
}

#[test]
fn ellipsis_fragments() {
    // Words an ellipsis touches were cut earlier: fragments, not facts.
    assert!(
        facts("see http://localhost:5173/src/hooks/useSessionS… and …ite/deps/x.js").is_empty()
    );
    assert!(facts("…[120 chars omitted]…s/foo/bar.py then").is_empty());
    assert_eq!(facts("读取了 src/a.py… 然后 src/b.py"), ["src/b.py"]);
    assert_eq!(facts("see src/a.py …"), ["src/a.py"]);
}
