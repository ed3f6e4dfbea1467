//! The `boxfleet` binary (DESIGN §16).

fn main() {
    eprintln!("boxfleet: the node and the CLI are being built");
    std::process::exit(2);
}
