//! `fixed:N` — the thesis's static thread pool: the size never changes by itself.

use super::{Decision, Observation, SizingPolicy};

/// A static pool. With a size it pins the pool to exactly that many workers
/// (`min = max = target = N`); without one it keeps whatever the builder set.
/// Either way it never spawns on demand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fixed {
    size: Option<usize>,
}

impl Fixed {
    /// Pin the pool to `size` workers.
    pub fn new(size: usize) -> Self {
        Fixed { size: Some(size) }
    }

    /// Keep the builder's sizes; only turn off on-demand growth.
    pub fn keep() -> Self {
        Fixed { size: None }
    }
}

impl SizingPolicy for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }

    fn decide(&mut self, _obs: &Observation) -> Decision {
        let mut decision = Decision {
            grow_on_demand: Some(false),
            reason: "static pool".into(),
            ..Decision::default()
        };
        if let Some(n) = self.size {
            decision.target = Some(n);
            decision.min = Some(n);
            decision.max = Some(n);
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_the_size_and_never_grows() {
        let d = Fixed::new(8).decide(&Observation::default());
        assert_eq!((d.target, d.min, d.max), (Some(8), Some(8), Some(8)));
        assert_eq!(d.grow_on_demand, Some(false));
    }

    #[test]
    fn keep_leaves_sizes_alone() {
        let d = Fixed::keep().decide(&Observation::default());
        assert_eq!((d.target, d.min, d.max), (None, None, None));
        assert_eq!(d.grow_on_demand, Some(false));
    }
}
