//! `.ai-session-handler/config.json` (SPEC §4): strict keys and types, defaults for what is
//! absent, and messages that name the key to fix.

/// Effective config-file values. A missing file is `Config::default()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub agent_cmd: Option<String>,
    /// `None` runs to completion.
    pub max_phases: Option<u64>,
    /// `None` (explicit `null`) means no timeout; the default is 3600.
    pub timeout_seconds: Option<f64>,
    pub stop_on_regex: Vec<String>,
    pub idle_timeout_seconds: Option<f64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            agent_cmd: None,
            max_phases: None,
            timeout_seconds: Some(3600.0),
            stop_on_regex: Vec::new(),
            idle_timeout_seconds: None,
        }
    }
}

/// A config error; the message names the key (the caller prefixes the file path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The example config `init` writes.
pub const EXAMPLE_CONFIG: &str = "{\n  \"agent_cmd\": \"codex exec\",\n  \"max_phases\": null,\n  \"timeout_seconds\": 3600,\n  \"stop_on_regex\": []\n}\n";

/// Parses and validates config bytes.
pub fn parse_config(bytes: &[u8]) -> Result<Config, ConfigError> {
    let _ = bytes;
    todo!()
}

/// Parses a `--timeout` / `--idle-timeout` value: a finite number of seconds greater than 0.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let _ = text;
    todo!()
}
