use super::*;
use crate::lists::NoExact;
use crate::ordering::STATIC_ORDERS;

/// A small deterministic generator (the tests draw without a dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Int predicates a brute force can evaluate: `stream.slot >= or <= t`, or
/// `l - r >= or <= t` on two streams' slots (slot 0 is `ts`).
#[derive(Clone, Copy)]
enum Cond {
    Attr(u32, usize, bool, i64),
    Pair((u32, usize), (u32, usize), bool, i64),
}

fn holds(cond: Cond, value: impl Fn(u32, usize) -> i64) -> bool {
    let (v, lower, t) = match cond {
        Cond::Attr(s, slot, lower, t) => (value(s, slot), lower, t),
        Cond::Pair(l, r, lower, t) => (value(l.0, l.1) - value(r.0, r.1), lower, t),
    };
    if lower { v >= t } else { v <= t }
}

#[test]
fn sieved_retrieval_finds_what_brute_force_finds_with_many_windows_and_orders() {
    let mut rng = Lcg(7);
    let one = Factor { f: 1.0, int: Some(1) };
    // more distinct MAXWINDOWs than SLICES, so slices merge adjacent windows
    let windows = [20, 45, 75, 120, 200, 325, 500];
    let mut queries: Vec<(Vec<u32>, i64, Vec<Cond>)> = Vec::new();
    for _ in 0..60 {
        let streams: Vec<u32> = if rng.below(3) == 0 { vec![0, 1, 2] } else { vec![0, 1] };
        let window = windows[rng.below(windows.len() as u64) as usize];
        let mut conds = vec![Cond::Pair((0, 1), (1, 1), rng.below(2) == 0, rng.below(80) as i64 - 40)];
        if rng.below(2) == 0 {
            conds.push(Cond::Attr(1, 2, rng.below(2) == 0, rng.below(100) as i64));
        }
        if rng.below(3) == 0 {
            conds.push(Cond::Pair((1, 0), (0, 0), rng.below(2) == 0, rng.below(400) as i64 - 200));
        }
        if streams.len() == 3 {
            // the third stream joined by value, or linked by time only
            conds.push(if rng.below(2) == 0 {
                Cond::Pair((2, 2), (1, 2), rng.below(2) == 0, rng.below(60) as i64 - 30)
            } else {
                Cond::Pair((2, 0), (0, 0), rng.below(2) == 0, rng.below(600) as i64 - 300)
            });
        }
        queries.push((streams, window, conds));
    }
    let mut events = Vec::new();
    let mut ts = 0;
    for seq in 0..600u64 {
        ts += rng.below(20) as i64;
        let stream = rng.below(3) as u32;
        events.push((seq, stream, ts, rng.below(100) as i64, rng.below(100) as i64));
    }
    let value = |e: &(u64, u32, i64, i64, i64), slot: usize| [e.2, e.3, e.4][slot];
    let mut expected = Vec::new();
    for (q, (streams, window, conds)) in queries.iter().enumerate() {
        // every combination of the query's streams within its window
        let mut combos: Vec<Vec<&(u64, u32, i64, i64, i64)>> = vec![vec![]];
        for &s in streams {
            combos = combos
                .iter()
                .flat_map(|combo| {
                    events.iter().filter(move |e| e.1 == s).filter_map(move |e| {
                        let ts = combo.iter().map(|c| c.2).chain([e.2]);
                        (ts.clone().max().unwrap() - ts.min().unwrap() <= *window).then(|| [&combo[..], &[e]].concat())
                    })
                })
                .collect();
        }
        for combo in combos {
            if conds.iter().all(|&c| holds(c, |s, slot| value(combo[s as usize], slot))) {
                expected.push((q, combo.iter().map(|e| e.0).collect::<Vec<_>>()));
            }
        }
    }
    expected.sort();
    assert!(expected.len() > 100, "a test with results: {}", expected.len());
    // each query's own sieve, and MAXWINDOW slices only
    for (order, alone) in [(STATIC_ORDERS[0], ALONE), (STATIC_ORDERS[2], ALONE), (STATIC_ORDERS[5], ALONE),
                           (STATIC_ORDERS[0], 0), (STATIC_ORDERS[5], 0)] {
        let mut op = Operator::new(0, 0);
        op.alone = alone;
        op.types = TypeManager::new(Some(order), 128);
        for s in 0..3 {
            op.widen(s, 3);
        }
        let mut bits = Vec::new();
        for (k, (streams, window, conds)) in queries.iter().enumerate() {
            let preds = conds.iter().enumerate().map(|(i, &c)| {
                let id = (k * 8 + i) as u32;
                match c {
                    Cond::Attr(stream, slot, lower, t) => {
                        PredSpec::Range { id, stream, slot, lower, tf: t as f64, ti: t as i128 }
                    }
                    Cond::Pair(l, r, lower, t) => {
                        PredSpec::PairRange { id, l, r, lower, factor: one, tf: t as f64, ti: t as i128 }
                    }
                }
            });
            bits.push(op.register(QuerySpec { streams: streams.clone(), window: *window, preds: preds.collect() }));
        }
        let mut got = Vec::new();
        for &(seq, stream, ts, x, y) in &events {
            let incoming = Incoming { stream, key: "k", ts, shape: 0, row: vec![V::I(ts), V::I(x), V::I(y)], pos: (0, 0) };
            for hit in op.process(incoming, &mut NoExact).ok().unwrap() {
                got.push((bits.iter().position(|&b| b == hit.bit).unwrap(), hit.seqs));
            }
            assert_eq!(op.seq, seq + 1);
        }
        got.sort();
        assert_eq!(got, expected, "order {order:?} alone {alone}");
    }
}

