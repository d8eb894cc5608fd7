#!/usr/bin/env python3
"""Check that the documentation's references resolve and that no history leaks in.

Checked, from the repository's root:
  * every relative Markdown link in docs/**/*.md, README.md, CONTRIBUTING.md and the
    crates' README.md files resolves to a file or folder, and its #anchor (if any) to a
    heading of that file;
  * every backticked repository path in those files (`crates/...`, `lab/...`, `docs/...`,
    `scripts/...`, top-level files) exists;
  * every `docs/...md` reference in a .rs file exists, and where a comment names a heading
    after it (`docs/design.md`, "Heading" or docs/design.md#anchor), that heading exists
    (a quoted heading may be the start of the full heading);
  * docs/benchmarks.md and docs/design.md stay within MAX_LINES, docs/ within MAX_DOCS_BYTES;
  * history words (session and issue numbers, "the second round", branch names) never
    appear in the comments and string literals of .rs files, and at most MAX_HISTORY times
    in all the user docs (CHANGELOG.md may keep them; backticked file names are not words).

Usage: scripts/check-docs.py [--self-test]. Exit 0 when clean, 1 with one line per problem.
Standard library only.
"""

import os
import re
import subprocess
import sys
import tempfile

MAX_HISTORY = 5

# The docs state what is true now: a record that outgrows these has become a journal.
MAX_LINES = {"docs/benchmarks.md": 400, "docs/design.md": 700}
MAX_DOCS_BYTES = 2 * 1024 * 1024

