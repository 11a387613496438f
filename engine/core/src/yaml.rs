//! YAML error reporting shared by every YAML file batchlab reads (cells,
//! policies, experiment specs): the location as numbers and a one-line message.

/// Line, column (1-based; 0 when unknown) and a one-line message of a serde-saphyr
/// error in `text`. The message names the field at the error's position
/// (`field `quick.repeats`: invalid u64`), drops the rendered source snippet
/// (multi-line, it repeats the file) and escapes control characters, which a
/// file could use to rewrite the terminal.
pub fn error_parts(err: &serde_saphyr::Error, text: &str) -> (u64, u64, String) {
    use serde_saphyr::MessageFormatter;
    let (line, column) = err
        .location()
        .map_or((0, 0), |loc| (loc.line(), loc.column()));
    let raw = serde_saphyr::DefaultMessageFormatter.format_message(err.without_snippet());
    let path = crate::fieldpath::yaml_path_at(text, line as usize, column as usize);
    let mut message = crate::fieldpath::prefix(path, &raw);
    for c in raw.chars() {
        if c.is_control() {
            message.extend(c.escape_default());
        } else {
            message.push(c);
        }
    }
    (line, column, message)
}
