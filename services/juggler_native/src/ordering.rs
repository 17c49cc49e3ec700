//! The predicate type manager (thesis 3.4.2): measured selectivity decides the order
//! in which the operator applies the three predicate types.
//!
//! An order is a permutation of A (attribute), J (join), W (window). Its meaning:
//!
//! - A first: the arriving tuple's attribute mask prunes the queries before any
//!   partner is retrieved; otherwise the tuple's attribute check joins the A phase of
//!   each first partner (and is applied before a single-stream result is emitted).
//! - J before W: partners are retrieved through the JES (value-index probes, when
//!   they visit fewer events than the time range holds); W before J: through the WES
//!   time range only.
//! - Each retrieved partner then runs the phases A, W, J in the order's order.
//!
//! Selectivity is measured the same way whatever the current order, on one tuple in
//! `sample_every`, for each partner stream the tuple expands into (the first level of
//! the plan: deeper levels follow the same order). Every `period` events the decayed
//! measurements feed the cost model and the cheapest order wins, with hysteresis so
//! noise does not flip it.
//!
//! The cost model is a simplification of the thesis's (chapter 5.1): per sampled
//! tuple, the comparisons of retrieval (index probes plus the entries they visit) plus,
//! for each candidate retrieved, the list probes of each phase reached (a phase is
//! reached with the product of the earlier phases' pass rates). Pass rates are
//! measured on a few candidates of the time range; candidates a JES probe found
//! already satisfy the probed join list's loosest constant, so the join pass rate
//! among them is scaled up by how much narrower the probe was (clamped to 1).

/// A predicate type: an index into per-type counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    A = 0,
    J = 1,
    W = 2,
}

pub type Order = [Phase; 3];

use Phase::{A, J, W};

/// The six static orders, in the name order Python reports them.
pub const STATIC_ORDERS: [Order; 6] = [[A, J, W], [A, W, J], [J, A, W], [J, W, A], [W, A, J], [W, J, A]];

pub fn name(order: Order) -> String {
    order.iter().map(|p| ["A", "J", "W"][*p as usize]).collect()
}

/// "adaptive" (None) or a static order such as "AJW".
pub fn parse(setting: &str) -> Result<Option<Order>, String> {
    if setting == "adaptive" {
        return Ok(None);
    }
    STATIC_ORDERS
        .iter()
        .find(|o| name(**o) == setting.to_ascii_uppercase())
        .map(|o| Some(*o))
        .ok_or_else(|| format!("order must be 'adaptive' or a permutation of AJW, got {setting:?}"))
}

/// True when the J phase comes before W: retrieval through the JES.
pub fn join_first(order: Order) -> bool {
    order.iter().position(|&p| p == J) < order.iter().position(|&p| p == W)
}

/// What one partner stream of a sampled tuple would cost, for one set of candidate
/// queries: all of them (the tuple's attributes deferred) or those the tuple's
/// attributes leave (A first).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Expansion {
    /// Time-range probes (none when the time range is empty: nothing is retrieved in
    /// any order) and the events they return (what W-first retrieval visits).
    pub scans: f64,
    pub in_range: f64,
    /// Index probes and entries J-first retrieval makes and visits (the WES range when
    /// no JES probe serves), and the candidates inside the time range it returns.
    pub join_probes: f64,
    pub join_visits: f64,
    pub join_found: f64,
    /// Lists a candidate is probed against, window and join, times `in_range`: the
    /// sums then average the lists per candidate.
    pub window_lists: f64,
    pub join_lists: f64,
    /// Sampled candidates and how many passed each phase on its own (A, J, W).
    pub sampled: f64,
    pub passed: [f64; 3],
}

impl Expansion {
    fn add(&mut self, other: &Expansion) {
        self.scans += other.scans;
        self.in_range += other.in_range;
        self.join_probes += other.join_probes;
        self.join_visits += other.join_visits;
        self.join_found += other.join_found;
        self.window_lists += other.window_lists;
        self.join_lists += other.join_lists;
        self.sampled += other.sampled;
        for k in 0..3 {
            self.passed[k] += other.passed[k];
        }
    }

    fn scale(&mut self, by: f64) {
        *self = Expansion {
            scans: self.scans * by,
            in_range: self.in_range * by,
            join_probes: self.join_probes * by,
            join_visits: self.join_visits * by,
            join_found: self.join_found * by,
            window_lists: self.window_lists * by,
            join_lists: self.join_lists * by,
            sampled: self.sampled * by,
            passed: self.passed.map(|p| p * by),
        };
    }

