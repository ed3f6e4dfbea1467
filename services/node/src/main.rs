//! The `boxfleet` binary: everything is in the library (`lib.rs`).

fn main() {
    boxfleet_node::main()
}
