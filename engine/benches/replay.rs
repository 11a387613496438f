//! Replay hot paths: the packed-weight GEMM against matrixmultiply on the
//! engine's own shapes, packing A alone, A packed against read in place, the
//! machine's FMA ceilings (`machine/*`), the vectorised transcendentals against libm, the
//! two-thread fork–join of a step (`team`: an empty step, a step of 20 µs
//! of work and a lattice trace's same-type DAG on one thread against two), and
//! whole steady-state runs of the executors (a session reused across
//! iterations, as `engine replay` measures). Figures in docs/benchmarks.md.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use engine::backend::cpu::gemm::{
    ASeg, COut, GemmScratch, Init, MR, PackedB, ReadA, gemm, gemm_read_a, pack_a,
};
use engine::backend::cpu::threads::{SharedMut, Threads};
use engine::backend::cpu::{ops, simd};
use engine::cells::CellLibrary;
use engine::device::DeviceKind;
use engine::executor::Executor;
use engine::model;
use engine::sched::{AgendaPolicy, SameTypeDag, TypewisePolicy};
use engine::session::Session;
use engine::trace::Level;
use engine::workloads::{self, DataChoice, RecordOptions};

/// `(M, N, K)`: tree-lstm's stacked gates at h512 (M = a big and a small
/// tree level), a lattice batch at h256, an unstacked gate, GEMV.
const SHAPES: [(usize, usize, usize); 5] = [
    (256, 2560, 1024),
    (8, 2560, 1024),
    (24, 1024, 512),
    (64, 256, 512),
    (1, 512, 1024),
];

/// One segment per buffer of `m` contiguous rows (a K-concatenated `A`).
fn segments(datas: &[Vec<f32>], m: usize) -> Vec<ASeg<'_>> {
    datas
        .iter()
        .map(|d| {
            let l = d.len() / m;
            ASeg::new(d, 0, l, l, m)
        })
        .collect()
}

