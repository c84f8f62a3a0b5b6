//! Provider rate limits: the `rate_limit` config object and, in [`reset_time`], the
//! parser that finds when a limit resets in an agent's output.
//!
//! Detection is not here: a `rate_limit.patterns` match is a stop cause and exit 75 an exit
//! status, both decided in [`crate::domain::decision`]; what happens next (switch template,
//! wait, retry, stop) is decided in [`crate::domain::retry::next_step`].
//!
//! `rate_limit` in `config.json` (every key optional):
//!
//! | Key | Type | Default | Meaning |
//! |---|---|---|---|
//! | `patterns` | list of regexes | `[]` | output that means "rate-limited" (Rust `regex` syntax, matched like stop regexes) |
//! | `max_waits` | integer ≥ 0 | 0 (waits off) | waits for a reset per phase per invocation; `--wait` makes 0 into [`WAIT_FLAG_MAX_WAITS`] |
//! | `default_wait_seconds` | finite > 0 | 300 | the wait when the output names no usable reset time |
//! | `max_wait_seconds` | finite > 0 | 21600 (6 h) | the cap on any one wait |
//! | `fallback_agent_cmds` | list of templates | `[]` | agent commands to switch to, in order, when the current one is rate-limited |

pub(crate) mod reset_time;

use regex::Regex;
use serde::Deserialize;

use super::config::rules::{ConfigError, Reason, integer_at_least, seconds};
use super::seconds::format_seconds;
use super::strict_json::present;
use super::template::CommandTemplate;

pub(crate) const DEFAULT_MAX_WAITS: u32 = 0;
/// `max_waits` under `--wait` when the config leaves waits off: three waits of up to
/// `max_wait_seconds` (6 h by default) cover a night of 5-hour usage windows.
pub(crate) const WAIT_FLAG_MAX_WAITS: u32 = 3;
pub(crate) const DEFAULT_WAIT_SECONDS: f64 = 300.0;
pub(crate) const DEFAULT_MAX_WAIT_SECONDS: f64 = 21_600.0;

/// `rate_limit` as written in the config file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimitConfig {
    #[serde(default, deserialize_with = "present")]
    patterns: Option<Vec<String>>,
    #[serde(default, deserialize_with = "integer_at_least::<_, 0>")]
    max_waits: Option<u32>,
    #[serde(default, deserialize_with = "seconds")]
    default_wait_seconds: Option<f64>,
    #[serde(default, deserialize_with = "seconds")]
    max_wait_seconds: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    fallback_agent_cmds: Option<Vec<String>>,
}

/// The effective `rate_limit` policy.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimitPolicy {
    /// Regexes (already checked to compile) that mark an attempt `rate-limited` when the output
    /// matches. Exit 75 marks it so without any pattern.
    pub patterns: Vec<String>,
    /// Waits for a rate-limit reset allowed per phase per invocation; 0 turns waits off.
    pub max_waits: u32,
    /// The wait when no usable reset time is found (finite, > 0).
    pub default_wait_seconds: f64,
    /// The cap on one wait, reset time or default (finite, > 0).
    pub max_wait_seconds: f64,
    /// Agent command templates (already checked to parse) tried in order after the primary
    /// one (`agent_cmd` or `--agent-cmd`); template index `i + 1` is `fallback_agent_cmds[i]`.
    pub fallback_agent_cmds: Vec<String>,
}

impl Default for RateLimitPolicy {
    fn default() -> Self {
        Self {
            patterns: Vec::new(),
            max_waits: DEFAULT_MAX_WAITS,
            default_wait_seconds: DEFAULT_WAIT_SECONDS,
            max_wait_seconds: DEFAULT_MAX_WAIT_SECONDS,
            fallback_agent_cmds: Vec::new(),
        }
    }
}

impl RateLimitPolicy {
    /// True when a rate-limited attempt may be followed by a wait.
    pub fn waits_enabled(&self) -> bool {
        self.max_waits > 0
    }

    /// `--wait`: turns waits on, with [`WAIT_FLAG_MAX_WAITS`] unless the config already
    /// allows some.
    pub fn with_waits(self) -> Self {
        Self {
            max_waits: if self.max_waits == 0 {
                WAIT_FLAG_MAX_WAITS
            } else {
                self.max_waits
            },
            ..self
        }
    }

    /// The number of agent templates: the primary one plus the fallbacks.
    pub fn template_count(&self) -> usize {
        self.fallback_agent_cmds.len().saturating_add(1)
    }

    /// The fallback templates, parsed. The config reader already checked that they parse; the
    /// error (naming `rate_limit.fallback_agent_cmds[i]`) is for callers that build a policy
    /// some other way.
    pub fn fallback_templates(&self) -> Result<Vec<CommandTemplate>, ConfigError> {
        self.fallback_agent_cmds
            .iter()
            .enumerate()
            .map(|(index, raw)| {
                CommandTemplate::parse(raw).map_err(|error| ConfigError::Invalid {
                    key: format!("rate_limit.fallback_agent_cmds[{index}]"),
                    reason: Reason::Template(error),
                })
            })
            .collect()
    }

    /// The policy in words for `check` (which labels it `rate_limit:`): `2 patterns and exit
    /// 75; waits off; 1 fallback agent command`, or with waits on `… up to 3 waits of 300 s by
    /// default, at most 21600 s each …`.
    pub fn describe(&self) -> String {
        let waits = if self.waits_enabled() {
            format!(
                "up to {} wait{} of {} s by default, at most {} s each",
                self.max_waits,
                plural(self.max_waits as usize),
                format_seconds(self.default_wait_seconds),
                format_seconds(self.max_wait_seconds)
            )
        } else {
            "waits off".to_owned()
        };
        format!(
            "{} pattern{} and exit 75; {waits}; {} fallback agent command{}",
            self.patterns.len(),
            plural(self.patterns.len()),
            self.fallback_agent_cmds.len(),
            plural(self.fallback_agent_cmds.len())
        )
    }

    /// The policy the config's `rate_limit` object sets.
    pub(crate) fn from_config(config: RateLimitConfig) -> Result<Self, ConfigError> {
        let patterns = config.patterns.unwrap_or_default();
        for (index, pattern) in patterns.iter().enumerate() {
            // Compiled here only to report a bad pattern up front, in the words used for
            // stop regexes; the runner compiles them again for scanning.
            if let Err(error) = Regex::new(pattern) {
                return Err(ConfigError::Invalid {
                    key: format!("rate_limit.patterns[{index}]"),
                    reason: Reason::RateLimitRegex {
                        pattern: pattern.clone(),
                        error,
                    },
                });
            }
        }
        let policy = Self {
            patterns,
            max_waits: config.max_waits.unwrap_or(DEFAULT_MAX_WAITS),
            default_wait_seconds: config.default_wait_seconds.unwrap_or(DEFAULT_WAIT_SECONDS),
            max_wait_seconds: config.max_wait_seconds.unwrap_or(DEFAULT_MAX_WAIT_SECONDS),
            fallback_agent_cmds: config.fallback_agent_cmds.unwrap_or_default(),
        };
        policy.fallback_templates()?;
        Ok(policy)
    }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests;
