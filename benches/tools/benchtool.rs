//! Helper for benches/run.sh, compiled once by the script with `rustc -O` (std only, so it
//! needs nothing but the toolchain). Subcommands:
//!
//! - `gen BYTES SEED [plain]`: a fast worker. Writes BYTES of agent-like text, lines of 1..200 bytes
//!   with the occasional 64 KiB line, alternately to stdout and stderr (each through a 64 KiB
//!   buffer, so the streams interleave in bursts like a busy agent's), deterministic for a
//!   seed, then `<phase-complete>ok</phase-complete>` on stdout. The text contains no result
//!   tag, no code fence, and nothing the benchmark's stop regexes match. About one word in
//!   four contains a `<` (markup, generics, comparisons); `plain` leaves those words out.
//! - `durable-replace DIR COUNT`: times COUNT durable replacements of a 4 KiB file the way the
//!   handler replaces `state.json` (write temp, fsync, rename, fsync dir); prints the median
//!   and 90th percentile in milliseconds.
//! - `log-span LOG FROM TO`: in a `--log-format json` log, milliseconds between the first
//!   event whose message is FROM and the first later event whose message is TO.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["gen", bytes, seed] => generate(parse(bytes), parse(seed), WORDS),
        ["gen", bytes, seed, "plain"] => {
            // WORDS without the ones containing `<`, in the same order.
            let plain: Vec<&str> = WORDS.iter().copied().filter(|word| !word.contains('<')).collect();
            generate(parse(bytes), parse(seed), &plain)
        }
        ["durable-replace", dir, count] => durable_replace(dir, parse(count) as usize),
        ["log-span", log, from, to] => log_span(log, from, to),
        _ => Err(io::Error::other(
            "usage: benchtool gen BYTES SEED [plain] | durable-replace DIR COUNT | log-span LOG FROM TO",
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe is the reader's decision, not a generator failure worth a message.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(141),
        Err(error) => {
            eprintln!("benchtool: {error}");
            ExitCode::from(2)
        }
    }
}

fn parse(text: &str) -> u64 {
    text.parse().unwrap_or_else(|_| {
        eprintln!("benchtool: not a number: {text}");
        std::process::exit(2)
    })
}

/// xorshift64*, seeded: the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

const WORDS: &[&str] = &[
    "compiling",
    "src/domain/plan.rs",
    "warning:",
    "error[E0308]:",
    "test",
    "ok",
    "running",
    "<div class=\"x\">",
    "</div>",
    "<p>",
    "a < b",
    "Vec<u8>",
    "→",
    "écrit",
    "0x7fff",
    "FATAL",
    "panicked",
    "memory",
];

fn generate(total: u64, seed: u64, words: &[&str]) -> io::Result<()> {
    let mut rng = Rng(seed.max(1));
    // Lines are slices of one pool of words (no newline in it), so producing them is a copy
    // and the generator stays much faster than what it feeds.
    let mut pool = Vec::with_capacity(POOL_LEN + 64);
    while pool.len() < POOL_LEN {
        pool.extend_from_slice(words[rng.below(words.len() as u64) as usize].as_bytes());
        pool.push(b' ');
    }
    let mut streams: [Box<dyn Write>; 2] = [
        Box::new(BufWriter::with_capacity(64 << 10, io::stdout().lock())),
        Box::new(BufWriter::with_capacity(64 << 10, io::stderr().lock())),
    ];
    let mut written = 0u64;
    let mut stream = 0;
    while written < total {
        let length = if rng.below(1000) == 0 {
            64 << 10
        } else {
            1 + rng.below(200) as usize
        };
        let length = (length as u64).min(total - written) as usize;
        let start = rng.below((pool.len() - length) as u64) as usize;
        let out = &mut streams[stream];
        out.write_all(&pool[start..start + length - 1])?;
        out.write_all(b"\n")?;
        written += length as u64;
        stream ^= 1;
    }
    streams[1].flush()?;
    streams[0].write_all(b"<phase-complete>ok</phase-complete>\n")?;
    streams[0].flush()
}

const POOL_LEN: usize = 4 << 20;

fn durable_replace(dir: &str, count: usize) -> io::Result<()> {
    let target = format!("{dir}/durable-target.json");
    let temp = format!("{dir}/.durable-target.json.tmp");
    let payload = vec![b'x'; 4096];
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        file.write_all(&payload)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, &target)?;
        File::open(dir)?.sync_all()?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    fs::remove_file(&target)?;
    samples.sort_by(f64::total_cmp);
    let at = |fraction: f64| samples[((samples.len() - 1) as f64 * fraction).round() as usize];
    println!("{:.3} {:.3}", at(0.5), at(0.9));
    Ok(())
}

fn log_span(log: &str, from: &str, to: &str) -> io::Result<()> {
    let mut start = None;
    for line in BufReader::new(File::open(log)?).lines() {
        let line = line?;
        let Some(at) = timestamp_seconds(&line) else {
            continue;
        };
        match start {
            None if has_message(&line, from) => start = Some(at),
            Some(began) if has_message(&line, to) => {
                println!("{:.3}", (at - began) * 1e3);
                return Ok(());
            }
            _ => {}
        }
    }
    Err(io::Error::other(format!(
        "{log}: no '{from}' event followed by '{to}'"
    )))
}

fn has_message(line: &str, message: &str) -> bool {
    line.contains(&format!("\"message\":\"{message}\""))
}

/// Seconds since midnight of `"timestamp":"YYYY-MM-DDTHH:MM:SS.ffffffZ"` (the spans measured
/// here last milliseconds, so the day is irrelevant).
fn timestamp_seconds(line: &str) -> Option<f64> {
    let rest = line.split("\"timestamp\":\"").nth(1)?;
    let time = rest.get(11..)?.split(['Z', '+', '"']).next()?;
    let mut parts = time.split(':');
    let hours: f64 = parts.next()?.parse().ok()?;
    let minutes: f64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    Some(hours * 3600.0 + minutes * 60.0 + seconds)
}
