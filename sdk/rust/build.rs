// Generates the API's message types from proto/airlock/v1/airlock.proto (at the repository's
// root) with prost-build and Debian's protoc. They stay private to the crate: the SDK's public
// types are its own.
fn main() {
    let proto = "../../proto/airlock/v1/airlock.proto";
    println!("cargo:rerun-if-changed={}", proto);
    let mut config = prost_build::Config::new();
    // Output and file pieces arrive as `bytes::Bytes`, handed on without a copy.
    config.bytes(["."]);
    if let Err(e) = config.compile_protos(&[proto], &["../../proto"]) {
        eprintln!(
            "generating the API's types from {}: {} (is protoc installed? apt-get install protobuf-compiler)",
            proto, e
        );
        std::process::exit(1);
    }
}