    fn rate(&self, phase: Phase) -> f64 {
        if self.sampled > 0.0 { self.passed[phase as usize] / self.sampled } else { 1.0 }
    }
}

/// Which measurements an expansion feeds: all candidate queries, or those the tuple's
/// attributes leave.
pub const ALL: usize = 0;
pub const PRUNED: usize = 1;

#[derive(Clone, Debug)]
pub struct TypeManager {
    pub adaptive: bool,
    pub order: Order,
    pub reorders: u64,
    pub period: u64,
    pub sample_every: u64,
    /// Weight old measurements keep at each re-measure.
    pub decay: f64,
    /// New sampled tuples a re-measure waits for.
    pub min_samples: u64,
    /// A new order must look this much cheaper to replace the current one.
    pub hysteresis: f64,
    /// Selectivity per type (A, J, W) at the last re-measure: the share of sampled
    /// candidates passing each phase, for all candidate queries.
    pub selectivity: [f64; 3],
    tuples: f64,
    /// Sampled tuples with single-stream queries: without A first, their own
    /// attribute check still costs one comparison before their results.
    singles: f64,
    sums: [Expansion; 2],
    fresh: u64,
    /// Events evaluated: what sampling and periods count.
    seen: u64,
}

impl Default for TypeManager {
    fn default() -> Self {
        TypeManager::new(None, 128)
    }
}

impl TypeManager {
    /// `order`: a static order, or None for adaptive (starting from AJW).
    pub fn new(order: Option<Order>, period: u64) -> Self {
        TypeManager {
            adaptive: order.is_none(),
            order: order.unwrap_or([A, J, W]),
            reorders: 0,
            period: period.max(1),
            sample_every: 32,
            decay: 0.5,
            min_samples: 4,
            hysteresis: 0.9,
            selectivity: [1.0; 3],
            tuples: 0.0,
            singles: 0.0,
            sums: [Expansion::default(); 2],
            fresh: 0,
            seen: 0,
        }
    }

    /// Count an evaluated event; true when it is to be sampled.
    pub fn count_event(&mut self) -> bool {
        self.seen += 1;
        self.adaptive && (self.seen - 1) % self.sample_every == 0
    }

    /// Whether the event counted last ends a period (time to re-measure).
    pub fn period_ends(&self) -> bool {
        self.adaptive && self.seen % self.period == 0
    }

    /// A sampled tuple: the expansions it would make into each partner stream, for all
    /// its candidate queries and for those its attributes leave, and whether some of
    /// its queries are over its stream alone.
    pub fn observe(&mut self, expansions: &[[Expansion; 2]], single: bool) {
        self.tuples += 1.0;
        self.singles += single as u8 as f64;
        self.fresh += 1;
        for e in expansions {
            self.sums[ALL].add(&e[ALL]);
            self.sums[PRUNED].add(&e[PRUNED]);
        }
    }

    /// Turn the samples into selectivities and possibly reorder, once enough new
    /// samples came in.
    pub fn remeasure(&mut self) {
        if self.fresh < self.min_samples {
            return;
        }
        self.fresh = 0;
        for phase in [A, J, W] {
            self.selectivity[phase as usize] = self.sums[ALL].rate(phase);
        }
        let current = self.cost(self.order);
        let best = STATIC_ORDERS
            .iter()
            .copied()
            .min_by(|a, b| self.cost(*a).total_cmp(&self.cost(*b)).then((*a != self.order).cmp(&(*b != self.order))))
            .unwrap();
        if best != self.order && self.cost(best) < self.hysteresis * current {
            self.order = best;
            self.reorders += 1;
        }
        self.tuples *= self.decay;
        self.singles *= self.decay;
        for s in &mut self.sums {
            s.scale(self.decay);
        }
    }

