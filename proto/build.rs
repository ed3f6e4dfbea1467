//! Generates the gRPC types from `boxfleet/v1/*.proto` with the protoc that the
//! protoc-bin-vendored crate ships: a fresh machine has no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use_vendored_protoc(&protoc_bin_vendored::protoc_bin_path()?);
    let protos = [
        "boxfleet/v1/common.proto",
        "boxfleet/v1/runs.proto",
        "boxfleet/v1/engine.proto",
        "boxfleet/v1/ops.proto",
        "boxfleet/v1/fleet.proto",
    ];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("boxfleet_descriptor.bin"))
        // the dashboard's JSON API serves the same messages the gRPC API does
        .type_attribute(".boxfleet.v1", "#[derive(serde::Serialize)]")
        .compile_protos(&protos, &["."])?;
    Ok(())
}

/// tonic-prost-build reads `PROTOC` from the environment.
#[allow(unsafe_code)]
fn use_vendored_protoc(protoc: &std::path::Path) {
    // SAFETY: a build script's main has started no other thread that could read the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
}
