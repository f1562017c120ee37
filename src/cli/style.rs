//! Terminal styling: colour only on a terminal, never with `NO_COLOR` or `--no-color`.

use std::io::IsTerminal;

#[derive(Debug, Clone, Copy)]
pub(super) struct Style {
    pub color: bool,
}

impl Style {
    pub(super) fn detect(no_color_flag: bool) -> Self {
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style { color: !no_color_flag && !no_color_env && std::io::stdout().is_terminal() }
    }
    /// Whether standard error (a log) may be coloured: only on a terminal, never with
    /// `NO_COLOR` or `--no-color`.
    pub(super) fn stderr_color(no_color_flag: bool) -> bool {
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        !no_color_flag && !no_color_env && std::io::stderr().is_terminal()
    }
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }
    pub(super) fn good(&self, text: &str) -> String {
        self.paint("32", text)
    }
    pub(super) fn bad(&self, text: &str) -> String {
        self.paint("31", text)
    }
    pub(super) fn warn(&self, text: &str) -> String {
        self.paint("33", text)
    }
    pub(super) fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    pub(super) fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
}