#[test]
fn per_bit_runs_survive_rewrites_and_compaction() {
    let mut per = PerBit::default();
    let mut expected: Vec<Vec<u32>> = vec![Vec::new(); 40];
    let mut rng = Lcg(3);
    // enough rewrites that the arena is compacted many times
    for round in 0..2000 {
        let bit = rng.below(40) as usize;
        match round % 4 {
            0 => {
                let ks: Vec<u32> = (0..rng.below(5)).map(|_| rng.below(30) as u32).collect();
                per.put(bit, &ks);
                expected[bit] = ks;
            }
            1 | 2 => {
                let k = rng.below(30) as u32;
                per.add(bit, k as usize);
                if !expected[bit].contains(&k) {
                    expected[bit].push(k);
                }
            }
            _ => {
                per.put(bit, &[]);
                expected[bit].clear();
            }
        }
        assert!(per.items.len() <= 2 * per.live + 64);
    }
    for (bit, ks) in expected.iter().enumerate() {
        assert_eq!(per.of(bit), &ks[..], "bit {bit}");
    }
    assert_eq!(per.of(99), &[] as &[u32]);
}

/// Every node's list sets hold exactly each query's list indices, and each phase
/// finds its own lists among them.
fn assert_list_sets_agree(op: &Operator) {
    for node in &op.nodes {
        for bit in 0..op.next_bit {
            let mut of: Vec<usize> = node.checks_of.of(bit).iter().map(|&k| k as usize).collect();
            of.sort();
            let mut mask = vec![0; op.nw];
            set(&mut mask, bit, true);
            let mut sets = vec![0; node.check_sets.words];
            node.check_sets.union(&mask, &(0..op.nw), &node.checks_of, &mut sets);
            assert_eq!(bits(&sets).collect::<Vec<_>>(), of, "bit {bit}");
            for (phase, window) in [(Phase::W, true), (Phase::J, false)] {
                let listed: Vec<Check> = node.phase_checks(&sets, phase).copied().collect();
                let expected: Vec<Check> = of.iter().map(|&k| node.checks[k]).filter(|c| c.window == window).collect();
                assert_eq!(listed, expected, "bit {bit}");
            }
        }
    }
}