# Words that tie a text to the project's history rather than to what is true now.
HISTORY = re.compile(
    r"\bsessions?\s+\d+"
    r"|\bissues?\s+#?\d+"
    r"|\b(?:second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+round\b"
    r"|\bs\d{1,2}[a-c]?\b"
    r"|\b(?:pipe|disp|eval|api|capi|cluster|core|pool|server)\d{1,2}[a-c]?\b",
    re.IGNORECASE,
)

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BACKTICK = re.compile(r"`([^`\n]+)`")
DOC_REF = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.md)(#[\w-]+)?`?\)?\s*,?\s*(?:\"([^\"]+)\")?")
MD_LINK_HEADING = re.compile(r"\]\(([^)\s#]+\.md)\)\s*,\s*\"([^\"]+)\"")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    """GitHub's anchor for a heading."""
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def norm(heading):
    return re.sub(r"\s+", " ", heading.replace("`", "").strip().lower())


def headings(path, cache={}):
    """The headings of a Markdown file (outside code fences), as written."""
    if path not in cache:
        out, fenced = [], False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else HEADING.match(line)
                if m:
                    out.append(m.group(2))
        cache[path] = out
    return cache[path]


def anchors(path):
    seen, out = {}, set()
    for h in headings(path):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def has_heading(path, quoted):
    q = norm(quoted)
    return any(norm(h) == q or norm(h).startswith(q) for h in headings(path))


def strip_code(text):
    """Markdown text without fenced code blocks (kept as blank lines, so line numbers hold)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def user_docs(root):
    files = []
    for name in ("README.md", "CONTRIBUTING.md"):
        if os.path.exists(os.path.join(root, name)):
            files.append(name)
    for top in ("crates", "lab"):
        d = os.path.join(root, top)
        if os.path.isdir(d):
            for c in sorted(os.listdir(d)):
                if os.path.exists(os.path.join(d, c, "README.md")):
                    files.append(f"{top}/{c}/README.md")
    for dirpath, _, names in os.walk(os.path.join(root, "docs")):
        for n in sorted(names):
            if n.endswith(".md"):
                files.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(files)


def rust_files(root):
    out = []
    for top in ("crates", "lab"):
        for dirpath, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "target"]
            out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(".rs")]
    return sorted(out)


def repo_path_token(tok, tops):
    """The repository path a backticked token names, or None if it is not one."""
    if any(c in tok for c in " {}*<>$|"):
        return None
    tok = tok.split("::")[0].rstrip(",;")
    first = tok.split("/")[0]
    if first not in tops or ("/" not in tok and "." not in tok):
        return None
    return tok.split(":")[0].split("#")[0]


def check_markdown(root, rel, problems):
    path = os.path.join(root, rel)
    raw = open(path, encoding="utf-8").read()
    text = strip_code(raw)
    base = os.path.dirname(path)
    tops = {n for n in os.listdir(root) if not n.startswith(".") and n != "target"}
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
        where = f"{rel}:{line_of(text, m.start())}"
        if not os.path.exists(dest):
            problems.append(f"{where}: link to `{target}`: no such file")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            problems.append(f"{where}: link to `{target}`: no heading with anchor #{anchor}")
    for m in MD_LINK_HEADING.finditer(text):
        dest = os.path.normpath(os.path.join(base, m.group(1)))
        if os.path.exists(dest) and not has_heading(dest, m.group(2)):
            problems.append(f"{rel}:{line_of(text, m.start())}: `{m.group(1)}` has no heading \"{m.group(2)}\"")
    for m in BACKTICK.finditer(text):
        p = repo_path_token(m.group(1), tops)
        if p and not os.path.exists(os.path.join(root, p)):
            problems.append(f"{rel}:{line_of(text, m.start())}: `{m.group(1)}`: no such path in the repository")
    for m in DOC_REF.finditer(text):
        dest = os.path.join(root, m.group(1))
        if m.group(3) and os.path.exists(dest) and not has_heading(dest, m.group(3)):
            problems.append(f"{rel}:{line_of(text, m.start())}: `{m.group(1)}` has no heading \"{m.group(3)}\"")


def comment_text(src):
    """The .rs file's comments joined into one string (prefixes dropped), with a map
    from offsets back to line numbers."""
    parts, starts = [], []
    pos = 0
    for i, line in enumerate(src.split("\n"), 1):
        s = line.strip()
        m = re.match(r"^//[/!]?\s?", s)
        if not m:
            code = line.split("//", 1)
            if len(code) == 2:
                s, m = "//" + code[1], re.match(r"^//[/!]?\s?", "//" + code[1])
        if m:
            piece = s[m.end():] + " "
            starts.append((pos, i))
            parts.append(piece)
            pos += len(piece)
        else:
            starts.append((pos, i))
            parts.append("\n")
            pos += 1
    return "".join(parts), starts


def line_at(starts, offset):
    line = 1
    for p, n in starts:
        if p > offset:
            break
        line = n
    return line


def check_rust(root, rel, problems, history):
    src = open(os.path.join(root, rel), encoding="utf-8").read()
    comments, starts = comment_text(src)
    for m in DOC_REF.finditer(src):
        if not os.path.exists(os.path.join(root, m.group(1))):
            problems.append(f"{rel}:{line_of(src, m.start())}: `{m.group(1)}`: no such file")
    for m in DOC_REF.finditer(comments):
        dest = os.path.join(root, m.group(1))
        if not os.path.exists(dest):
            continue
        where = f"{rel}:{line_at(starts, m.start())}"
        if m.group(2) and m.group(2)[1:] not in anchors(dest):
            problems.append(f"{where}: `{m.group(1)}{m.group(2)}`: no such heading")
        if m.group(3) and not has_heading(dest, m.group(3)):
            problems.append(f"{where}: `{m.group(1)}` has no heading \"{m.group(3)}\"")
    for m in HISTORY.finditer(comments):
        history.append(f"{rel}:{line_at(starts, m.start())}: history word `{m.group(0)}` in a comment")
    for m in STRING.finditer(src):
        text = re.sub(r"\{[^{}]*\}", "", m.group(0))  # format arguments are names, not words
        for h in HISTORY.finditer(text):
            history.append(f"{rel}:{line_of(src, m.start())}: history word `{h.group(0)}` in a string")


def doc_history(root, rel):
    """History words in a doc's prose: backticked paths and file names are left out."""
    text = strip_code(open(os.path.join(root, rel), encoding="utf-8").read())
    text = BACKTICK.sub(lambda m: "" if re.search(r"[/.]", m.group(1)) else m.group(0), text)
    text = LINK.sub("", text)
    return [f"{rel}:{line_of(text, m.start())}: `{m.group(0)}`" for m in HISTORY.finditer(text)]


def check_sizes(root):
    problems = []
    for rel, most in MAX_LINES.items():
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                lines = sum(1 for _ in f)
            if lines > most:
                problems.append(f"{rel}: {lines} lines (at most {most})")
    total = 0
    for dirpath, _, files in os.walk(os.path.join(root, "docs")):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    if total > MAX_DOCS_BYTES:
        problems.append(f"docs/: {total} bytes (at most {MAX_DOCS_BYTES})")
    return problems


def check(root):
    problems, rust_history, docs_history = [], [], []
    for rel in user_docs(root):
        check_markdown(root, rel, problems)
        docs_history += doc_history(root, rel)
    for rel in rust_files(root):
        check_rust(root, rel, problems, rust_history)
    problems += rust_history
    problems += check_sizes(root)
    if len(docs_history) > MAX_HISTORY:
        problems += docs_history
        problems.append(f"{len(docs_history)} history words in the user docs (at most {MAX_HISTORY})")
    return problems, docs_history


def self_test():
    """A small repository with one of each mistake: each must be reported; fixed, none."""
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)) or root, exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)

        write("docs/design.md", "# Design\n\n## Queues\n\ntext\n")
        write("crates/a/src/lib.rs", "//! See `docs/design.md`, \"Queues\".\nfn main() {}\n")
        write("README.md", "[design](docs/design.md#queues) and `crates/a/src/lib.rs`.\n")
        problems, _ = check(root)
        assert problems == [], problems

        write("README.md", "[design](docs/nope.md), [q](docs/design.md#nowhere), `crates/a/src/gone.rs`.\n")
        write(
            "crates/a/src/lib.rs",
            "//! See `docs/design.md`, \"Order\".\n// session 7 did this\n"
            "fn main() { let s1 = 1; println!(\"{s1} as in issue 16\"); }\n",
        )
        problems, _ = check(root)
        text = "\n".join(problems)
        for needle in ("docs/nope.md", "#nowhere", "gone.rs", "no heading \"Order\"", "`session 7`", "`issue 16`"):
            assert needle in text, f"not reported: {needle}\n{text}"
        write("docs/notes.md", "issue 1, issue 2, session 3, the fourth round, pipe13, s17.\n")
        write("docs/design.md", "# Design\n\n## Queues\n\n" + "text\n" * 700)
        problems, found = check(root)
        assert any("docs/design.md: 704 lines (at most 700)" in p for p in problems), problems
        assert len(found) == 6 and any("history words in the user docs" in p for p in problems), problems
    print("check-docs self-test: ok")


def main():
    if "--self-test" in sys.argv[1:]:
        self_test()
        return 0
    root = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    ).stdout.strip() or os.getcwd()
    problems, history = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-docs: ok ({len(user_docs(root))} docs, {len(history)} history words in docs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
