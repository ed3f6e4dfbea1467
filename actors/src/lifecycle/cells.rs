//! The cells a node makes boxes in, as a reload leaves them ([`Cells`], [`CellsInForce`]): the
//! backend of each cell the company reaches, and the backends of cells a reload dropped, kept
//! as *retired* for the runs still in them — polled, collected, reaped and killed through the
//! backend that made them — while no new box is ever made there (spec line 83).
//!
//! A reload builds the next [`Cells`]; [`CellsInForce::apply`] keeps the running instance of
//! every cell whose configuration did not change, so a reload that touched nothing else never
//! swaps a backend under its boxes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::ports::Provider;

/// How long a box lives without a keepalive (`default_timeout_seconds`).
pub const DEFAULT_BOX_TIMEOUT: Duration = Duration::from_secs(900);

/// One cell's backend and what it was built from (compared across a reload, never shown).
#[derive(Clone)]
pub struct Cell {
    pub provider: Arc<dyn Provider>,
    pub built_from: String,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cell")
            .field("provider", &self.provider.cell())
            .finish_non_exhaustive()
    }
}

/// The cells a company reaches, as built from one revision of it.
#[derive(Debug, Clone)]
pub struct Cells {
    pub active: BTreeMap<String, Cell>,
    /// the cell a record that names none ran in
    pub default_cell: String,
    /// how long a box lives between keepalives
    pub box_timeout: Duration,
}

impl Cells {
    /// `providers` by cell (built from nothing this reload compares), the default cell and
    /// the default keepalive.
    pub fn of(providers: BTreeMap<String, Arc<dyn Provider>>, default_cell: &str) -> Cells {
        Cells {
            active: providers
                .into_iter()
                .map(|(name, provider)| {
                    let cell = Cell {
                        provider,
                        built_from: String::new(),
                    };
                    (name, cell)
                })
                .collect(),
            default_cell: default_cell.to_owned(),
            box_timeout: DEFAULT_BOX_TIMEOUT,
        }
    }
}

/// What a reload did to the cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellChange {
    pub added: Vec<String>,
    /// dropped from the catalogue: kept for the runs in them, no new box
    pub retired: Vec<String>,
    /// rebuilt from a changed configuration
    pub rebuilt: Vec<String>,
}

/// The cells in force: the active ones and the retired ones.
#[derive(Debug, Clone)]
pub struct CellsInForce {
    pub cells: Cells,
    pub retired: BTreeMap<String, Arc<dyn Provider>>,
}

impl CellsInForce {
    pub fn new(cells: Cells) -> Self {
        CellsInForce {
            cells,
            retired: BTreeMap::new(),
        }
    }

    /// Puts `next` in force: a cell whose configuration is unchanged keeps its running
    /// backend; a dropped cell's backend is retired; a cell that comes back leaves retirement.
    pub fn apply(&mut self, mut next: Cells) -> CellChange {
        let mut change = CellChange::default();
        for (name, cell) in &mut next.active {
            match self.cells.active.get(name) {
                Some(old) if old.built_from == cell.built_from => *cell = old.clone(),
                Some(old) => {
                    change.rebuilt.push(name.clone());
                    // a backend of another kind now answers the cell (`fake: true` in place of
                    // a real one): the boxes the old one made are its still
                    if old.provider.cell() == name && cell.provider.cell() != name {
                        self.retired.insert(name.clone(), old.provider.clone());
                        continue;
                    }
                }
                None => change.added.push(name.clone()),
            }
            if cell.provider.cell() == name {
                self.retired.remove(name);
            }
        }
        for (name, old) in &self.cells.active {
            if !next.active.contains_key(name) {
                change.retired.push(name.clone());
                self.retired.insert(name.clone(), old.provider.clone());
            }
        }
        self.cells = next;
        change
    }