#[test]
fn list_sets_follow_lists_inserted_before_others_and_deregistration() {
    let mut op = Operator::new(0, 0);
    op.widen(0, 2);
    op.widen(1, 2);
    let one = Factor { f: 1.0, int: Some(1) };
    let pair = |id, l, r, t| PredSpec::PairRange { id, l, r, lower: true, factor: one, tf: t as f64, ti: t };
    // a window list first, then join lists inserted before it (its index moves)
    let specs = [vec![pair(0, (1, 0), (0, 0), -5)], vec![pair(1, (1, 1), (0, 1), 0), pair(2, (1, 0), (0, 0), -5)],
                 vec![pair(3, (0, 1), (1, 1), 2)]];
    let mut bits = Vec::new();
    for preds in specs {
        bits.push(op.register(QuerySpec { streams: vec![0, 1], window: 10, preds }));
        assert_list_sets_agree(&op);
    }
    op.deregister(bits[1]);
    assert_list_sets_agree(&op);
    assert!(op.process(event(0, 0, 1), &mut NoExact).ok().unwrap().is_empty());
    // B.ts - A.ts >= -5 holds; B.x - A.x >= 0 would too, but its query is gone;
    // A.x - B.x >= 2 fails
    let hits = op.process(event(1, 3, 4), &mut NoExact).ok().unwrap();
    assert_eq!(hits.iter().map(|h| h.bit).collect::<Vec<_>>(), vec![bits[0]]);
}

