//! Seconds as the command line reads them and as messages print them. Its own module because
//! the config readers and the messages of decisions, liveness, hooks and reports share it.

/// Parses a `--timeout`/`--idle-timeout` value (a clap value parser); surrounding whitespace
/// is accepted, as Python's `float()` did.
pub(crate) fn parse_seconds(text: &str) -> Result<f64, InvalidSeconds> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if is_valid_duration(seconds) => Ok(seconds),
        _ => Err(InvalidSeconds(text.to_owned())),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a finite number of seconds greater than 0, got '{0}'")]
pub(crate) struct InvalidSeconds(pub String);

/// A duration the runner can wait for: finite and greater than 0 (the rule of the flags and
/// of the config's `*_seconds` keys alike).
pub(crate) fn is_valid_duration(seconds: f64) -> bool {
    seconds.is_finite() && seconds > 0.0
}

/// Renders seconds as Python's `format(seconds, "g")` does, as the timeout message is part of
/// the contract: six significant digits, no trailing zeros, scientific notation below 1e-4
/// and from 1e6 on (`1`, `0.1`, `2.5`, `3600`, `1e+06`, `1e-05`).
pub(crate) fn format_seconds(seconds: f64) -> String {
    const SIGNIFICANT_DIGITS: i32 = 6;
    if seconds.is_nan() {
        return "nan".to_owned();
    }
    if seconds.is_infinite() {
        return if seconds > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rounding to six significant digits decides the exponent (999999.5 becomes 1e+06), so
    // take it from the rounded scientific rendering rather than from log10.
    let scientific = format!("{:.*e}", (SIGNIFICANT_DIGITS - 1) as usize, seconds);
    let Some((mantissa, exponent)) = scientific
        .split_once('e')
        .and_then(|(mantissa, exponent)| Some((mantissa, exponent.parse::<i32>().ok()?)))
    else {
        // `{:e}` always writes `<mantissa>e<exponent>`; keep a rendering rather than panic.
        return seconds.to_string();
    };
    if (-4..SIGNIFICANT_DIGITS).contains(&exponent) {
        let decimals = (SIGNIFICANT_DIGITS - 1 - exponent) as usize;
        without_trailing_zeros(&format!("{seconds:.decimals$}")).to_owned()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            without_trailing_zeros(mantissa),
            exponent.unsigned_abs()
        )
    }
}

/// `seconds` rounded to tenths, as [`format_seconds`] renders them: `2.5`, `12`.
pub(crate) fn format_tenths(seconds: f64) -> String {
    format_seconds((seconds * 10.0).round() / 10.0)
}

/// `2.500` → `2.5`, `3600.0` → `3600`; text without a decimal point is left alone.
fn without_trailing_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_seconds_accepts_finite_positive_numbers() {
        assert_eq!(parse_seconds("1"), Ok(1.0));
        assert_eq!(parse_seconds("0.1"), Ok(0.1));
        assert_eq!(parse_seconds("1e3"), Ok(1000.0));
        assert_eq!(parse_seconds(" 2.5 "), Ok(2.5));
        for bad in [
            "0", "-1", "nan", "NaN", "inf", "-inf", "", "ten", "1_000", "0x10",
        ] {
            assert_eq!(
                parse_seconds(bad).map_err(|error| error.to_string()),
                Err(format!(
                    "expected a finite number of seconds greater than 0, got '{bad}'"
                )),
                "{bad}"
            );
        }
    }

    #[test]
    fn format_seconds_matches_python_g() {
        let cases = [
            (1.0, "1"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (3600.0, "3600"),
            (0.25, "0.25"),
            (100.0, "100"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (1e6, "1e+06"),
            (999999.4, "999999"),
            (999999.5, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (1.0 / 3.0, "0.333333"),
            (0.0, "0"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(format_seconds(seconds), expected, "{seconds:?}");
        }
    }

    proptest! {
        #[test]
        fn parse_seconds_never_panics_and_only_accepts_valid_durations(text in ".{0,12}") {
            if let Ok(seconds) = parse_seconds(&text) {
                prop_assert!(seconds.is_finite() && seconds > 0.0);
            }
        }

        #[test]
        fn format_seconds_round_trips_to_six_significant_digits(seconds in 1e-9f64..1e12) {
            let text = format_seconds(seconds);
            let reparsed: f64 = text.parse().unwrap();
            prop_assert!(((reparsed - seconds) / seconds).abs() <= 5e-6, "{} -> {}", seconds, text);
        }
    }
}