    /// Expected comparisons per tuple under `order`, from the decayed sums.
    pub fn cost(&self, order: Order) -> f64 {
        if self.tuples <= 0.0 {
            return 0.0;
        }
        let pruned = order[0] == A;
        let e = &self.sums[if pruned { PRUNED } else { ALL }];
        let (retrieval, found) = if join_first(order) {
            (e.join_probes + e.join_visits, e.join_found)
        } else {
            (e.scans + e.in_range, e.in_range)
        };
        let join_rate = if join_first(order) && e.join_found > 0.0 {
            (e.rate(J) * e.in_range / e.join_found).min(1.0)
        } else {
            e.rate(J)
        };
        // per candidate: list probes of each phase, weighted by the share reaching it
        let per_found = |lists: f64| if e.in_range > 0.0 { lists / e.in_range } else { 0.0 };
        let mut per_candidate = 0.0;
        let mut through = 1.0;
        for phase in order {
            let (probes, rate) = match phase {
                A => (if pruned { 1.0 } else { 2.0 }, e.rate(A)),
                W => (1.0 + per_found(e.window_lists), e.rate(W)),
                J => (per_found(e.join_lists), join_rate),
            };
            per_candidate += through * probes;
            through *= rate;
        }
        ((if pruned { self.tuples } else { self.singles }) + retrieval + found * per_candidate) / self.tuples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expansion(in_range: f64, join: Option<f64>, passed: [f64; 3]) -> Expansion {
        let (probes, visits, found) = match join {
            Some(v) => (1.0, v, v * 0.5),
            None => (1.0, in_range, in_range),
        };
        Expansion {
            scans: 1.0,
            in_range,
            join_probes: probes,
            join_visits: visits,
            join_found: found,
            window_lists: in_range,
            join_lists: in_range,
            sampled: 4.0,
            passed,
        }
    }

    #[test]
    fn settings_parse_and_name() {
        assert_eq!(parse("adaptive"), Ok(None));
        assert_eq!(parse("wja"), Ok(Some([W, J, A])));
        assert!(parse("AAJ").is_err());
        assert_eq!(STATIC_ORDERS.map(name), ["AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA"]);
        assert!(join_first([A, J, W]) && join_first([J, W, A]) && !join_first([W, A, J]));
    }

    #[test]
    fn a_static_order_neither_samples_nor_reorders() {
        let mut m = TypeManager::new(Some([W, A, J]), 1);
        assert!(!m.count_event() && !m.period_ends());
        m.remeasure();
        assert_eq!((m.order, m.reorders), ([W, A, J], 0));
    }

    #[test]
    fn an_adaptive_order_samples_one_event_in_sample_every() {
        let mut m = TypeManager::new(None, 32);
        let sampled: Vec<u64> = (0..128).filter(|_| m.count_event()).collect();
        assert_eq!(sampled.len(), 4);
        assert!(m.period_ends());
    }

    #[test]
    fn rare_attributes_put_a_first() {
        let mut m = TypeManager::new(None, 1);
        for _ in 0..8 {
            // the tuple's attributes leave no query: pruning first retrieves nothing
            m.observe(&[[expansion(40.0, None, [0.0, 4.0, 4.0]), Expansion::default()]], false);
        }
        m.remeasure();
        assert_eq!(m.order[0], A);
        assert_eq!(m.selectivity, [0.0, 1.0, 1.0]);
    }

    #[test]
    fn a_narrow_join_probe_puts_j_before_w() {
        let mut m = TypeManager::new(Some([W, A, J]), 1);
        m.adaptive = true;
        let e = expansion(100.0, Some(4.0), [4.0, 1.0, 4.0]);
        for _ in 0..8 {
            m.observe(&[[e, e]], false);
        }
        m.remeasure();
        assert!(join_first(m.order), "{:?}", m.order);
        assert_eq!(m.reorders, 1);
    }

    #[test]
    fn a_failing_window_goes_before_the_lists_it_saves() {
        let mut m = TypeManager::new(None, 1);
        // no JES probe; windows fail almost always, joins pass
        let e = expansion(50.0, None, [4.0, 4.0, 0.0]);
        for _ in 0..8 {
            m.observe(&[[e, e]], false);
        }
        m.remeasure();
        assert!(m.cost([A, W, J]) < m.cost([A, J, W]));
        assert_eq!(m.order[0], W);
    }

    #[test]
    fn a_tuple_without_partners_keeps_a_first() {
        let mut m = TypeManager::new(None, 1);
        for _ in 0..8 {
            // single-stream queries only: every order checks the tuple's attributes once
            m.observe(&[], true);
        }
        m.remeasure();
        assert_eq!(STATIC_ORDERS.map(|o| m.cost(o)), [1.0; 6]);
        assert_eq!((m.order, m.reorders), ([A, J, W], 0));
    }

    #[test]
    fn hysteresis_keeps_an_order_not_cheaper_by_enough() {
        let mut m = TypeManager::new(None, 1);
        m.hysteresis = 0.0;
        let e = expansion(50.0, None, [4.0, 4.0, 0.0]);
        for _ in 0..8 {
            m.observe(&[[e, e]], false);
        }
        m.remeasure();
        assert_eq!((m.order, m.reorders), ([A, J, W], 0));
    }
}
