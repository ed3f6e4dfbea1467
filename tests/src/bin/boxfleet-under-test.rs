//! The `boxfleet` program, built by `cargo test` as this package's own binary: its entry point
//! is `boxfleet_node::main`, so the scenarios run exactly what users run, and cargo compiles it
//! with the features the tests resolve (one build of the dependency graph, not two).

fn main() {
    boxfleet_node::main()
}
