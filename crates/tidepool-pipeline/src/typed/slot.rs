//! The buffer of a typed pipeline: one recycled cell per stage boundary.

use std::any::Any;

/// Makes one empty cell (an `Option<T>` for a boundary's type `T`).
pub(crate) type CellMaker = fn() -> Box<dyn Any + Send>;

/// An empty cell of type `T`, boxed once per buffer.
pub(crate) fn cell<T: Send + 'static>() -> Box<dyn Any + Send> {
    Box::new(None::<T>)
}

/// A typed pipeline's buffer: cell `k` holds the item between stage `k`
/// and stage `k + 1` (cell 0: the source's output). The cells are made
/// once per buffer and recycled with it, so a run allocates nothing per
/// item for the framework; a stage takes its input out of its cell and
/// puts its output into the next one, so every cell is empty again once
/// the sink has taken the item. An empty input cell is the empty last
/// buffer of the stream's end: the stage passes it on without a call.
pub struct Slot {
    cells: Box<[Box<dyn Any + Send>]>,
}

impl Slot {
    pub(crate) fn new(makers: &[CellMaker]) -> Self {
        Slot {
            cells: makers.iter().map(|m| m()).collect(),
        }
    }

    fn cell<T: 'static>(&mut self, k: usize) -> &mut Option<T> {
        self.cells[k]
            .downcast_mut::<Option<T>>()
            .expect("a typed builder wires each cell to its stages' types")
    }

    /// Take the item out of cell `k` (`None`: the stream's empty end).
    pub(crate) fn take<T: 'static>(&mut self, k: usize) -> Option<T> {
        self.cell::<T>(k).take()
    }

    /// Put an item into cell `k`.
    pub(crate) fn put<T: 'static>(&mut self, k: usize, item: T) {
        *self.cell::<T>(k) = Some(item);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("cells", &self.cells.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_move_from_cell_to_cell() {
        let mut s = Slot::new(&[cell::<String>, cell::<usize>]);
        s.put(0, "four".to_string());
        let x: String = s.take(0).unwrap();
        s.put(1, x.len());
        assert_eq!(s.take::<String>(0), None);
        assert_eq!(s.take::<usize>(1), Some(4));
        assert_eq!(s.take::<usize>(1), None);
    }

    #[test]
    #[should_panic(expected = "wires each cell")]
    fn a_wrong_type_is_a_bug_caught_at_once() {
        let mut s = Slot::new(&[cell::<String>]);
        let _ = s.take::<u32>(0);
    }
}
