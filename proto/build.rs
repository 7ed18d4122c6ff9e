fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Prefer the PROTOC that .cargo/config.toml points at; fall back to the vendored binary so the
    // crate also builds when used from outside this workspace.
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    tonic_prost_build::configure().compile_protos(&["proto/fleet.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/fleet.proto");
    Ok(())
}