/// Hundreds of join queries sharing join, attribute and window lists (many
/// distinct constants and a few repeated by many queries) and hundreds of distinct
/// MAXWINDOWs, so masks are wide enough for blocks of several entries: queries
/// come (one at a time and in bulk) and go between events, and every result is
/// the brute force's: each combination within the query's window whose last event
/// arrived while it was registered.
#[test]
fn many_join_queries_coming_and_going_find_what_brute_force_finds() {
    let mut rng = Lcg(11);
    let one = Factor { f: 1.0, int: Some(1) };
    // the horizon covers every window from the start: no partner is dropped before
    // a wider query comes
    let mut op = Operator::new(3000, 0);
    op.types = TypeManager::new(Some(STATIC_ORDERS[0]), 128);
    for s in 0..2 {
        op.widen(s, 3);
    }
    let query = |rng: &mut Lcg| {
        let window = 10 + rng.below(300) as i64 * 10;
        let t = |rng: &mut Lcg, spread: u64| if rng.below(3) == 0 { 0 } else { rng.below(2 * spread) as i64 - spread as i64 };
        let mut conds = vec![Cond::Pair((0, 1), (1, 1), rng.below(2) == 0, t(rng, 40))];
        if rng.below(2) == 0 {
            conds.push(Cond::Attr(1, 2, rng.below(2) == 0, t(rng, 50) + 50));
        }
        if rng.below(3) == 0 {
            conds.push(Cond::Pair((1, 0), (0, 0), rng.below(2) == 0, t(rng, 200)));
        }
        // the same constant in the same list is one predicate, as Python ids them
        let preds = conds
            .iter()
            .map(|&c| match c {
                Cond::Attr(stream, slot, lower, t) => {
                    let id = 1_000_000 + (lower as u32) * 1000 + (t + 500) as u32;
                    PredSpec::Range { id, stream, slot, lower, tf: t as f64, ti: t as i128 }
                }
                Cond::Pair(l, r, lower, t) => {
                    let id = 2_000_000 + l.0 * 100_000 + (lower as u32) * 10_000 + (t + 5000) as u32;
                    PredSpec::PairRange { id, l, r, lower, factor: one, tf: t as f64, ti: t as i128 }
                }
            })
            .collect();
        (QuerySpec { streams: vec![0, 1], window, preds }, (window, conds))
    };
    // per query (in creation order): its window and conditions, and the arrival
    // numbers its results may end at
    let mut queries: Vec<((i64, Vec<Cond>), std::ops::Range<u64>)> = Vec::new();
    let mut live: Vec<(usize, usize)> = Vec::new(); // (bit, query)
    let mut events: Vec<(u64, u32, i64, i64, i64)> = Vec::new();
    let mut got: Vec<(usize, Vec<u64>)> = Vec::new();
    let (mut ts, mut seq) = (0, 0u64);
    for round in 0..300 {
        match rng.below(10) {
            0 | 1 => {
                // in bulk (hundreds at once every few rounds), or a few
                let n = if round % 10 == 0 { 300 } else { 1 + rng.below(3) as usize };
                let made: Vec<_> = (0..n).map(|_| query(&mut rng)).collect();
                let bits = if n == 1 {
                    vec![op.register(made[0].0.clone())]
                } else {
                    op.register_many(made.iter().map(|m| m.0.clone()).collect())
                };
                for (bit, (_, q)) in bits.into_iter().zip(made) {
                    live.push((bit, queries.len()));
                    queries.push((q, seq..u64::MAX));
                }
            }
            2 if !live.is_empty() => {
                // a query, or a third of them
                let gone: Vec<usize> = if rng.below(3) == 0 {
                    (0..live.len()).filter(|i| i % 3 == 0).collect()
                } else {
                    vec![rng.below(live.len() as u64) as usize]
                };
                for i in gone.into_iter().rev() {
                    let (bit, q) = live.remove(i);
                    op.deregister(bit);
                    queries[q].1.end = seq;
                }
            }
            _ => {
                ts += rng.below(25) as i64;
                let stream = rng.below(2) as u32;
                let (x, y) = (rng.below(100) as i64, rng.below(100) as i64);
                let incoming = Incoming { stream, key: "k", ts, shape: 0, row: vec![V::I(ts), V::I(x), V::I(y)], pos: (0, 0) };
                for hit in op.process(incoming, &mut NoExact).ok().unwrap() {
                    let q = live.iter().find(|(bit, _)| *bit == hit.bit).expect("a live query's result").1;
                    got.push((q, hit.seqs));
                }
                events.push((seq, stream, ts, x, y));
                seq += 1;
            }
        }
    }
    assert!(op.nw >= 16, "wide masks: {} words", op.nw);
    let value = |e: &(u64, u32, i64, i64, i64), slot: usize| [e.2, e.3, e.4][slot];
    let mut expected = Vec::new();
    for (q, ((window, conds), alive)) in queries.iter().enumerate() {
        for a in events.iter().filter(|e| e.1 == 0) {
            for b in events.iter().filter(|e| e.1 == 1) {
                let last = a.0.max(b.0);
                let fits = (a.2 - b.2).abs() <= *window && alive.contains(&last);
                let row = |s: u32| if s == 0 { a } else { b };
                if fits && conds.iter().all(|&c| holds(c, |s, slot| value(row(s), slot))) {
                    expected.push((q, vec![a.0, b.0]));
                }
            }
        }
    }
    got.sort();
    expected.sort();
    assert!(expected.len() > 1000, "a test with results: {}", expected.len());
    assert_eq!(got.len(), expected.len());
    assert!(got == expected);
}

fn event(stream: u32, ts: i64, x: i64) -> Incoming<'static> {
    Incoming { stream, key: "k", ts, shape: 0, row: vec![V::I(ts), V::I(x)], pos: (0, ts) }
}

#[test]
fn a_join_query_pairs_events_within_its_window_and_predicates() {
    let mut op = Operator::new(0, 0);
    op.widen(0, 2);
    op.widen(1, 2);
    // q: FROM A, B MAXWINDOW 10 WHERE A.x > 5 AND A.x < B.x  (A.x - B.x < 0)
    let q = QuerySpec {
        streams: vec![0, 1],
        window: 10,
        preds: vec![
            PredSpec::Range { id: 0, stream: 0, slot: 1, lower: true, tf: 5.000000000000001, ti: 6 },
            PredSpec::PairRange { id: 1, l: (0, 1), r: (1, 1), lower: false, factor: Factor { f: 1.0, int: Some(1) }, tf: 0.0, ti: -1 },
        ],
    };
    let bit = op.register(q);
    assert!(op.process(event(0, 0, 6), &mut NoExact).ok().unwrap().is_empty());
    assert!(op.process(event(0, 1, 4), &mut NoExact).ok().unwrap().is_empty());
    let hits = op.process(event(1, 5, 7), &mut NoExact).ok().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].bit, hits[0].seqs.clone()), (bit, vec![0, 2]));
    // too far from the A events
    assert!(op.process(event(1, 11, 9), &mut NoExact).ok().unwrap().is_empty());
    assert!(op.process(event(1, 0, 9), &mut NoExact).is_err());
    op.deregister(bit);
    assert!(op.process(event(0, 12, 8), &mut NoExact).ok().unwrap().is_empty());
}

