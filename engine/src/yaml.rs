//! YAML error reporting shared by every YAML file batchlab reads (cells,
//! policies, experiment specs): the location as numbers and a one-line message.

/// Line, column (1-based; 0 when unknown) and a one-line message of a serde-saphyr
/// error. The message drops the rendered source snippet (multi-line, it repeats
/// the file) and escapes control characters, which a file could use to rewrite
/// the terminal.
pub fn error_parts(err: &serde_saphyr::Error) -> (u64, u64, String) {
    use serde_saphyr::MessageFormatter;
    let (line, column) = err
        .location()
        .map_or((0, 0), |loc| (loc.line(), loc.column()));
    let raw = serde_saphyr::DefaultMessageFormatter.format_message(err.without_snippet());
    let mut message = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c.is_control() {
            message.extend(c.escape_default());
        } else {
            message.push(c);
        }
    }
    (line, column, message)
}