    /// The backend new boxes of `cell` are made with: active cells only.
    pub fn for_new_box(&self, cell: &str) -> Option<Arc<dyn Provider>> {
        self.cells.active.get(cell).map(|c| c.provider.clone())
    }

    /// The backend of a box already in `cell` (a row's placement names the kind of backend
    /// that made it): the active one when it is of that kind, else the retired one, else the
    /// active one.
    pub fn for_existing_box(&self, cell: &str) -> Option<Arc<dyn Provider>> {
        let active = self.for_new_box(cell);
        match active {
            Some(provider) if provider.cell() == cell => Some(provider),
            active => self.retired.get(cell).cloned().or(active),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ports::{BoxError, BoxSpec, Sandbox};

    /// A backend that makes nothing: the test compares instances, never boxes.
    #[derive(Debug)]
    struct Nothing(&'static str);

    #[async_trait::async_trait]
    impl Provider for Nothing {
        fn cell(&self) -> &str {
            self.0
        }
        async fn create(&self, _: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
            Err(BoxError::Failed("makes nothing".into()))
        }
        async fn attach(&self, id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
            Err(BoxError::Gone(id.into()))
        }
        async fn connect(&self, id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
            Err(BoxError::Gone(id.into()))
        }
        async fn kill(&self, _: &str) -> Result<(), BoxError> {
            Ok(())
        }
    }

    fn cells(names: &[(&'static str, &str)], default: &str) -> Cells {
        Cells {
            active: names
                .iter()
                .map(|(name, from)| {
                    let kind = if from.starts_with("fake") {
                        "fake"
                    } else {
                        name
                    };
                    let cell = Cell {
                        provider: Arc::new(Nothing(kind)),
                        built_from: (*from).to_owned(),
                    };
                    ((*name).to_owned(), cell)
                })
                .collect(),
            default_cell: default.to_owned(),
            box_timeout: DEFAULT_BOX_TIMEOUT,
        }
    }

    /// A dropped cell is retired (reachable for its boxes, never for a new one), an unchanged
    /// one keeps its running backend, a changed one is rebuilt, and a cell that comes back
    /// leaves retirement.
    #[test]
    fn a_reload_retires_dropped_cells_and_keeps_unchanged_backends() {
        let mut force =
            CellsInForce::new(cells(&[("direct", "d1"), ("container", "c1")], "direct"));
        let direct = force.for_new_box("direct").expect("direct");
        let change = force.apply(cells(&[("direct", "d1"), ("e2b", "e1")], "e2b"));
        assert_eq!(change.added, ["e2b"]);
        assert_eq!(change.retired, ["container"]);
        assert!(Arc::ptr_eq(
            &direct,
            &force.for_new_box("direct").expect("kept")
        ));
        assert!(
            force.for_new_box("container").is_none(),
            "no new box in a retired cell"
        );
        assert!(
            force.for_existing_box("container").is_some(),
            "its boxes are still reached"
        );
        assert_eq!(force.cells.default_cell, "e2b");

        let change = force.apply(cells(&[("direct", "d2"), ("container", "c2")], "direct"));
        assert_eq!(change.rebuilt, ["direct"]);
        assert_eq!(change.added, ["container"]);
        assert_eq!(change.retired, ["e2b"]);
        assert!(!Arc::ptr_eq(
            &direct,
            &force.for_new_box("direct").expect("rebuilt")
        ));
        assert!(
            !force.retired.contains_key("container"),
            "back in the catalogue"
        );

        // the fake in place of a real backend: a real box is still reached through the real one
        let real = force.for_new_box("direct").expect("real");
        force.apply(cells(&[("direct", "fake"), ("fake", "fake")], "direct"));
        assert_eq!(force.for_new_box("direct").expect("fake").cell(), "fake");
        assert!(Arc::ptr_eq(
            &real,
            &force.for_existing_box("direct").expect("the real one")
        ));
        assert_eq!(force.for_existing_box("fake").expect("fake").cell(), "fake");
    }
}
