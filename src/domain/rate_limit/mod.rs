//! The `rate_limit` config object (docs/unattended-runs.md, "`rate_limit`") and, in
//! [`reset_time`], finding when a limit resets in an agent's output. Detecting a rate limit is
//! [`crate::domain::decision`]'s; what follows it is [`crate::domain::retry::next_step`]'s.

pub(crate) mod reset_time;

use regex::Regex;
use serde::Deserialize;

use super::config::rules::{ConfigError, Reason, integer_at_least, seconds};
use super::seconds::format_seconds;
use super::strict_json::present;
use super::template::CommandTemplate;
use crate::units::count;

pub(crate) const DEFAULT_MAX_WAITS: u32 = 0;
/// `max_waits` under `--wait` when the config leaves waits off: three waits of up to 6 h
/// cover a night of 5-hour usage windows.
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

/// The effective `rate_limit` policy. Patterns are already checked to compile and fallback
/// commands to parse; template index `i + 1` is `fallback_agent_cmds[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimitPolicy {
    pub patterns: Vec<String>,
    /// Per phase per invocation; 0 turns waits off.
    pub max_waits: u32,
    pub default_wait_seconds: f64,
    pub max_wait_seconds: f64,
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

    /// The fallback templates, parsed (the error names `rate_limit.fallback_agent_cmds[i]`).
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

    /// For `check`: `2 patterns and exit 75; waits off; 1 fallback agent command`.
    pub fn describe(&self) -> String {
        let waits = if self.waits_enabled() {
            format!(
                "up to {} of {} s by default, at most {} s each",
                count(self.max_waits as usize, "wait"),
                format_seconds(self.default_wait_seconds),
                format_seconds(self.max_wait_seconds)
            )
        } else {
            "waits off".to_owned()
        };
        format!(
            "{} and exit 75; {waits}; {}",
            count(self.patterns.len(), "pattern"),
            count(self.fallback_agent_cmds.len(), "fallback agent command")
        )
    }

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

#[cfg(test)]
mod tests;
