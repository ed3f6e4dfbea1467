//! boxfleet's sandbox backends (DESIGN §9): `fake` and `direct`. Both implement the
//! [`Provider`](boxfleet_actors::ports::Provider) and
//! [`Sandbox`](boxfleet_actors::ports::Sandbox) ports and pass one box-contract suite
//! ([`contract`], feature `contract`).

pub mod container;
#[cfg(feature = "contract")]
pub mod contract;
pub mod direct;
pub mod disk;
pub mod e2b;
pub mod fake;

pub use container::{ContainerConfig, ContainerProvider, ContainerSandbox};
pub use direct::{DirectProvider, DirectSandbox};
pub use disk::DiskBudget;
pub use fake::{FakeCounters, FakeKeepalive, FakeNode, FakeProvider, FakeSandbox, ScriptedJob};
