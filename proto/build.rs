//! Generates the gRPC types from `boxfleet/v1/*.proto` with the protoc that the
//! protoc-bin-vendored crate ships: a fresh machine has no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use_vendored_protoc(&protoc_bin_vendored::protoc_bin_path()?);
    let protos = ["boxfleet/v1/common.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    tonic_prost_build::configure().compile_protos(&protos, &["."])?;
    Ok(())
}

/// tonic-prost-build reads `PROTOC` from the environment.
#[allow(unsafe_code)]
fn use_vendored_protoc(protoc: &std::path::Path) {
    // SAFETY: a build script's main has started no other thread that could read the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
}