fn gemm_shapes(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm");
    let threads = Threads::new(1);
    for (m, n, k) in SHAPES {
        let a = vec![0.5f32; m * k];
        let w: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 * 0.01).collect();
        let mut y = vec![0.0f32; m * n];
        let packed = PackedB::new(n, k, |i, p| w[i * k + p], None);
        let mut s = GemmScratch::default();
        g.throughput(Throughput::Elements((2 * m * n * k) as u64));
        let id = format!("m{m}_n{n}_k{k}");
        g.bench_function(BenchmarkId::new("packed", &id), |b| {
            b.iter(|| {
                let seg = [ASeg::new(&a, 0, k, k, m)];
                gemm(
                    &threads,
                    m,
                    &seg,
                    &packed,
                    COut::new(&mut y, 0, n, m, n),
                    Init::Overwrite,
                    &mut s,
                )
            })
        });
        g.bench_function(BenchmarkId::new("matrixmultiply", &id), |b| {
            // SAFETY: a is m×k, w is n×k read transposed, y is m×n.
            b.iter(|| unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    k as isize,
                    1,
                    w.as_ptr(),
                    1,
                    k as isize,
                    0.0,
                    y.as_mut_ptr(),
                    n as isize,
                    1,
                )
            })
        });
    }
    // Packing A alone (what every product does first): a lattice char cell
    // batch at h128 (x and h_prev, two segments) and tree-lstm's stacked
    // gates at h512 (four segments).
    for (m, lens) in [(24usize, vec![128usize, 128]), (256, vec![256; 4])] {
        let k: usize = lens.iter().sum();
        let datas: Vec<Vec<f32>> = lens.iter().map(|&l| vec![0.25f32; m * l]).collect();
        let mut out = vec![0.0f32; m.div_ceil(MR) * MR * k];
        g.throughput(Throughput::Elements((m * k) as u64));
        g.bench_function(format!("pack_a_m{m}_k{k}"), |b| {
            b.iter(|| {
                let segs = segments(&datas, m);
                pack_a(m, &segs, k, &mut out)
            })
        });
    }
    // A read in place against packed, on the small products of lattices and
    // h256 cells: a char cell's gate at h128 (x and h_prev, two segments,
    // N 128 and the stacked 256) and an h256 gate (K 512).
    for (m, n, lens) in [
        (24usize, 128usize, vec![128usize, 128]),
        (24, 256, vec![128, 128]),
        (40, 256, vec![256, 256]),
    ] {
        let k: usize = lens.iter().sum();
        let datas: Vec<Vec<f32>> = lens.iter().map(|&l| vec![0.25f32; m * l]).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 * 0.01).collect();
        let packed = PackedB::new(n, k, |i, p| w[i * k + p], None);
        let mut y = vec![0.0f32; m * n];
        let mut s = GemmScratch::default();
        g.throughput(Throughput::Elements((2 * m * n * k) as u64));
        for (name, read) in [("a_packed", ReadA::Packed), ("a_in_place", ReadA::InPlace)] {
            g.bench_function(BenchmarkId::new(name, format!("m{m}_n{n}_k{k}")), |b| {
                b.iter(|| {
                    let segs = segments(&datas, m);
                    gemm_read_a(
                        &threads,
                        m,
                        &segs,
                        &packed,
                        COut::new(&mut y, 0, n, m, n),
                        Init::Overwrite,
                        &mut s,
                        false,
                        read,
                    )
                })
            });
        }
    }
    // Products that cycle through nine distinct weights, as a lattice-lstm
    // h512 run does (18 MiB of weights: each call streams its weight from
    // L3 or memory, unlike the one warm weight above).
    for m in [24usize, 64, 256] {
        let (n, k, nw) = (512usize, 1024usize, 9usize);
        let ws: Vec<PackedB> = (0..nw)
            .map(|j| PackedB::new(n, k, |i, p| ((i * 7 + p * 3 + j) % 11) as f32 * 0.01, None))
            .collect();
        let a = vec![0.5f32; m * k];
        let mut y = vec![0.0f32; m * n];
        let mut s = GemmScratch::default();
        let mut next = 0;
        g.throughput(Throughput::Elements((2 * m * n * k) as u64));
        g.bench_function(
            BenchmarkId::new("packed_9_weights", format!("m{m}_n{n}_k{k}")),
            |b| {
                b.iter(|| {
                    next = (next + 1) % nw;
                    let seg = [ASeg::new(&a, 0, k, k, m)];
                    gemm(
                        &threads,
                        m,
                        &seg,
                        &ws[next],
                        COut::new(&mut y, 0, n, m, n),
                        Init::Overwrite,
                        &mut s,
                    )
                })
            },
        );
    }
    g.finish();
}

fn transcendentals(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise");
    let x: Vec<f32> = (0..4096).map(|i| (i as f32 - 2048.0) / 300.0).collect();
    let mut y = vec![0.0f32; x.len()];
    g.throughput(Throughput::Elements(x.len() as u64));
    g.bench_function("sigmoid/simd", |b| b.iter(|| simd::sigmoid(&x, &mut y)));
    g.bench_function("sigmoid/libm", |b| {
        b.iter(|| {
            for (o, &v) in y.iter_mut().zip(&x) {
                *o = 1.0 / (1.0 + (-v).exp());
            }
        })
    });
    g.bench_function("tanh/simd", |b| b.iter(|| simd::tanh(&x, &mut y)));
    g.bench_function("tanh/libm", |b| {
        b.iter(|| {
            for (o, &v) in y.iter_mut().zip(&x) {
                *o = v.tanh();
            }
        })
    });
    g.bench_function("exp/simd", |b| b.iter(|| simd::exp(&x, &mut y)));
    g.bench_function("exp/libm", |b| {
        b.iter(|| {
            for (o, &v) in y.iter_mut().zip(&x) {
                *o = v.exp();
            }
        })
    });
    g.finish();
    // A loss over a vocabulary: rows of 1000 class scores (lstm-nmt's
    // target words), the row's −log softmax at its label, against the
    // scalar loop it replaced (a running max, then one exp at a time).
    let mut g = c.benchmark_group("softmax_rows");
    let rows = 64;
    let x: Vec<f32> = (0..rows * 1000)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.1)
        .collect();
    g.throughput(Throughput::Elements(x.len() as u64));
    g.bench_function("pick_loss/simd", |b| {
        b.iter(|| {
            x.chunks_exact(1000)
                .map(|r| ops::pick_loss(r, 7))
                .sum::<f32>()
        })
    });
    g.bench_function("pick_loss/scalar", |b| {
        b.iter(|| {
            x.chunks_exact(1000)
                .map(|r| {
                    let max = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let sum: f32 = r.iter().map(|v| simd::exp1::<false>(v - max)).sum();
                    sum.ln() + max - r[7]
                })
                .sum::<f32>()
        })
    });
    g.finish();
}

