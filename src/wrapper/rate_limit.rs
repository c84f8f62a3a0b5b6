//! Recognising a session-ending provider failure that is a rate limit, usage limit or
//! overload, reported by exiting `EX_TEMPFAIL` (docs/providers.md, "Rate limits: exit 75").

use std::sync::LazyLock;

use regex::Regex;

const TEMPORARY_STATUSES: [u16; 2] = [429, 529];

/// The providers' wording for limits and overload.
static LIMIT_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)usage[ _-]?limit|rate[ _-]?limit|hit your (?:\S+ )?limit|\b(?:\d+-hour|hourly|daily|weekly|session) limit|too many requests|overloaded|resource[ _]exhausted",
    )
    .expect("valid regex")
});

/// An HTTP status quoted in an error message: `API Error: 529 …`, `Request rejected (429)`,
/// `last status: 429 Too Many Requests`, `unexpected status 529`.
static QUOTED_STATUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:api error:|status:?|\()\s*(\d{3})\b").expect("valid regex")
});

pub fn quoted_status(message: &str) -> Option<u16> {
    QUOTED_STATUS
        .captures(message)
        .and_then(|captures| captures[1].parse().ok())
}

/// Whether a session-ending failure with this API status (when known) and message is a rate
/// limit, usage limit or overload.
pub fn is_temporary(status: Option<u16>, message: &str) -> bool {
    let status = status.or_else(|| quoted_status(message));
    status.is_some_and(|status| TEMPORARY_STATUSES.contains(&status))
        || LIMIT_WORDS.is_match(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_messages_are_classified() {
        let temporary = [
            (
                Some(429),
                "API Error: Request rejected (429) · Number of requests has exceeded your rate limit",
            ),
            (
                Some(529),
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary",
            ),
            (
                None,
                "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}",
            ),
            (None, "Claude AI usage limit reached|1750000000"),
            (None, "5-hour limit reached ∙ resets 3pm"),
            (None, "Weekly limit reached ∙ resets Mon 9am"),
            (None, "You've hit your limit · resets 3pm (Europe/Berlin)"),
            (
                None,
                "exceeded retry limit, last status: 429 Too Many Requests",
            ),
            (
                None,
                "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 1:04 PM.",
            ),
            (
                None,
                "Rate limit reached for gpt-5 in organization org-x on tokens per min. Please try again in 20s.",
            ),
            (
                None,
                "unexpected status 529 <unknown status code>: server_is_overloaded",
            ),
            (None, "429 RESOURCE_EXHAUSTED: Quota exceeded, retry in 35s"),
        ];
        for (status, message) in temporary {
            assert!(is_temporary(status, message), "{message}");
        }
        let permanent = [
            (Some(401), "Invalid API key · Fix external API key"),
            (
                Some(500),
                "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment.",
            ),
            (None, "unexpected status 401 Unauthorized: invalid_api_key"),
            (
                None,
                "We’re currently experiencing high demand, which may cause temporary errors.",
            ),
            (None, "Prompt is too long"),
            (
                None,
                "Context limit reached · /compact or /clear to continue",
            ),
            (None, "spend limit reached — contact your admin"),
            (
                None,
                "stream disconnected before completion: error sending request",
            ),
        ];
        for (status, message) in permanent {
            assert!(!is_temporary(status, message), "{message}");
        }
    }

    #[test]
    fn statuses_are_read_from_messages() {
        assert_eq!(quoted_status("API Error: 529 Overloaded"), Some(529));
        assert_eq!(quoted_status("Request rejected (429) · x"), Some(429));
        assert_eq!(
            quoted_status("last status: 429 Too Many Requests"),
            Some(429)
        );
        assert_eq!(
            quoted_status("unexpected status 401 Unauthorized"),
            Some(401)
        );
        assert_eq!(quoted_status("ran 429 tests"), None);
    }
}
