fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Prefer the PROTOC that .cargo/config.toml points at; fall back to the vendored binary so the
    // crate also builds when used from outside this workspace.
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    // The descriptor set feeds gRPC server reflection, so grpcurl needs no .proto files.
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("batchfleet_descriptor.bin"))
        .compile_protos(&["proto/fleet.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/fleet.proto");
    Ok(())
}
