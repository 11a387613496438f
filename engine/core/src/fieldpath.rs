//! Which field an error position is in. serde's messages say what was wrong
//! ("invalid type: string \"x\", expected u64") and the parsers say where
//! (line and column), but not in which field; a user editing a trace, policy
//! or spec by hand needs the field. These functions read the field path back
//! from the text at the error's position: `meta.hidden`, `nodes[3].args[1]`,
//! `quick.repeats`. They only scan brackets, quotes and keys, so they work on
//! text that does not parse.

/// The path of the JSON value at 1-based `line` and `column` of `text`
/// (`None` at the top level or past the end).
pub fn json_path_at(text: &str, line: usize, column: usize) -> Option<String> {
    let end = offset(text, line, column)?;
    enum Frame {
        Object { key: Option<String>, want_key: bool },
        Array { index: usize },
    }
    let mut stack: Vec<Frame> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < end.min(bytes.len()) {
        match bytes[i] {
            b'{' => stack.push(Frame::Object {
                key: None,
                want_key: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Array { index }) => *index += 1,
                Some(Frame::Object { key, want_key }) => {
                    // Between members: the last key's value is over.
                    *key = None;
                    *want_key = true;
                }
                None => {}
            },
            b':' => {
                if let Some(Frame::Object { want_key, .. }) = stack.last_mut() {
                    *want_key = false;
                }
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                // A key the file ends inside (a truncated file) names no
                // field yet: the path stops at the object holding it.
                if i >= bytes.len() {
                    break;
                }
                if let Some(Frame::Object {
                    key,
                    want_key: true,
                }) = stack.last_mut()
                {
                    *key = Some(String::from_utf8_lossy(&bytes[start..i.min(bytes.len())]).into());
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for f in &stack {
        match f {
            Frame::Object { key: Some(k), .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Frame::Object { key: None, .. } => {}
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    (!path.is_empty()).then_some(path)
}

/// The dotted key path of the YAML value at 1-based `line` and `column` of
/// `text`, for block-style YAML with flow lists and mappings on one line
/// (`repeats: 3`, `quick:\n  batches: [1, x]`, `- { workloads: [a] }`).
pub fn yaml_path_at(text: &str, line: usize, column: usize) -> Option<String> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (n, l) in text.lines().enumerate().take(line) {
        let content = l.split(" #").next().unwrap_or(l);
        let trimmed = content.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut indent = content.len() - trimmed.len();
        let mut rest = trimmed;
        while let Some(r) = rest.strip_prefix("- ") {
            indent += 2;
            rest = r.trim_start();
        }
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        if let Some(key) = block_key(rest) {
            stack.push((indent, key.to_string()));
        }
        if n + 1 == line {
            // A flow mapping on the error line: the key before the column.
            // The column may fall inside a multi-byte character: round down.
            let mut cut = column.saturating_sub(1).min(l.len());
            while !l.is_char_boundary(cut) {
                cut -= 1;
            }
            let upto = &l[..cut];
            if let Some(k) = last_flow_key(upto)
                && stack.last().is_none_or(|(_, top)| top != k)
            {
                stack.push((usize::MAX, k.to_string()));
            }
        }
    }
    let keys: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
    (!keys.is_empty()).then(|| keys.join("."))
}

/// `key` of a line `key: value` or `key:` (a plain or quoted key).
fn block_key(line: &str) -> Option<&str> {
    let colon = line
        .find(": ")
        .or_else(|| line.ends_with(':').then(|| line.len() - 1))?;
    let key = line[..colon].trim().trim_matches(['"', '\'']);
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    plain.then_some(key)
}

/// The last `key:` inside a flow mapping `{ ... }` of `text`.
fn last_flow_key(text: &str) -> Option<&str> {
    let open = text.rfind('{')?;
    let inner = &text[open + 1..];
    let colon = inner.rfind(':')?;
    let before = &inner[..colon];
    let start = before.rfind([',', '{']).map_or(0, |i| i + 1);
    let key = before[start..].trim();
    (!key.is_empty() && !key.contains([' ', '[', ']'])).then_some(key)
}

/// Byte offset of 1-based `line`, `column` (serde_json counts columns in
/// bytes; the column may point one past the line's end).
fn offset(text: &str, line: usize, column: usize) -> Option<usize> {
    if line == 0 {
        return None;
    }
    let mut start = 0;
    for _ in 1..line {
        start += text[start..].find('\n')? + 1;
    }
    Some((start + column).min(text.len()))
}

/// The `format` a batchlab file declares (`batchlab-trace`,
/// `batchlab-policy`, `batchlab-layout`...), read from JSON (`"format":
/// "X"`) or YAML (`format: X`) text without parsing it: a file handed to the
/// wrong command is then named for what it is rather than failing on its
/// first character.
pub fn declared_format(text: &str) -> Option<String> {
    for line in text.lines().take(20) {
        let l = line.trim().trim_start_matches('{').trim();
        let rest = l
            .strip_prefix("\"format\"")
            .or_else(|| l.strip_prefix("format"))
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim);
        if let Some(r) = rest {
            let v = r.trim_end_matches(',').trim_matches(['"', '\'']);
            let v = v.split([',', '"']).next().unwrap_or(v).trim();
            if !v.is_empty() {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// serde_json's message for `err` in `text`, without its trailing " at line
/// L column C" (reported separately) and led by the field it is in.
pub fn json_message(err: &serde_json::Error, text: &str) -> String {
    let raw = err.to_string();
    let message = match raw.rfind(" at line ") {
        Some(i) if err.line() > 0 => &raw[..i],
        _ => raw.as_str(),
    };
    let path = json_path_at(text, err.line(), err.column());
    format!("{}{message}", prefix(path, message))
}

/// `field `path`: ` for a message, or nothing when the path is unknown or
/// the message already names it.
pub fn prefix(path: Option<String>, message: &str) -> String {
    match path {
        Some(p) => {
            let last = p.rsplit(['.', '[']).next().unwrap_or(&p);
            if message.contains(&format!("`{p}`")) || message.contains(&format!("`{last}`")) {
                String::new()
            } else {
                format!("field `{p}`: ")
            }
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        let t = "{\n  \"meta\": {\"hidden\": \"x\"},\n  \"nodes\": [[0, [1, \"y\"]]]\n}";
        assert_eq!(json_path_at(t, 2, 24).as_deref(), Some("meta.hidden"));
        let col = t.lines().nth(2).unwrap().find("\"y\"").unwrap() + 3;
        assert_eq!(json_path_at(t, 3, col).as_deref(), Some("nodes[0][1][1]"));
        assert_eq!(json_path_at("{}", 1, 1), None);
        // A string holding brackets and an escaped quote does not confuse it.
        let t = "{\"a\": \"[\\\"{\", \"b\": 1}";
        assert_eq!(json_path_at(t, 1, t.len() - 1).as_deref(), Some("b"));
    }

    /// A trace cut off inside a key was reported as field `nodes[9].` (an
    /// empty last key).
    #[test]
    fn a_key_cut_off_by_the_end_of_the_file_is_not_a_field() {
        let t = "{\"nodes\": [{\"a\": 1}, {\"type\": 0, \"ar";
        assert_eq!(json_path_at(t, 1, t.len()).as_deref(), Some("nodes[1]"));
        let t = "{\"nodes\": [{\"a\": 1}, {\"";
        assert_eq!(json_path_at(t, 1, t.len()).as_deref(), Some("nodes[1]"));
    }

    #[test]
    fn declared_formats() {
        assert_eq!(
            declared_format("format: batchlab-policy\nversion: 2\n").as_deref(),
            Some("batchlab-policy")
        );
        assert_eq!(
            declared_format("{\n  \"format\": \"batchlab-trace\",\n").as_deref(),
            Some("batchlab-trace")
        );
        assert_eq!(declared_format("[1, 2]"), None);
    }

    #[test]
    fn yaml_paths() {
        let t = "kind: replay\nrepeats: x\nquick:\n  batches: [1, y]\nexclude:\n  - { workloads: [a], hiddens: [z] }\n";
        assert_eq!(yaml_path_at(t, 2, 10).as_deref(), Some("repeats"));
        assert_eq!(yaml_path_at(t, 4, 16).as_deref(), Some("quick.batches"));
        assert_eq!(yaml_path_at(t, 6, 33).as_deref(), Some("exclude.hiddens"));
        // Regression (cells_fuzz): a column inside a multi-byte character.
        assert_eq!(yaml_path_at("{ é: x }", 1, 4).as_deref(), None);
        assert_eq!(prefix(Some("a.b".into()), "bad"), "field `a.b`: ");
        assert_eq!(prefix(Some("a".into()), "unknown field `a`"), "");
        assert_eq!(prefix(Some("fsm.b".into()), "unknown field `b`"), "");
        assert_eq!(prefix(None, "bad"), "");
    }
}
