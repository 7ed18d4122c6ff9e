//! Compiles the gnostic OpenAPI v2 subset the sim encodes `/openapi/v2` with (protoc comes from
//! `.cargo/config.toml`'s PROTOC).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    prost_build::compile_protos(&["proto/openapiv2.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/openapiv2.proto");
    Ok(())
}
