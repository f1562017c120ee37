//! The naive store design, as the baseline of `.ci/store-bench`: every call is one
//! `UPDATE … SET spent = spent + $amount WHERE id = $id AND spent + $amount <= limit`
//! against PostgreSQL (a round trip and a row lock per call, no leases). `THREADS` threads,
//! each with its own connection, hammer one row for `SECONDS` seconds; prints JSON
//! `{"threads","calls","allowed","calls_per_sec_per_thread"}`.
//!
//! `cargo run --release --example naive_pg -- postgres://USER@HOST:PORT/DB THREADS SECONDS`

use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("usage: naive_pg URL THREADS SECONDS")?;
    let threads: u64 = args.next().ok_or("THREADS")?.parse()?;
    let seconds: f64 = args.next().ok_or("SECONDS")?.parse()?;
    let mut admin = postgres::Client::connect(&url, postgres::NoTls)?;
    admin.batch_execute(
        "DROP TABLE IF EXISTS holon_naive;
         CREATE TABLE holon_naive (id TEXT PRIMARY KEY, spent BIGINT NOT NULL, lim BIGINT NOT NULL);
         INSERT INTO holon_naive VALUES ('m0', 0, 9000000000000000);",
    )?;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || -> Result<(u64, u64), postgres::Error> {
                let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
                let update = client
                    .prepare("UPDATE holon_naive SET spent = spent + $1 WHERE id = 'm0' AND spent + $1 <= lim")?;
                let (mut calls, mut allowed) = (0u64, 0u64);
                while Instant::now() < deadline {
                    // One call's worst case (the synthetic leaf's 920 micro-units).
                    allowed += client.execute(&update, &[&920i64])?;
                    calls += 1;
                }
                Ok((calls, allowed))
            })
        })
        .collect();
    let (mut calls, mut allowed) = (0u64, 0u64);
    for h in handles {
        let (c, a) = h.join().map_err(|_| "a thread panicked")??;
        calls += c;
        allowed += a;
    }
    #[allow(clippy::cast_precision_loss)]
    let per_thread = calls as f64 / seconds / threads as f64;
    println!(
        "{{\"threads\":{threads},\"calls\":{calls},\"allowed\":{allowed},\"calls_per_sec_per_thread\":{per_thread:.0}}}"
    );
    Ok(())
}
