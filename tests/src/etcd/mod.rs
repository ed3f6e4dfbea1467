//! Real etcd on loopback, never a mock: [`EtcdServer`] (one member: shared, dedicated or
//! secured) and [`EtcdCluster`] (several members a test kills, stops and restarts).

mod bounds;
mod cluster;
mod process;
mod server;

pub use bounds::{ETCD_UP_WITHIN, STORE_CALL_TIMEOUT};
pub use cluster::EtcdCluster;
pub use server::{EtcdServer, Secured};