/// The machine's ceilings for the GEMM figures (AVX2 + FMA): 12 independent
/// FMA chains on registers only (the FMA issue limit), and the `6 × 16`
/// sub-tile pattern of `gemm::avx2_sub` (two weight loads and six
/// broadcasts per 12 FMAs) over a packed panel resident in L1, which is what
/// any load-fed micro-kernel can reach. docs/benchmarks.md quotes both.
fn machine(c: &mut Criterion) {
    #[cfg(target_arch = "x86_64")]
    {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            eprintln!("machine/*: skipped, this CPU has no AVX2 + FMA");
            return;
        }
        let mut g = c.benchmark_group("machine");
        const STEPS: usize = 4096;
        g.throughput(Throughput::Elements((STEPS * 12 * 16) as u64));
        g.bench_function("fma_registers", |b| {
            // SAFETY: AVX2 and FMA were detected above.
            b.iter(|| unsafe { fma_registers(std::hint::black_box(STEPS)) })
        });
        // A 64-step panel: A 6 floats a step at stride 12 (3 KiB), weights
        // one 16-column half of a packed panel (16 contiguous floats a step,
        // 4 KiB): both stay in L1.
        let a: Vec<f32> = (0..64 * 12).map(|i| i as f32 * 1e-3).collect();
        let w = vec![1e-3f32; 64 * 16];
        g.bench_function("fma_loaded_6x16", |b| {
            // SAFETY: as above; the panels hold 64 steps.
            b.iter(|| unsafe { fma_loaded(std::hint::black_box(STEPS / 64), &a, &w) })
        });
        g.finish();
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = c;
        eprintln!("machine/*: skipped, not x86-64");
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_registers(steps: usize) -> f32 {
    use std::arch::x86_64::*;
    let b = _mm256_set1_ps(std::hint::black_box(0.999_9));
    let c = _mm256_set1_ps(std::hint::black_box(1e-8));
    // Distinct chains (equal ones could be computed once).
    let mut acc = [_mm256_setzero_ps(); 12];
    for (i, x) in acc.iter_mut().enumerate() {
        *x = _mm256_set1_ps(std::hint::black_box(1.0 + i as f32 * 1e-3));
    }
    for _ in 0..steps {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, b, c);
        }
    }
    let mut s = _mm256_setzero_ps();
    for x in acc {
        s = _mm256_add_ps(s, x);
    }
    _mm256_cvtss_f32(s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loaded(passes: usize, a: &[f32], w: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 2]; 6];
    let steps = a.len() / 12;
    assert!(w.len() >= steps * 16);
    for _ in 0..passes {
        let (mut ap, mut wp) = (a.as_ptr(), w.as_ptr());
        for _ in 0..steps {
            // SAFETY: `steps` steps of 12 (A) and 16 (W) floats, checked above.
            unsafe {
                let w0 = _mm256_loadu_ps(wp);
                let w1 = _mm256_loadu_ps(wp.add(8));
                for (i, row) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*ap.add(i));
                    row[0] = _mm256_fmadd_ps(x, w0, row[0]);
                    row[1] = _mm256_fmadd_ps(x, w1, row[1]);
                }
                ap = ap.add(12);
                wp = wp.add(16);
            }
        }
    }
    let mut s = _mm256_setzero_ps();
    for row in acc {
        s = _mm256_add_ps(s, _mm256_add_ps(row[0], row[1]));
    }
    _mm256_cvtss_f32(s)
}

