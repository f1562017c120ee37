//! The gate's criterion bench: `single/allowed/admit_settle` on the fixture of the
//! admission bench (`benches/fixture.rs`), the same engine shape and call, so that the
//! gate's median and docs/PERFORMANCE.md's are one measurement.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "../fixture.rs"]
mod fixture;
use fixture::{admit_settle, call, fixture};

fn single_thread(c: &mut Criterion) {
    let f = fixture(100, 10);
    let allowed = call(&f, 0, 1);
    let mut g = c.benchmark_group("single");
    g.bench_function("allowed/admit_settle", |b| b.iter(|| admit_settle(&f.engine, black_box(&allowed))));
    g.finish();
}

criterion_group!(benches, single_thread);
criterion_main!(benches);