/// Every partition of a worker registers the same queries: one builds them and the
/// others copy its registry. A copy must answer every event as registering the same
/// queries would have (the same bits, orders and results), with held events and
/// their cached attribute masks from before the copy, masks widening, and queries
/// going (each operator deregisters its own) in between.
#[test]
fn a_copied_registry_answers_as_registering_the_same_queries() {
    let mut rng = Lcg(5);
    let one = Factor { f: 1.0, int: Some(1) };
    let [mut builder, mut copier, mut plain] = [0, 1, 2].map(|_| {
        let mut op = Operator::new(500, 0);
        op.types = TypeManager::new(Some(STATIC_ORDERS[0]), 128);
        op
    });
    for op in [&mut copier, &mut plain] {
        op.widen(0, 3);
        op.widen(1, 3);
    }
    let mut bits: Vec<usize> = Vec::new();
    let (mut ts, mut results) = (0, 0);
    for round in 0..200 {
        // now and then many at once, which go in bulk
        match if round % 25 == 0 { 0 } else { rng.below(8) } {
            0 => {
                let n = if round % 25 == 0 { 150 } else { 1 + rng.below(3) as usize };
                let specs: Vec<QuerySpec> = (0..n)
                    .map(|_| {
                        let t = rng.below(100) as i64;
                        let mut preds = vec![PredSpec::Range { id: t as u32, stream: 0, slot: 1, lower: rng.below(2) == 0, tf: t as f64, ti: t as i128 }];
                        let streams = if rng.below(2) == 0 { vec![0] } else {
                            let d = rng.below(40) as i64 - 20;
                            preds.push(PredSpec::PairRange { id: (1000 + d) as u32, l: (0, 2), r: (1, 1), lower: true, factor: one, tf: d as f64, ti: d as i128 });
                            vec![0, 1]
                        };
                        QuerySpec { streams, window: 10 + rng.below(50) as i64, preds }
                    })
                    .collect();
                let built = builder.register_many(specs.clone());
                copier.copy_registry(&builder, &built);
                assert_eq!(plain.register_many(specs), built);
                bits.extend(built);
                assert_eq!(copier.horizon, plain.horizon);
            }
            1 if !bits.is_empty() => {
                let bit = bits.swap_remove(rng.below(bits.len() as u64) as usize);
                [&mut builder, &mut copier, &mut plain].into_iter().for_each(|op| op.deregister(bit));
            }
            _ => {
                ts += rng.below(10) as i64;
                let stream = rng.below(2) as u32;
                let row = vec![V::I(ts), V::I(rng.below(100) as i64), V::I(rng.below(100) as i64)];
                let answer = |op: &mut Operator| {
                    let incoming = Incoming { stream, key: "k", ts, shape: 0, row: row.clone(), pos: (0, 0) };
                    op.process(incoming, &mut NoExact).ok().unwrap().into_iter().map(|h| (h.bit, h.order, h.ts, h.seqs)).collect::<Vec<_>>()
                };
                let hits = answer(&mut plain);
                results += hits.len();
                assert_eq!(answer(&mut copier), hits, "round {round}");
            }
        }
    }
    assert!(results > 1000, "a test with results: {results}");
    assert!(plain.nw >= 4, "masks widened: {} words", plain.nw);
}