fn executors(c: &mut Criterion) {
    let cells = CellLibrary::builtin().expect("built-in cells");
    let trace = workloads::record(
        &RecordOptions {
            workload: workloads::workload("tree-lstm").expect("tree-lstm"),
            data: DataChoice::Default,
            batch: 32,
            hidden: 64,
            level: Level::Cell,
            seed: 7,
        },
        &cells,
    )
    .expect("records");
    let model = model::model(&trace, &cells, 7).expect("model");
    let mut g = c.benchmark_group("replay_tree_lstm_b32_h64");
    g.sample_size(10);
    g.throughput(Throughput::Elements(32));
    let mut run = |name: &str, mut ex: Executor| {
        let mut s = Session::open(DeviceKind::Cpu, &trace, &model, &cells, &mut ex).expect("opens");
        g.bench_function(name, |b| b.iter(|| s.run().expect("runs")));
    };
    run("cavs", Executor::Cavs);
    run(
        "policy_typewise",
        Executor::Policy(Box::new(TypewisePolicy)),
    );
    run("dynet", Executor::Dynet(Box::new(AgendaPolicy::updated())));
    run("reference", Executor::Reference);
    g.finish();
}

fn team(c: &mut Criterion) {
    let mut g = c.benchmark_group("team");
    let two = Threads::new(2).with_min_flops(0);
    let one = Threads::new(1);
    g.bench_function("empty_step_2_threads", |b| {
        b.iter(|| {
            two.split(2, 2, |r| {
                std::hint::black_box(r);
            })
        })
    });
    // About 20 µs of elementwise work: a lattice batch's row step.
    let x: Vec<f32> = (0..64 * 1024).map(|i| (i % 97) as f32 * 0.01).collect();
    let mut y = vec![0.0f32; x.len()];
    let out = SharedMut(y.as_mut_ptr());
    let step = |th: &Threads| {
        th.split(64, th.count(), |rows| {
            let (lo, n) = (rows.start * 1024, rows.len() * 1024);
            // SAFETY: each part writes its own rows of `y`, which outlives
            // the step.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(lo), n) };
            simd::sigmoid(&x[lo..lo + n], dst);
        });
    };
    g.bench_function("sigmoid_64k_1_thread", |b| b.iter(|| step(&one)));
    g.bench_function("sigmoid_64k_2_threads", |b| b.iter(|| step(&two)));
    // The per-run same-type DAG as the CPU replay builds it for an FSM, on
    // one thread and with its searches split over the two-thread team:
    // lattice-lstm b128 (22k nodes) and bilstm-tagger b256 (28k nodes; its
    // loss cells, numbered after the chains, once made every search walk the
    // rest of its chain).
    let cells = CellLibrary::builtin().unwrap();
    let teamed = Threads::new(2);
    for (w, batch) in [("lattice-lstm", 128), ("bilstm-tagger", 256)] {
        let trace = workloads::record(
            &RecordOptions {
                workload: workloads::workload(w).unwrap(),
                data: DataChoice::Default,
                batch,
                hidden: 16,
                level: Level::Cell,
                seed: 101,
            },
            &cells,
        )
        .unwrap();
        let graph = &trace.graph;
        g.bench_function(format!("same_type_dag_{w}_b{batch}_1_thread"), |b| {
            b.iter(|| SameTypeDag::sequential(graph))
        });
        g.bench_function(format!("same_type_dag_{w}_b{batch}_2_threads"), |b| {
            b.iter(|| {
                SameTypeDag::with_parts(graph, 2, &|part| {
                    teamed.split(2, 2, |parts| parts.for_each(part));
                })
            })
        });
    }
    g.finish();
    std::hint::black_box(&y);
}

criterion_group!(
    benches,
    gemm_shapes,
    machine,
    transcendentals,
    team,
    executors
);
criterion_main!(benches);
