//! Provider rate limits (issue 11): the `rate_limit` config object and the reset-time parser.
//!
//! Detection itself is not here: a `rate_limit.patterns` match is a stop cause and exit 75 an
//! exit status, both decided in [`crate::domain::decision`]; what happens next is decided in
//! [`crate::domain::retry`].

pub mod reset_time;
